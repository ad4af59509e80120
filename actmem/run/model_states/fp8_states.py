"""The model states FP8 training adds on each GPU (Transformer Engine).

Every Transformer layer's four TE linear modules keep, beside the bf16
weights, their FP8 weight copies (row-wise and column-wise, cached across
micro-batches) and their delayed-scaling state (scales and amax history):
:func:`actmem.layer.fp8.fp8_state_bytes`, which cites TE's code. A pipeline
stage holds that for each of its layers; the embedding and the output layer
stay in bf16 (Megatron-LM's ``fp8_output_proj`` is off by default). These
bytes are neither sharded by the distributed optimizer nor by ZeRO (TE
keeps them in the modules, not in the optimizer). The recipe, FP8
parameters (``--fp8-param-gather``) and the GPU change them
(:func:`fp8_state_change`, a feature of :mod:`actmem.run.features`).
"""

from __future__ import annotations

from .lora_states import layers_per_stage
from ..job.model import ModelConfig
from ...layer.fp8 import FP8_RECIPES, fp8_state_bytes
from ...validate import choice, flag, instance


def fp8_stage_bytes(model: ModelConfig, fp8: str, t: int = 1, p: int = 1,
                    stage_layers=None) -> list[int]:
    """Bytes of FP8 weight copies and scaling state on one GPU of each
    pipeline stage, stage 0 first.

    >>> from actmem import PRESETS
    >>> fp8_stage_bytes(PRESETS["llama2-7b"], "hybrid", t=8)
    [1619006976]

    Raises:
        TypeError: ``model`` is not a :class:`actmem.ModelConfig`.
        ValueError: an MoE model (FP8 is modelled for dense layers), or as
            :class:`actmem.LayerConfig` (TE's dimension checks) and
            :func:`actmem.split_layers`.
    """
    instance("model", model, ModelConfig, "actmem.PRESETS['llama2-7b']")
    if model.num_experts is not None:
        raise ValueError(f"fp8={fp8!r} is modelled for dense models; this model has "
                         f"num_experts={model.num_experts}: use fp8=None")
    per_layer = sum(fp8_state_bytes(model.layer(t, moe=False, fp8=fp8)).values())
    return [n * per_layer for n in layers_per_stage(model, p, stage_layers)]


def fp8_transpose(gpu) -> bool:
    """Whether TE's FP8 copies keep a transpose on ``gpu`` (an
    :class:`actmem.GPU`, or None: Hopper): its FP8 GEMMs take only the TN
    layout below compute capability 10.0 (TE's ``utils.py``:
    is_non_tn_fp8_gemm_supported)."""
    return (gpu.compute_capability if gpu else (9, 0)) < (10, 0)


def fp8_state_change(model: ModelConfig, t: int, fp8: str, recipe: str, param_gather: bool,
                     transpose: bool) -> int:
    """Bytes per layer that ``recipe``, ``param_gather`` and ``transpose``
    change against what :func:`fp8_stage_bytes` counts (delayed scaling,
    cached copies with Hopper's transpose), :func:`actmem.layer.fp8.fp8_state_bytes`."""
    counted = fp8_state_bytes(model.layer(t, moe=False, fp8=fp8))
    wanted = fp8_state_bytes(model.layer(t, moe=False, fp8=fp8, fp8_recipe=recipe),
                             transpose=transpose, param_gather=param_gather)
    return sum(wanted.values()) - sum(counted.values())


def check_fp8_job(job) -> None:
    """``fp8_recipe`` and ``fp8_param_gather`` of a job: each alone, then
    context parallelism under delayed scaling (not modelled) and FP8
    parameters' rules (Megatron-LM's ``arguments.py``: they need the
    distributed optimizer, and FP8).

    Raises:
        TypeError, ValueError: the option, its value and what is allowed.
    """
    choice("fp8_recipe", job.fp8_recipe, FP8_RECIPES)
    flag("fp8_param_gather", job.fp8_param_gather)
    if job.fp8 is None and (job.fp8_recipe != "delayed" or job.fp8_param_gather):
        raise ValueError(f"fp8_recipe={job.fp8_recipe!r}, fp8_param_gather="
                         f"{job.fp8_param_gather} need fp8 (a format); without FP8 leave them "
                         "'delayed' and False")
    if job.fp8 and job.cp > 1 and job.fp8_recipe == "delayed":
        raise ValueError(f"fp8={job.fp8!r} with cp={job.cp} under delayed scaling: the output "
                         "projection's FP8 copy beside the context-parallel attention's saved "
                         "output is not modelled (actmem.layer.fp8); use cp=1, "
                         "fp8_recipe='tensorwise' (the projection keeps its 16-bit input) or "
                         "fp8=None")
    if job.fp8_param_gather and not (job.distributed_optimizer and job.accounting == "megatron"):
        raise ValueError("fp8_param_gather=True needs Megatron-LM's distributed optimizer "
                         "(accounting='megatron', distributed_optimizer=True): its fp32 main "
                         "parameters are the FP8 parameters' high-precision copy "
                         "(arguments.py asserts it)")

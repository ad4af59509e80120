"""The model states FP8 training adds on each GPU (Transformer Engine).

Every Transformer layer's TE linear modules (four in a dense layer; in an
MoE layer the attention's, the shared experts' and each local expert's
GEMMs) keep, beside the bf16 weights, their FP8 weight copies (row-wise and
column-wise, cached across micro-batches) and their delayed-scaling state
(scales and amax history): :func:`actmem.layer.fp8_weights.fp8_state_bytes`,
which cites TE's code. A pipeline stage holds that for each of its layers;
the embedding and the output layer stay in bf16 (Megatron-LM's
``fp8_output_proj`` is off by default). These
bytes are neither sharded by the distributed optimizer nor by ZeRO (TE
keeps them in the modules, not in the optimizer). The recipe, FP8
parameters (``--fp8-param-gather``) and the GPU change them
(:func:`fp8_stage_bytes`' options, a feature of :mod:`actmem.run.features`).
"""

from __future__ import annotations

from .placement import stage_layer_kinds
from ..job.model import ModelConfig
from ...layer.fp8 import FP8_RECIPES
from ...layer.fp8_weights import fp8_state_bytes
from ...validate import choice, flag, instance


def fp8_stage_bytes(model: ModelConfig, fp8: str, t: int = 1, p: int = 1,
                    stage_layers=None, *, ep: int = 1, etp: int | None = None,
                    moe_layers=None, recipe: str = "delayed", transpose: bool = True,
                    param_gather: bool = False) -> list[int]:
    """Bytes of FP8 weight copies and scaling state on one GPU of each
    pipeline stage, stage 0 first: each dense layer's and each MoE layer's
    (its E/ep local experts over etp)
    :func:`actmem.layer.fp8_weights.fp8_state_bytes` under ``recipe``,
    ``transpose`` and ``param_gather``; ``moe_layers`` as
    :func:`actmem.run.model_states.placement.stage_layer_kinds`.

    >>> from actmem import PRESETS
    >>> fp8_stage_bytes(PRESETS["llama2-7b"], "hybrid", t=8)
    [1619006976]

    Raises:
        TypeError: ``model`` is not a :class:`actmem.ModelConfig`.
        ValueError: as :class:`actmem.LayerConfig` (TE's dimension checks),
            :func:`actmem.split_layers` and
            :func:`~actmem.run.model_states.placement.stage_layer_kinds`.
    """
    instance("model", model, ModelConfig, "actmem.PRESETS['llama2-7b']")
    options = {"fp8": fp8, "fp8_recipe": recipe}

    def per_layer(moe: bool) -> int:
        kind = {"moe": True, "ep": ep, "etp": etp} if moe else {"moe": False}
        layer = model.layer(t, moe and t > 1, **kind, **options)  # MoE at t > 1: SP
        return sum(fp8_state_bytes(layer, transpose=transpose,
                                   param_gather=param_gather).values())
    kinds = stage_layer_kinds(model, p, stage_layers, moe_layers)
    dense = per_layer(False)
    moe = per_layer(True) if model.num_experts is not None else 0
    return [(n - n_moe) * dense + n_moe * moe for n, n_moe in kinds]


def check_fp8_layers(model: ModelConfig, t: int, sequence_parallel: bool, recompute: str,
                     fp8: str, recompute_modules=None, recipe: str = "delayed") -> None:
    """Each kind of layer ``model`` has (dense, MoE), as run under ``fp8``
    and ``recipe``, passes :func:`actmem.layer.fp8.check_fp8` (Transformer
    Engine's dimension rules and what is not modelled), each with the
    ``recompute_modules`` it takes.

    Raises:
        ValueError: as :class:`actmem.LayerConfig`.
    """
    from ...layer.recompute_modules import for_layer
    experts = model.num_experts is not None
    for kind in sorted(set(model.moe_pattern())):
        names = for_layer(recompute_modules, recompute, moe=bool(kind), has_experts=experts)
        model.layer(t, sequence_parallel, recompute, moe=bool(kind), fp8=fp8,
                    fp8_recipe=recipe, **({"recompute_modules": names} if names else {}))


def fp8_transpose(gpu) -> bool:
    """Whether TE's FP8 copies keep a transpose on ``gpu`` (an
    :class:`actmem.GPU`, or None: Hopper): its FP8 GEMMs take only the TN
    layout below compute capability 10.0 (TE's ``utils.py``:
    is_non_tn_fp8_gemm_supported)."""
    return (gpu.compute_capability if gpu else (9, 0)) < (10, 0)


def check_fp8_job(job) -> None:
    """``fp8_recipe`` and ``fp8_param_gather`` of a job: each alone, then
    context parallelism under delayed scaling (not modelled) and FP8
    parameters' rules (Megatron-LM's ``arguments.py``: they need the
    distributed optimizer, and FP8; actmem: a dense model).

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
    if job.fp8_param_gather and job.fp8_recipe in ("blockwise", "mxfp8"):
        raise ValueError(f"fp8_param_gather=True with fp8_recipe={job.fp8_recipe!r}: FP8 "
                         "parameters are modelled under delayed and tensorwise scaling "
                         "(blockwise and MXFP8 ones keep per-block scales beside the "
                         "distributed optimizer's buffers, and MXFP8's all-gather reuses the "
                         "gradient buffer: --reuse-grad-buf-for-mxfp8-param-ag); use "
                         "fp8_param_gather=False")
    if job.fp8_param_gather and job.model.num_experts is not None:
        raise ValueError(f"fp8_param_gather=True with num_experts={job.model.num_experts}: "
                         "FP8 parameters are modelled for dense models (the experts' FP8 "
                         "parameters in the expert data-parallel buffers are not); use "
                         "fp8_param_gather=False")
    if job.fp8_param_gather and not (job.distributed_optimizer and job.accounting == "megatron"):
        raise ValueError("fp8_param_gather=True needs Megatron-LM's distributed optimizer "
                         "(accounting='megatron', distributed_optimizer=True): its fp32 main "
                         "parameters are the FP8 parameters' high-precision copy "
                         "(arguments.py asserts it)")

"""The model states FP8 training adds on each GPU (Transformer Engine, delayed scaling).

Every Transformer layer's four TE linear modules keep, beside the bf16
weights, their FP8 weight copies (row-wise and column-wise, cached across
micro-batches) and their delayed-scaling state (scales and amax history):
:func:`actmem.layer.fp8.fp8_state_bytes`, which cites TE's code. A pipeline
stage holds that for each of its layers; the embedding and the output layer
stay in bf16 (Megatron-LM's ``fp8_output_proj`` is off by default). These
bytes are neither sharded by the distributed optimizer nor by ZeRO (TE
keeps them in the modules, not in the optimizer).
"""

from __future__ import annotations

from .lora_states import layers_per_stage
from ..job.model import ModelConfig
from ...layer.fp8 import fp8_state_bytes
from ...validate import instance


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

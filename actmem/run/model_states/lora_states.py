"""Model states of LoRA fine-tuning: a frozen base and trained adapters, per GPU.

With ``lora_rank`` on a :class:`actmem.ModelConfig` every weight of the
model (layers, embeddings, output layer, norms) is frozen and only the
adapters train (:mod:`actmem.layer.lora`). Frozen weights keep their storage
dtype (bf16, 2 bytes) and nothing else: no gradient (``p.grad`` stays
``None``; Megatron-LM's ``distributed_data_parallel.py`` builds its gradient
buffers from the parameters with ``requires_grad`` only), no fp32 main copy
and no Adam moments (the optimizer gets only trainable parameters:
Megatron-Bridge's PEFT freezes the base before the optimizer is built; PEFT's
``get_peft_model`` leaves the base with ``requires_grad=False``). The
adapters take the accounting's bytes per parameter
(:data:`actmem.run.model_states.states.BYTES_PER_PARAMETER`: 2 + 2 + 12 for ``"zero"``,
2 + 4 + 12 for ``"megatron"``) and its sharding over the data-parallel
ranks; ZeRO stage 3 shards the frozen weights too.
"""

from __future__ import annotations

from ..job.model import ModelConfig
from .placement import layers_per_stage
from ...layer.lora import lora_parameters

FROZEN_BYTES = 2
"""Bytes per frozen weight: its bf16 storage."""


def adapter_parameters(model: ModelConfig, t: int = 1, p: int = 1, stage_layers=None
                       ) -> list[int]:
    """The adapters' parameters on one GPU of each pipeline stage (stage 0
    first): the stage's layers times one layer's
    (:func:`actmem.layer.lora.lora_parameters`, r*(in+out)/t per adapter);
    zeros without LoRA.

    >>> from actmem import PRESETS
    >>> llama = PRESETS["llama2-7b"].with_(lora_rank=16, lora_targets=("q_proj", "v_proj"))
    >>> adapter_parameters(llama), adapter_parameters(llama, t=2, p=2)
    ([8388608], [2097152, 2097152])

    Raises:
        TypeError, ValueError: as :meth:`actmem.ModelConfig.layer` and
            :func:`actmem.split_layers`.
    """
    per_layer = lora_parameters(model.layer(t, moe=False))
    return [n * per_layer for n in layers_per_stage(model, p, stage_layers)]


def lora_model_states(frozen: int, adapters: int, bytes_per_parameter: tuple[int, int, int],
                      ranks: int, sharded: tuple[bool, bool, bool]) -> dict[str, int]:
    """Bytes of ``"weights"``, ``"gradients"`` and ``"optimizer"`` on one GPU
    for ``frozen`` frozen weights and ``adapters`` adapter parameters (module
    docstring): ``bytes_per_parameter`` and ``sharded`` (weights, gradients,
    optimizer divided over ``ranks``, rounded up) as the accounting's."""
    def share(nbytes: int, cut: bool) -> int:
        return -(-nbytes // ranks) if cut else nbytes
    w, g, o = bytes_per_parameter
    return {"weights": share(frozen * FROZEN_BYTES, sharded[0]) + share(adapters * w, sharded[0]),
            "gradients": share(adapters * g, sharded[1]),
            "optimizer": share(adapters * o, sharded[2])}

"""From one layer to a training run: whole model and pipeline stages.

Rough estimates (paper sections 4.2.3 and 4.3; notebook 05). They
multiply the per-layer figure and so inherit its assumptions. Caveats:
the real peak depends on the pipeline schedule (GPipe, 1F1B, interleaved)
and on when the backward pass frees each micro-batch's activations; ``m``
counts micro-batches a stage holds at one moment, not gradient-accumulation
steps; ``L*M/p`` (one micro-batch per stage) is not the peak. Parameters,
gradients, optimizer states, the embedding, output layer and loss, buffers
and allocator overhead are extra (notebook 05).
"""

from __future__ import annotations

from .memory import ActivationMemory
from .validate import positive_int


def _layer_bytes(per_layer: ActivationMemory | int) -> int:
    if isinstance(per_layer, ActivationMemory):
        return per_layer.total
    return positive_int("per_layer", per_layer)


def model_activation_memory(per_layer: ActivationMemory | int, L: int) -> int:
    """``L * M``: bytes for all ``L`` layers on one GPU, one micro-batch.

    Total activations memory without pipeline parallelism (sec. 4.3).

    Args:
        per_layer: an :class:`ActivationMemory` or its total in bytes.
        L: number of Transformer layers.

    Raises:
        TypeError, ValueError: ``L`` or ``per_layer`` not a positive int.

    >>> from actmem import activation_memory
    >>> model_activation_memory(activation_memory(2048, 1, 4096, 32, 8), 32) // 2**20
    5888
    """
    return positive_int("L", L) * _layer_bytes(per_layer)


def pipeline_stage_memory(per_layer: ActivationMemory | int, L: int, p: int,
                          m: int) -> int:
    """``m * (L/p) * M``: bytes one pipeline stage holds for ``m`` micro-batches.

    Pipeline parallelism (sec. 4.2.3): a stage has L/p layers; under 1F1B
    the first stage holds p micro-batches at its peak.

    Args:
        per_layer: an :class:`ActivationMemory` or its total in bytes.
        L: number of layers; p: pipeline-parallel size (divides L).
        m: micro-batches whose backward pass has not yet run on this stage
            at the moment of interest (>= 1; for 1F1B at the first stage, p).

    Raises:
        TypeError, ValueError: a value is not a positive int, or p does not
            divide L.
    """
    positive_int("L", L)
    positive_int("p", p)
    positive_int("m", m)
    if L % p:
        raise ValueError(f"p={p} must divide L={L} (each stage gets L/p layers)")
    return m * (L // p) * _layer_bytes(per_layer)

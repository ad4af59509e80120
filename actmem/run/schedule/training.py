"""From one layer to a training run: whole model and pipeline stages.

Rough estimates (paper sections 4.2.3 and 4.3; notebook 05). They
multiply the per-layer figure and so inherit its assumptions. Here ``m``
counts micro-batches a stage holds at one moment, not gradient-accumulation
steps; ``L*M/p`` (one micro-batch per stage) is not the peak. How many a
stage holds follows from the pipeline schedule: :mod:`actmem.schedules`. Parameters,
gradients, optimizer states, the embedding, output layer and loss, buffers
and allocator overhead are extra (notebook 05 lists them; notebook 09 adds them up,
with a reserve for what PyTorch's allocator does not count).
"""

from __future__ import annotations

from ...layer.memory import ActivationMemory
from ...validate import lists_keywords, positive_int


def layer_bytes(per_layer: ActivationMemory | int) -> int:
    """``M`` in bytes from an :class:`ActivationMemory` or a positive int.

    Raises:
        TypeError, ValueError: ``per_layer`` is neither.
    """
    if isinstance(per_layer, ActivationMemory):
        return per_layer.total
    return positive_int("per_layer", per_layer)


def chunk_layers(L: int, p: int, v: int = 1) -> int:
    """``L/(p*v)``: layers in one model chunk (one pipeline stage if v=1).

    Raises:
        TypeError, ValueError: a value is not a positive int, or ``p*v``
            does not divide ``L``.
    """
    L, p, v = (positive_int(name, x) for name, x in (("L", L), ("p", p), ("v", v)))
    if L % (p * v):
        if v == 1:
            raise ValueError(f"p={p} must divide L={L} (each stage gets L/p layers)")
        raise ValueError(f"p*v={p * v} (p={p}, v={v}) must divide L={L} "
                         "(each model chunk gets L/(p*v) layers)")
    return L // (p * v)


@lists_keywords
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
    return positive_int("L", L) * layer_bytes(per_layer)


@lists_keywords
def pipeline_stage_memory(per_layer: ActivationMemory | int, L: int, p: int,
                          m: int) -> int:
    """``m * (L/p) * M``: bytes one pipeline stage holds for ``m`` micro-batches.

    Pipeline parallelism (sec. 4.2.3): a stage has L/p layers. How many
    micro-batches a stage holds depends on the schedule and the stage: for
    the schedule-aware answer use :func:`actmem.simulate_schedule` and its
    ``stage_activation_memory(i, per_layer, L)`` (1F1B: stage i holds
    ``min(p - i, m)``; GPipe: all m; interleaved: chunk passes of L/(p*v)
    layers).

    Args:
        per_layer: an :class:`ActivationMemory` or its total in bytes.
        L: number of layers; p: pipeline-parallel size (divides L).
        m: micro-batches whose backward pass has not yet run on this stage
            at the moment of interest (>= 1; for 1F1B at the first stage, p).

    Raises:
        TypeError, ValueError: a value is not a positive int, or p does not
            divide L.
    """
    layers = chunk_layers(L, p)
    return positive_int("m", m) * layers * layer_bytes(per_layer)

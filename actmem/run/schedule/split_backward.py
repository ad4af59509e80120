"""What a pass still holds between its input-gradient step (I) and its
weight-gradient step (W), from the ledger.

Zero-bubble schedules split a backward pass in two (Qi et al. 2023, "Zero
Bubble Pipeline Parallelism", sec. 2): I computes the gradients of the
activations (``dX = dY W``) and passes them on; W computes the weight
gradients ``dW = X^T dY``, which read each linear layer's input ``X``. So
after I, the rows whose backward use is a weight gradient (ledger rows with
``needed_for`` starting ``"weight gradient"``: ``qkv_input``,
``proj_input``, ``fc1_input``, ``fc2_input``, :data:`actmem.layer.ledger.NEEDED_FOR`)
must stay until W; every other row has been read and can go. That is the
least a split backward must keep; PyTorch 2.13 keeps more (measured by
:mod:`actmem.measure.pipeline`: its I step keeps the autograd graph until W).

With full recomputation the ledger keeps only each layer's input; I runs
the layer's forward again, and W reads the linear inputs that rebuilt, so
the rows W needs are those of the same layer without recomputation.
"""

from __future__ import annotations

from dataclasses import asdict, replace

from ...layer.ledger import LedgerRow, ledger_rows
from ...layer.memory import ActivationMemory, activation_memory

WEIGHT_GRADIENT = "weight gradient"
"""How ``needed_for`` of a row that a weight gradient reads begins."""


def weight_gradient_rows(memory: ActivationMemory) -> tuple[LedgerRow, ...]:
    """The ledger rows one layer keeps from its I to its W (see the module
    docstring; rows of the layer without recomputation under full
    recomputation).

    Raises:
        TypeError: ``memory`` is not an :class:`ActivationMemory`.
    """
    if not isinstance(memory, ActivationMemory):
        raise TypeError("memory must be an ActivationMemory from actmem.activation_memory, "
                        f"got {type(memory).__name__}")
    rows = memory.rows
    if memory.config.recompute == "full":
        rows = ledger_rows(replace(memory.config, recompute="none"))
    return tuple(r for r in rows if r.needed_for.startswith(WEIGHT_GRADIENT))


def weight_gradient_bytes(memory: ActivationMemory) -> int:
    """Bytes one layer keeps, per micro-batch and GPU, from its I to its W.

    >>> from fractions import Fraction
    >>> from actmem import activation_memory
    >>> m = activation_memory(s=2048, b=1, h=4096, a=32, t=8)
    >>> sbh = 2048 * 1 * 4096
    >>> Fraction(weight_gradient_bytes(m), sbh), Fraction(m.total, sbh)   # 2 + 2/t + 2 + 8/t
    (Fraction(21, 4), Fraction(23, 1))

    Raises:
        TypeError: as :func:`weight_gradient_rows`.
    """
    return sum(r.bytes for r in weight_gradient_rows(memory))


def layer_weight_rows(model, t: int, sequence_parallel: bool,
                      rows: tuple[tuple[str, int], ...] | None = None,
                      layer_options: dict | None = None) -> int:
    """Bytes one layer of ``model`` keeps, per micro-batch and GPU, from its I
    to its W (:attr:`actmem.run.moments.timeline.LayerMoments.weight_rows`): the rows
    of :func:`weight_gradient_rows`, those of the layer without
    recomputation. ``rows``: that layer's (ledger key, bytes) at the run's
    precision (:func:`actmem.run.moments.precision.layer_rows`); None: the ledger's
    16-bit bytes. ``layer_options``: the run's other layer options
    (:meth:`actmem.ModelConfig.layer`).

    Raises:
        ValueError: as :meth:`actmem.ModelConfig.layer`.
    """
    ledger = activation_memory(**asdict(model.layer(t, sequence_parallel, "none",
                                                    **(layer_options or {}))))
    keys = {row.key for row in weight_gradient_rows(ledger)}
    rows = [(row.key, row.bytes) for row in ledger.rows] if rows is None else rows
    return sum(size for key, size in rows if key in keys)

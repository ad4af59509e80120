"""Compare a measurement with the ledger, row by row, and explain extras.

A ledger row matches when the storage named after it holds the ledger's
number of elements per rank; its bytes then equal the ledger's unless the
element size differs (a documented difference, e.g. a dropout mask kept
as 2-byte noise instead of a 1-byte bool). Saved storages that are no
ledger row are *extras*, each with the reason the paper leaves it out.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..layer.ledger import ledger_rows
from .run import Measurement
from .saved import SavedStorage


@dataclass(frozen=True)
class RowCheck:
    """One ledger row on one rank: ledger bytes against measured bytes.

    Attributes:
        key, name, group, placement: from the ledger row.
        ledger_bytes: the ledger's bytes on this rank.
        ledger_itemsize: the ledger's bytes per element (2, 1 or 4).
        measured_bytes: bytes of the saved storage named after the row
            (0 if nothing was saved under that name).
        measured_dtype: its dtype, or ``None``.
        measured_itemsize: its bytes per element (from torch), or 0.
    """

    key: str
    name: str
    group: str
    placement: str
    ledger_bytes: int
    ledger_itemsize: int
    measured_bytes: int
    measured_dtype: str | None
    measured_itemsize: int

    @property
    def same_elements(self) -> bool:
        """Same element count as the ledger (bytes over bytes-per-element)."""
        if not self.measured_itemsize:
            return False
        return (self.measured_bytes // self.measured_itemsize
                == self.ledger_bytes // self.ledger_itemsize)

    @property
    def exact(self) -> bool:
        """Measured bytes equal ledger bytes."""
        return self.measured_bytes == self.ledger_bytes


@dataclass(frozen=True)
class Extra:
    """A saved storage the ledger does not count, with the reason."""

    storage: SavedStorage
    why: str


@dataclass(frozen=True)
class Comparison:
    """A measurement set against the ledger of the same configuration."""

    measurement: Measurement
    rows: tuple[RowCheck, ...]
    extras: tuple[Extra, ...]

    @property
    def ledger_total(self) -> int:
        return sum(r.ledger_bytes for r in self.rows)

    @property
    def measured_rows_total(self) -> int:
        return sum(r.measured_bytes for r in self.rows)

    @property
    def extras_total(self) -> int:
        return sum(e.storage.nbytes for e in self.extras)

    def group_bytes(self, group: str, measured: bool = True) -> int:
        """Bytes of the rows in ``group``, measured or from the ledger."""
        return sum(r.measured_bytes if measured else r.ledger_bytes
                   for r in self.rows if r.group == group)


def compare(m: Measurement) -> Comparison:
    """Set ``m`` against ``actmem.ledger_rows(m.config)``."""
    by_key: dict[str, list[SavedStorage]] = {}
    for st in m.storages:
        by_key.setdefault(st.key, []).append(st)
    rows = ledger_rows(m.config)
    keys = {r.key for r in rows}
    checks = tuple(_check(r, by_key.get(r.key, [])) for r in rows)
    extras = tuple(Extra(st, explain(st, m))
                   for st in m.storages if st.key not in keys)
    return Comparison(m, checks, extras)


def _check(row, saved) -> RowCheck:
    return RowCheck(
        row.key, row.name, row.group, row.placement, row.bytes,
        row.bytes_per_element, sum(st.nbytes for st in saved),
        saved[0].dtype if saved else None, saved[0].itemsize if saved else 0)


def explain(st: SavedStorage, m: Measurement) -> str:
    """Why the paper's ledger leaves the saved storage ``st`` out."""
    op = st.saved_by[0] if st.saved_by else ""
    if op.startswith("NativeLayerNormBackward0"):
        what = "mean" if op.endswith("result1") else "reciprocal std (rstd)"
        return (f"LayerNorm {what} per token, kept so backward need not "
                f"recompute it ({st.dtype} on CPU; PyTorch's CUDA kernel keeps fp32). The paper "
                "leaves it out: s*b elements, tiny next to s*b*h.")
    if st.block == "mlp" and op == "MulBackward0.self":
        return ("silu(gate): eager SwiGLU computes silu(gate) * up as two ops "
                "and the product keeps both factors; Megatron's fused "
                "bias_swiglu keeps only gate and up and recomputes silu.")
    if st.block == "attention" and st.dtype == "float32":
        return ("scaled_dot_product_attention with dropout on CPU has no "
                "fused kernel: its math fallback upcasts to float32 and keeps "
                f"{_math_role(st, m)} (4 bytes/element).")
    return "not in the ledger"


def _math_role(st: SavedStorage, m: Measurement) -> str:
    """Which tensor of the math attention path ``st`` is, from its op/shape."""
    op, s = st.saved_by[0], m.config.s
    if op.startswith("SafeSoftmax"):
        return "the s x s softmax output"
    if op == "MulBackward0.other":
        return "the s x s dropout noise (scaled 0 or 1/(1-p)) as its mask"
    square = st.shape[-2:] == (s, s)
    if op == "BmmBackward0.self":
        return "the s x s dropout output" if square else "a copy of Q (scaled)"
    return "a copy of K (scaled)" if st.shape[-2] != s else "a copy of V"

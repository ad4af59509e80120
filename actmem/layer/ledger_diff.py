"""Compare two ledgers: which saved tensors a storage option removes,
shrinks, grows, adds or leaves alone.

Each storage option of Korthikanti et al. 2022 (sequence parallelism,
sec. 4.2.2; selective and full recomputation, sec. 5; Table 2) and of
later practice (FlashAttention, grouped-query attention, SwiGLU, no
dropout) is a change to the rows of :func:`actmem.ledger`. Matching two
results row by row, by ``key``, shows that change tensor by tensor, in
exact bytes per GPU. Taught in notebook 07 ("what each trick removes").
"""

from __future__ import annotations

from dataclasses import dataclass

from .ledger import LedgerRow
from .memory import ActivationMemory
from ..units import format_bytes

KINDS = ("removed", "shrunk", "unchanged", "grown", "added")
"""What happened to one row, from ``before`` to ``after``."""


@dataclass(frozen=True)
class RowChange:
    """One saved tensor in two ledgers.

    Attributes:
        before: the row in the first ledger, ``None`` if the tensor is new.
        after: the row in the second ledger, ``None`` if it is gone.
    """

    before: LedgerRow | None
    after: LedgerRow | None

    @property
    def key(self) -> str:
        """The row's stable identifier (same in both ledgers)."""
        return (self.after or self.before).key

    @property
    def name(self) -> str:
        """What the tensor is, in words."""
        return (self.after or self.before).name

    @property
    def bytes_before(self) -> int:
        """Bytes per GPU in the first ledger (0 if absent there)."""
        return self.before.bytes if self.before else 0

    @property
    def bytes_after(self) -> int:
        """Bytes per GPU in the second ledger (0 if absent there)."""
        return self.after.bytes if self.after else 0

    @property
    def delta(self) -> int:
        """``bytes_after - bytes_before``: negative when memory is saved."""
        return self.bytes_after - self.bytes_before

    @property
    def kind(self) -> str:
        """One of :data:`KINDS`."""
        if self.after is None:
            return "removed"
        if self.before is None:
            return "added"
        if self.delta < 0:
            return "shrunk"
        return "grown" if self.delta > 0 else "unchanged"


def diff_ledgers(before: ActivationMemory, after: ActivationMemory
                 ) -> tuple[RowChange, ...]:
    """Match the rows of two results by ``key``, in ledger order.

    Rows of ``after`` keep their order; a removed row appears where it sat
    in ``before``, ahead of any row added in its place, so the table reads
    like the layer.

    >>> import actmem
    >>> base = actmem.activation_memory(2048, 1, 4096, 32, 8)
    >>> sel = actmem.activation_memory(2048, 1, 4096, 32, 8, recompute="selective")
    >>> [c.key for c in diff_ledgers(base, sel) if c.kind == "removed"]
    ['softmax_output', 'attn_dropout_mask', 'attn_dropout_output']
    """
    position = {r.key: i for i, r in enumerate(before.rows)}
    kept = {r.key for r in after.rows}
    pending = [r for r in before.rows if r.key not in kept]
    changes: list[RowChange] = []
    for row, anchor in zip(after.rows, _anchors(position, after.rows)):
        changes += [RowChange(r, None) for r in pending if position[r.key] < anchor]
        pending = [r for r in pending if position[r.key] >= anchor]
        old = before.rows[position[row.key]] if row.key in position else None
        changes.append(RowChange(old, row))
    return tuple(changes) + tuple(RowChange(r, None) for r in pending)


def _anchors(position: dict[str, int], rows) -> list[int]:
    """For each row, the ``before`` position of the next row both ledgers share."""
    anchors, following = [], len(position)
    for row in reversed(rows):
        following = position.get(row.key, following)
        anchors.append(following)
    return anchors[::-1]


def bytes_by_kind(changes: tuple[RowChange, ...]) -> dict[str, int]:
    """Sum of ``delta`` (bytes per GPU) for each kind in :data:`KINDS`.

    The values add up to ``after.total - before.total``.
    """
    return {kind: sum(c.delta for c in changes if c.kind == kind)
            for kind in KINDS}


def changed(changes: tuple[RowChange, ...]) -> tuple[RowChange, ...]:
    """Only the rows whose bytes differ (all kinds but ``"unchanged"``)."""
    return tuple(c for c in changes if c.kind != "unchanged")


def format_changes(changes: tuple[RowChange, ...], unit: str = "MiB") -> str:
    """A plain-text table: one line per row, kind, bytes before -> after.

    A tensor absent from one ledger shows ``-`` on that side.

    Raises:
        ValueError: unknown ``unit`` (see :data:`actmem.UNITS`).
    """
    lines = [f"{'tensor':<45} {'change':<9} {'before':>12} {'after':>12}"]
    for c in changes:
        before, after = (format_bytes(n, unit) if row else "-"
                         for n, row in ((c.bytes_before, c.before),
                                        (c.bytes_after, c.after)))
        lines.append(f"{c.name:<45} {c.kind:<9} {before:>12} {after:>12}")
    return "\n".join(lines)

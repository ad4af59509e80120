"""One measured pipeline stage against the simulation (no torch needed).

:mod:`.pipeline` records, on every rank, the operations PyTorch ran and the
bytes saved for backward alive after each. Here each rank's record becomes
a :class:`StageResult` and is compared with
:func:`actmem.simulate_schedule` in PyTorch's order:

* the operations must be the simulation's, in the same order;
* every forward must add the same bytes (one pass through one chunk);
* the bytes after every operation must equal the simulation's count of
  passes in each state times what a pass keeps in that state
  (:meth:`actmem.PipelineSchedule.held_parts`): from its forward to its
  ``B`` or ``I`` the whole pass; from ``I`` to ``W`` and after ``W`` what
  PyTorch measurably keeps then, read off the first ``I`` and first ``W``
  of each chunk (``kept_after_input_grad``, ``kept_after_weight_grad``).
  Without a split backward this is the peak ``peak_in_flight(i)`` passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..run.schedule.schedules import simulate_schedule

MEGATRON_REFUSES = (("interleaved", 4, 3, 2), ("interleaved", 4, 6, 2))
"""Interleaved cases PyTorch runs and Megatron-LM refuses with its default
group size (m not a multiple of p): PyTorch groups micro-batches by
``m // max(1, m // p)``."""


def default_cases() -> tuple[tuple[str, int, int, int], ...]:
    """``(schedule, p, m, v)`` measured by default: p = 2 and 4; GPipe at
    m = p - 1, p, 2p; 1F1B and interleaved (v = 2) at m = p, 2p, plus
    :data:`MEGATRON_REFUSES`; then PyTorch's newer schedules: interleaved
    zero bubble (v = 1 at m = p, 2p; v = 2 at m = 2p), ZBV (m = p, 2p),
    DualPipeV (m = 2p, its least) and looped BFS (v = 2, m = p)."""
    cases = []
    for p in (2, 4):
        cases += [("gpipe", p, m, 1) for m in (p - 1, p, 2 * p)]
        cases += [("1f1b", p, m, 1) for m in (p, 2 * p)]
        cases += [("interleaved", p, m, 2) for m in (p, 2 * p)]
    cases += MEGATRON_REFUSES
    for p in (2, 4):
        cases += [("interleaved-zb", p, p, 1), ("interleaved-zb", p, 2 * p, 1),
                  ("interleaved-zb", p, 2 * p, 2), ("zbv", p, p, 2), ("zbv", p, 2 * p, 2),
                  ("dualpipev", p, 2 * p, 2), ("looped-bfs", p, p, 2)]
    return tuple(cases)


@dataclass(frozen=True)
class StageResult:
    """One pipeline stage (rank) of one measured schedule.

    Attributes:
        schedule, p, m, v: the case. stage: the rank (0 = first stage).
        ops: the operations PyTorch ran on this rank, in order (``"F3/1"``:
            forward of micro-batch 3 through chunk 1).
        alive: bytes saved for backward alive after each of ``ops``.
        per_microbatch: bytes one forward (one micro-batch through one
            chunk) added; ``uniform`` whether every forward added that much.
        simulated_ops: the simulation's operations for this stage
            (``order="pytorch"``); ``simulated_peak`` its peak in flight
            (a pass counted until its ``B`` or ``W``).
        kept_after_input_grad, kept_after_weight_grad: per chunk, bytes a
            pass keeps after its ``I`` and after its ``W`` (0 if none).
        modelled: bytes after each operation by the simulation's counts
            (module docstring).
    """

    schedule: str
    p: int
    m: int
    v: int
    stage: int
    ops: tuple[str, ...]
    alive: tuple[int, ...]
    per_microbatch: int
    uniform: bool
    simulated_ops: tuple[str, ...]
    simulated_peak: int
    kept_after_input_grad: tuple[int, ...]
    kept_after_weight_grad: tuple[int, ...]
    modelled: tuple[int, ...]

    @property
    def peak(self) -> int:
        """Most bytes alive after any operation."""
        return max(self.alive)

    @property
    def ratio(self) -> Fraction:
        """``peak / per_microbatch``: one-chunk passes' worth held at the peak."""
        return Fraction(self.peak, self.per_microbatch)

    @property
    def split(self) -> bool:
        """Whether the backward is split into I and W on this stage."""
        return any(op.startswith("I") for op in self.ops)

    @property
    def agrees(self) -> bool:
        """Same order as the simulation, equal forwards, and the bytes
        after every operation as modelled; without a split backward also
        everything freed at the end and the ratio equal to the simulated
        peak in flight."""
        same = (self.ops == self.simulated_ops and self.uniform
                and self.alive == self.modelled)
        return same and (self.split or (self.alive[-1] == 0
                                        and self.ratio == self.simulated_peak))


def _kept(ops, alive, full: int, v: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Per chunk, bytes a pass keeps after its first I and its first W."""
    after_i, after_w = [0] * v, [0] * v
    seen: set = set()
    before = 0
    for op, now in zip(ops, alive):
        if (op.kind, op.chunk) not in seen and op.kind == "I":
            after_i[op.chunk] = full - (before - now)
        if (op.kind, op.chunk) not in seen and op.kind == "W":
            after_w[op.chunk] = after_i[op.chunk] - (before - now)
        seen.add((op.kind, op.chunk))
        before = now
    return tuple(after_i), tuple(after_w)


def stage_result(case, rank, ops, after, added) -> StageResult:
    """A :class:`StageResult` from one rank's record: ``ops`` as printed,
    ``after`` bytes alive after each, ``added`` bytes each forward added."""
    simulated = simulate_schedule(*case, order="pytorch")
    v, full = case[3], added[0]
    mine = simulated.ops[rank]
    after_i, after_w = _kept(mine, after, full, v) if tuple(ops) == tuple(
        map(str, mine)) else ((0,) * v, (0,) * v)
    held = simulated.held_parts(rank, [{"saved": full}] * v,
                                [{"saved": n} for n in after_i],
                                [{"saved": n} for n in after_w])
    return StageResult(*case, rank, tuple(ops), tuple(after), full,
                       len(set(added)) == 1, tuple(map(str, mine)),
                       simulated.peak_in_flight(rank), after_i, after_w,
                       tuple(d["saved"] for d in held))


def as_dict(r: StageResult) -> dict:
    """A :class:`StageResult` as plain JSON types (bytes as ints)."""
    return {"schedule": r.schedule, "p": r.p, "m": r.m, "v": r.v, "stage": r.stage,
            "peak_bytes": r.peak, "microbatch_bytes": r.per_microbatch,
            "ratio": str(r.ratio), "simulated_peak_in_flight": r.simulated_peak,
            "kept_after_input_grad": list(r.kept_after_input_grad),
            "kept_after_weight_grad": list(r.kept_after_weight_grad),
            "modelled_bytes": list(r.modelled),
            "agrees": r.agrees, "ops": list(r.ops), "alive_bytes": list(r.alive)}

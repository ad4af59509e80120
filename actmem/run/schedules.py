"""Pipeline schedules as data: GPipe, 1F1B and interleaved 1F1B, stage by stage.

A schedule is, for every pipeline stage (GPU) ``i = 0 .. p-1``, the ordered
list of its operations: the forward (``F``) or backward (``B``) pass of one
micro-batch through one model chunk. Activation memory follows from the
list alone: a stage keeps a micro-batch's activations from its forward pass
until its backward pass (Korthikanti et al. 2022, sec. 4.2.3), so the number
held after each operation, :meth:`PipelineSchedule.in_flight`, is a running
count. Every closed form (``p - i`` for 1F1B, the interleaved factor
``1 + (p-1)/(p*v)``, the bubble ``(p-1)/m``) is a function of
:mod:`actmem.pipeline_formulas` tested against these lists, the way 10, 24
and 5 are sums over ledger rows.

Where each order comes from:

* ``"gpipe"`` (Huang et al. 2019): all ``m`` forward passes, then all
  ``m`` backward passes in micro-batch order, as PyTorch's ``ScheduleGPipe``
  runs them (Megatron-LM has no GPipe schedule).
* ``"1f1b"`` (PipeDream-Flush; Narayanan et al. 2021, sec. 2.2): stage ``i``
  runs ``min(p - i - 1, m)`` warm-up forwards, then one forward and one
  backward until the forwards run out, then the remaining backwards
  (Megatron-LM ``forward_backward_pipelining_without_interleaving``).
  PyTorch's ``Schedule1F1B`` counts one more warm-up forward and starts its
  steady phase with a backward: the same sequence of operations.
* ``"interleaved"`` (Narayanan et al. 2021, sec. 2.2.2): each GPU holds
  ``v`` model chunks; virtual stage ``c*p + i`` is chunk ``c`` of stage
  ``i``. Forward passes go through micro-batches in groups of ``N``: the
  group on chunk 0, then on chunk 1, ..., then the next group; backward
  passes follow the same table with the chunks reversed. Stage ``i`` runs
  ``min(2*(p-i-1) + (v-1)*N, m*v)`` warm-up forwards, then one forward and
  one backward, then the rest (Megatron-LM ``get_pp_rank_microbatches`` and
  ``get_schedule_table``). ``order="megatron"``: ``N = p`` (the default of
  ``microbatch_group_size_per_vp_stage``), which needs ``m`` a multiple of
  ``p``. ``order="pytorch"``: PyTorch's ``ScheduleInterleaved1F1B``, with
  ``N = m // max(1, m // p)``, which needs ``m`` a multiple of
  ``max(1, m // p)``. Both give the same operations when ``p`` divides ``m``.

Time (for :meth:`PipelineSchedule.bubble_fraction`): one forward pass of
one micro-batch through one stage's ``L/p`` layers takes 1 unit, its
backward pass 2 units; a chunk (``L/(p*v)`` layers) takes ``1/v`` and
``2/v``. Communication takes no time.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

from ..layer.memory import ActivationMemory
from .training import chunk_layers, layer_bytes
from ..validate import choice, integer, positive_int

SCHEDULES = ("gpipe", "1f1b", "interleaved")
"""Schedule names :func:`simulate_schedule` accepts."""
ORDERS = ("megatron", "pytorch")
"""Whose order of operations: Megatron-LM's or ``torch.distributed.pipelining``'s."""
MAX_OPERATIONS = 10**6
"""Most operations (``2*p*m*v``, all stages) a simulation builds."""
FORWARD, BACKWARD = "F", "B"
PASS_TIME = {FORWARD: Fraction(1), BACKWARD: Fraction(2)}
"""Time units of one micro-batch's pass through one whole stage (L/p layers)."""


@dataclass(frozen=True)
class Op:
    """One operation of a stage: pass ``kind`` (``"F"`` or ``"B"``) of
    micro-batch ``microbatch`` (0-based) through model chunk ``chunk``.
    Printed as ``F3`` (chunk 0) or ``F3/1`` (chunk 1)."""

    kind: str
    microbatch: int
    chunk: int = 0

    def __str__(self) -> str:
        suffix = f"/{self.chunk}" if self.chunk else ""
        return f"{self.kind}{self.microbatch}{suffix}"


@dataclass(frozen=True)
class Timed:
    """An :class:`Op` placed in time: it runs from ``start`` to ``end``
    (units of :data:`PASS_TIME`, exact fractions)."""

    op: Op
    start: Fraction
    end: Fraction


@dataclass(frozen=True)
class PipelineSchedule:
    """The operations of every pipeline stage, and what they imply.

    Attributes:
        schedule: one of :data:`SCHEDULES`. order: one of :data:`ORDERS`.
        p: pipeline stages (GPUs). m: micro-batches per optimizer step
            (the gradient-accumulation count). v: model chunks per GPU.
        ops: ``ops[i]`` is the ordered tuple of stage ``i``'s operations
            (stage 0 is the first), ``2*m*v`` of them.
    """

    schedule: str
    order: str
    p: int
    m: int
    v: int
    ops: tuple[tuple[Op, ...], ...]

    def _stage(self, i) -> int:
        return stage_index(i, self.p)

    def in_flight(self, i: int) -> list[int]:
        """Forward passes (micro-batch, chunk) stage ``i`` holds the
        activations of after each of its operations: ``+1`` for a forward,
        ``-1`` for a backward. Length ``2*m*v``.

        Raises:
            ValueError: ``i`` is not a stage index.
        """
        held, counts = 0, []
        for op in self.ops[self._stage(i)]:
            held += 1 if op.kind == FORWARD else -1
            counts.append(held)
        return counts

    def peak_in_flight(self, i: int) -> int:
        """The most forward passes stage ``i`` holds at once (an ``int``)."""
        return max(self.in_flight(i))

    def stage_activation_memory(self, i: int, per_layer: ActivationMemory | int,
                                L: int) -> int:
        """Bytes of layer activations stage ``i`` holds at its peak:
        ``peak_in_flight(i) * L/(p*v) * M``, with ``M`` the bytes one layer
        keeps per micro-batch (sec. 4.2.3).

        Args:
            per_layer: an :class:`ActivationMemory` or its total in bytes.
            L: layers in the whole model; ``p*v`` must divide it (each
                chunk gets ``L/(p*v)`` layers).

        Raises:
            TypeError, ValueError: ``L`` or ``per_layer`` not a positive
                int, ``p*v`` does not divide ``L``, or a bad ``i``.
        """
        layers = chunk_layers(L, self.p, self.v)
        return self.peak_in_flight(i) * layers * layer_bytes(per_layer)

    def peak_parts(self, i: int, parts: list[dict[str, int]]) -> dict[str, int]:
        """Bytes by part that stage ``i`` holds at its peak, when one pass
        through chunk ``c`` keeps ``parts[c]`` (name -> bytes). The peak is
        the first moment, after an operation, of the largest total
        (chunks may keep different bytes: the first stage's chunk 0 also
        holds the embedding's activations).

        Raises:
            ValueError: a bad ``i``, or not one dict per chunk.
        """
        if len(parts) != self.v:
            raise ValueError(f"parts needs one dict per model chunk (v={self.v}), "
                             f"got {len(parts)}")
        sizes = [sum(chunk.values()) for chunk in parts]
        held, best, best_total = [0] * self.v, [0] * self.v, -1
        for op in self.ops[self._stage(i)]:
            held[op.chunk] += 1 if op.kind == FORWARD else -1
            total = sum(n * size for n, size in zip(held, sizes))
            if total > best_total:
                best, best_total = list(held), total
        names = dict.fromkeys(name for chunk in parts for name in chunk)
        return {name: sum(n * chunk.get(name, 0) for n, chunk in zip(best, parts))
                for name in names}

    @cached_property
    def _ticks(self) -> tuple[tuple[tuple[Op, int, int], ...], ...]:
        return _simulate(self)

    @property
    def timeline(self) -> tuple[tuple[Timed, ...], ...]:
        """``timeline[i]``: stage ``i``'s operations with start and end
        times. Each operation starts when its stage is free and the passes
        it needs have ended (:func:`needs`); see the module docstring for
        the units."""
        v = self.v
        return tuple(tuple(Timed(op, Fraction(a, v), Fraction(b, v)) for op, a, b in stage)
                     for stage in self._ticks)

    def makespan(self) -> Fraction:
        """Time from the first forward to the last backward."""
        return Fraction(max(stage[-1][2] for stage in self._ticks), self.v)

    def bubble_fraction(self) -> Fraction:
        """Idle time over ideal time, per GPU (Narayanan et al. 2021,
        sec. 2.2): ``(makespan - 3m) / 3m``, where ``3m`` is the time a
        GPU computes (m forwards of 1 unit and m backwards of 2)."""
        ideal = self.m * (PASS_TIME[FORWARD] + PASS_TIME[BACKWARD])
        return (self.makespan() - ideal) / ideal


def stage_index(i: object, p: int) -> int:
    """``i`` as a stage index in 0..p-1 (an int or NumPy integer).

    Raises:
        ValueError: anything else; the message gives the range.
    """
    try:
        index = integer("i", i)
    except TypeError:
        index = None
    if index is None or not 0 <= index < p:
        raise ValueError(f"stage i must be an int in 0..{p - 1} (p={p}), got {i!r}")
    return index


def simulate_schedule(schedule: str, p: int, m: int, v: int = 1,
                      order: str = "megatron") -> PipelineSchedule:
    """Build a pipeline schedule's operations for every stage.

    Args:
        schedule: ``"gpipe"``, ``"1f1b"`` or ``"interleaved"``.
        p: pipeline-parallel size (stages). m: micro-batches per optimizer
            step. v: model chunks per GPU (``"interleaved"`` only, >= 2).
        order: ``"megatron"`` or ``"pytorch"`` (see the module docstring;
            they differ only in which ``m`` interleaving accepts, and in
            PyTorch's 1F1B refusing ``m < p``).

    Returns:
        A :class:`PipelineSchedule`.

    Raises:
        TypeError: ``p``, ``m`` or ``v`` not an int.
        ValueError: a value < 1, an unknown ``schedule`` or ``order``,
            ``v != 1`` without interleaving, or a combination the chosen
            implementation refuses (each message says which rule).

    >>> s = simulate_schedule("1f1b", p=4, m=8)
    >>> [s.peak_in_flight(i) for i in range(4)]
    [4, 3, 2, 1]
    >>> " ".join(map(str, s.ops[0]))
    'F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7'
    """
    p, m, v = (positive_int(name, x) for name, x in (("p", p), ("m", m), ("v", v)))
    group = check_schedule(schedule, p, m, v, order)
    if schedule == "interleaved":
        ops = [_interleaved(p, m, v, i, group) for i in range(p)]
    else:
        build = _gpipe if schedule == "gpipe" else _one_f_one_b
        ops = [build(p, m, i) for i in range(p)]
    return PipelineSchedule(schedule, order, p, m, v, tuple(map(tuple, ops)))


def check_schedule(schedule: str, p: int, m: int, v: int = 1,
                   order: str = "megatron") -> int | None:
    """The rules of :func:`simulate_schedule` (one copy, also used by the
    widgets to offer only valid values); returns the interleaved schedule's
    micro-batch group size ``N``, or None for the others.

    Raises:
        TypeError, ValueError: as :func:`simulate_schedule`.
    """
    choice("schedule", schedule, SCHEDULES)
    choice("order", order, ORDERS)
    p, m, v = (positive_int(name, x) for name, x in (("p", p), ("m", m), ("v", v)))
    if 2 * p * m * v > MAX_OPERATIONS:
        raise ValueError(f"p={p}, m={m}, v={v}: 2*p*m*v operations exceed the "
                         f"simulation's {MAX_OPERATIONS:,}; the closed forms of "
                         "actmem.pipeline_formulas answer such sizes")
    if schedule == "interleaved":
        return _interleaved_group(p, m, v, order)
    if v != 1:
        raise ValueError(f"v={v}: model chunks (v > 1) need schedule="
                         f"'interleaved'; {schedule!r} takes v=1")
    if schedule == "1f1b" and order == "pytorch" and m < p:
        raise ValueError(f"m={m} < p={p}: PyTorch's Schedule1F1B needs at least "
                         "as many micro-batches as stages (Megatron-LM's 1F1B "
                         "accepts m < p: use order='megatron')")
    return None


# ------------------------------------------------------------------ orders

def _gpipe(p: int, m: int, i: int) -> list[Op]:
    return [Op(FORWARD, j) for j in range(m)] + [Op(BACKWARD, j) for j in range(m)]


def _one_f_one_b(p: int, m: int, i: int) -> list[Op]:
    warmup = min(p - i - 1, m)
    ops = [Op(FORWARD, j) for j in range(warmup)]
    for j in range(m - warmup):
        ops += [Op(FORWARD, warmup + j), Op(BACKWARD, j)]
    return ops + [Op(BACKWARD, j) for j in range(m - warmup, m)]


def _interleaved_group(p: int, m: int, v: int, order: str) -> int:
    """Micro-batches per group ``N`` (see the module docstring), checked."""
    if v < 2:
        raise ValueError(f"v={v}: the interleaved schedule needs v >= 2 model "
                         "chunks per GPU (v=1 is schedule='1f1b')")
    if p < 2:
        raise ValueError(f"p={p}: the interleaved schedule needs p >= 2 stages")
    if order == "pytorch":
        rounds = max(1, m // p)
        if m % rounds:
            raise ValueError(f"m={m}: PyTorch's ScheduleInterleaved1F1B needs m to be "
                             f"a multiple of max(1, m // p) = {rounds}")
        return m // rounds
    if m % p:
        raise ValueError(f"m={m}: Megatron-LM's interleaved schedule needs m to be "
                         f"a multiple of p={p} (micro-batch groups of p)")
    return p


def _interleaved(p: int, m: int, v: int, i: int, group: int) -> list[Op]:
    table = [(j, c) for first in range(0, m, group) for c in range(v)
             for j in range(first, min(first + group, m))]
    total = m * v
    warmup = min(2 * (p - i - 1) + (v - 1) * group, total)

    def forward(k):
        return Op(FORWARD, *table[k])

    def backward(k):
        return Op(BACKWARD, table[k][0], v - 1 - table[k][1])

    ops = [forward(k) for k in range(warmup)]
    for k in range(total - warmup):
        ops += [forward(warmup + k), backward(k)]
    return ops + [backward(k) for k in range(total - warmup, total)]


# -------------------------------------------------------------- simulation

def needs(op: Op, i: int, p: int, v: int) -> list[tuple[str, int, int, int]]:
    """The passes ``op`` on stage ``i`` must wait for, as
    ``(kind, microbatch, chunk, stage)``: a forward needs the previous
    virtual stage's forward; a backward needs its own forward and the next
    virtual stage's backward (virtual stage ``chunk*p + stage``)."""
    j, c = op.microbatch, op.chunk
    if op.kind == FORWARD:
        if i > 0:
            return [(FORWARD, j, c, i - 1)]
        return [(FORWARD, j, c - 1, p - 1)] if c > 0 else []
    own = [(FORWARD, j, c, i)]
    if i < p - 1:
        return own + [(BACKWARD, j, c, i + 1)]
    return own + ([(BACKWARD, j, c + 1, 0)] if c < v - 1 else [])


def _simulate(schedule: PipelineSchedule) -> tuple[tuple[tuple[Op, int, int], ...], ...]:
    """``(op, start, end)`` per stage, in integer ticks of ``1/v`` unit."""
    p, v, ops = schedule.p, schedule.v, schedule.ops
    ticks = {kind: int(t) for kind, t in PASS_TIME.items()}
    done: dict[tuple, int] = {}
    placed: list[list[tuple[Op, int, int]]] = [[] for _ in range(p)]
    progress = True
    while progress:
        progress = False
        for i in range(p):
            while len(placed[i]) < len(ops[i]):
                op = ops[i][len(placed[i])]
                waits = needs(op, i, p, v)
                if any(w not in done for w in waits):
                    break
                start = max([placed[i][-1][2] if placed[i] else 0,
                             *(done[w] for w in waits)])
                placed[i].append((op, start, start + ticks[op.kind]))
                done[(op.kind, op.microbatch, op.chunk, i)] = start + ticks[op.kind]
                progress = True
    stuck = [i for i in range(p) if len(placed[i]) < len(ops[i])]
    if stuck:
        raise RuntimeError(f"deadlock: stages {stuck} wait for each other")
    return tuple(map(tuple, placed))

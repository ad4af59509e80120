"""Pipeline schedules as data: for every stage, its operations in order.

A schedule is, for every pipeline stage (GPU) ``i = 0 .. p-1``, the ordered
list of its operations (:class:`~actmem.run.schedule.ops.Op`): the forward (``F``),
backward (``B``), or split backward (``I`` input gradient, ``W`` weight
gradient) of one micro-batch through one model chunk. Activation memory
follows from the list alone: a stage keeps a micro-batch's activations from
its forward until its backward (Korthikanti et al. 2022, sec. 4.2.3); with
the backward split, what the weight gradients read (the inputs of the
linear layers) stays from the ``I`` to the ``W``. So the number held after
each operation, :meth:`PipelineSchedule.in_flight`, is a running count, and
every closed form of :mod:`actmem.pipeline_formulas` is tested against
these lists.

Where each order comes from:

* ``"gpipe"`` (Huang et al. 2019): all ``m`` forwards, then all ``m``
  backwards, as PyTorch's ``ScheduleGPipe`` (Megatron-LM has none).
* ``"1f1b"`` (PipeDream-Flush; Narayanan et al. 2021, sec. 2.2): stage ``i``
  runs ``min(p - i - 1, m)`` warm-up forwards, then one forward and one
  backward, then the remaining backwards (Megatron-LM
  ``forward_backward_pipelining_without_interleaving``; PyTorch's
  ``Schedule1F1B`` runs the same sequence).
* ``"interleaved"`` (Narayanan et al. 2021, sec. 2.2.2): ``v`` chunks per
  GPU, virtual stage ``c*p + i``; forwards go through micro-batches in groups
  of ``N``, chunk by chunk; backwards follow the same table, chunks reversed;
  ``min(2*(p-i-1) + (v-1)*N, m*v)`` warm-up forwards (Megatron-LM
  ``get_pp_rank_microbatches``, ``get_schedule_table``). ``order="megatron"``:
  ``N`` is ``microbatch_group_size`` (Megatron-LM's
  ``--microbatch-group-size-per-virtual-pipeline-stage``, default ``p``),
  allowed when ``p <= N <= m`` and ``m mod N`` is 0 or at least ``p``.
  ``order="pytorch"``: ``ScheduleInterleaved1F1B``, ``N = m // max(1, m // p)``
  (:mod:`actmem.run.schedule.schedule_orders`).
* PyTorch 2.13's newer classes, in PyTorch's order only
  (:mod:`actmem.run.schedule.zero_bubble`, :mod:`actmem.run.schedule.dualpipe`):
  ``"interleaved-zb"`` (``ScheduleInterleavedZeroBubble``, any ``v``),
  ``"zbv"`` (``ScheduleZBVZeroBubble``, ``v = 2``, V-shaped),
  ``"dualpipev"`` (``ScheduleDualPipeV``, ``v = 2``, V-shaped, ``m >= 2p``)
  and ``"looped-bfs"`` (``ScheduleLoopedBFS``, any ``v``).

Time (:meth:`PipelineSchedule.bubble_fraction`): :data:`PASS_TIME` per
whole stage, divided by ``v`` per chunk (:mod:`actmem.run.schedule.schedule_timing`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

from ...layer.memory import ActivationMemory
from . import schedule_orders as megatron
from . import zero_bubble
from .dualpipe import dualpipev
from .ops import BACKWARD, FORWARD, INPUT_GRAD, KINDS, PASS_TIME, WEIGHT_GRAD, Op, Timed
from .schedule_parts import held_parts, pass_counts, peak_parts
from .schedule_rules import (ALL_SCHEDULES, MAX_OPERATIONS, ORDERS, PYTORCH_ONLY, SCHEDULES,
                             check_schedule, resolve_order)
from .schedule_timing import simulate_times
from .training import chunk_layers, layer_bytes
from ..job.record_fields import check_fields, one_of, tuples_of
from ...memo import kept_by_repr
from ...validate import integer, lists_keywords, optional, positive_int

__all__ = ["ALL_SCHEDULES", "BACKWARD", "FORWARD", "INPUT_GRAD", "KINDS", "MAX_OPERATIONS",
           "ORDERS", "PASS_TIME", "PYTORCH_ONLY", "SCHEDULES", "WEIGHT_GRAD", "Op",
           "PipelineSchedule", "Timed", "check_schedule", "simulate_schedule", "stage_index"]

@dataclass(frozen=True)
class PipelineSchedule:
    """The operations of every pipeline stage, and what they imply.

    Attributes:
        schedule: one of :data:`ALL_SCHEDULES`. order: one of :data:`ORDERS`.
        p: pipeline stages (GPUs). m: micro-batches per optimizer step
            (the gradient-accumulation count). v: model chunks per GPU.
        ops: ``ops[i]`` is the ordered tuple of stage ``i``'s operations
            (stage 0 is the first): ``2*m*v``, or up to ``3*m*v`` with I and W.
        microbatch_group_size: ``N`` of the interleaved schedules (None for
            the others).
    """

    schedule: str
    order: str
    p: int
    m: int
    v: int
    ops: tuple[tuple[Op, ...], ...]
    microbatch_group_size: int | None = None

    def __post_init__(self):
        """Raises TypeError, ValueError: an unknown schedule or order, p, m
        or v not an integer >= 1, ops not p tuples of :class:`Op` s, a
        group size that is not None or an integer >= 1."""
        check_fields(self, _SCHEDULE)
        if len(self.ops) != self.p:
            raise ValueError(f"PipelineSchedule.ops must hold one tuple per stage (p={self.p}), "
                             f"got {len(self.ops)}")

    def _stage(self, i) -> int:
        return stage_index(i, self.p)

    @property
    def splits_backward(self) -> bool:
        """Whether the backward passes are split into ``I`` and ``W`` steps
        (zero-bubble schedules)."""
        return any(op.kind == INPUT_GRAD for ops in self.ops for op in ops)

    def last_chunk(self) -> tuple[int, int]:
        """(stage, local chunk) of the model's last layers, where the loss
        is computed: ``(0, 1)`` on a V (ZBV, DualPipeV), else ``(p-1, v-1)``."""
        return (0, 1) if self.v_shaped else (self.p - 1, self.v - 1)

    @property
    def v_shaped(self) -> bool:
        """Whether GPU ``i`` holds virtual stages ``i`` and ``2p-1-i`` (ZBV,
        DualPipeV) rather than ``i, p+i, ...`` (looped)."""
        return self.schedule in zero_bubble.V_SHAPED

    def in_flight(self, i: int) -> list[int]:
        """Forward passes (micro-batch, chunk) stage ``i`` holds activations
        of after each of its operations: ``+1`` for a forward, ``-1`` for a
        backward ``B`` or a weight-gradient step ``W``; an ``I`` keeps the
        pass (its ``W`` still reads part of it: :meth:`awaiting_weight_grad`).

        Raises:
            ValueError: ``i`` is not a stage index.
        """
        held, counts = 0, []
        for op in self.ops[self._stage(i)]:
            held += {FORWARD: 1, INPUT_GRAD: 0}.get(op.kind, -1)
            counts.append(held)
        return counts

    def awaiting_weight_grad(self, i: int) -> list[int]:
        """Passes of stage ``i`` between their ``I`` and their ``W`` after
        each operation (all zeros without a split backward)."""
        held, counts = 0, []
        for op in self.ops[self._stage(i)]:
            held += {INPUT_GRAD: 1, WEIGHT_GRAD: -1}.get(op.kind, 0)
            counts.append(held)
        return counts

    def peak_in_flight(self, i: int) -> int:
        """The most forward passes stage ``i`` holds at once (an ``int``)."""
        return max(self.in_flight(i))

    def stage_activation_memory(self, i: int, per_layer: ActivationMemory | int,
                                L: int) -> int:
        """Bytes of layer activations stage ``i`` holds at its peak:
        ``peak_in_flight(i) * L/(p*v) * M``, with ``M`` the bytes one layer
        keeps per micro-batch (sec. 4.2.3), counting a pass until its ``W``.

        Raises:
            TypeError, ValueError: ``L`` or ``per_layer`` not a positive
                int, ``p*v`` does not divide ``L``, or a bad ``i``.
        """
        layers = chunk_layers(L, self.p, self.v)
        return self.peak_in_flight(i) * layers * layer_bytes(per_layer)

    def held_parts(self, i: int, parts: list[dict[str, int]],
                   pending: list[dict[str, int]] | None = None,
                   after_weight: list[dict[str, int]] | None = None) -> list[dict[str, int]]:
        """Bytes by part stage ``i`` holds after each operation
        (:func:`actmem.run.schedule.schedule_parts.held_parts`)."""
        return held_parts(self, self._stage(i), parts, pending, after_weight)

    def peak_parts(self, i: int, parts: list[dict[str, int]],
                   pending: list[dict[str, int]] | None = None,
                   after_weight: list[dict[str, int]] | None = None) -> dict[str, int]:
        """Bytes by part that stage ``i`` holds at its peak
        (:func:`actmem.run.schedule.schedule_parts.peak_parts`)."""
        return peak_parts(self, self._stage(i), parts, pending, after_weight)

    @cached_property
    def counts_seen(self) -> tuple[tuple[tuple[tuple[int, ...], ...], ...], ...]:
        """Per stage, the distinct pass counts of
        :func:`actmem.run.schedule.schedule_parts.pass_counts`, first seen first:
        equal counts hold equal bytes, so the first moment of the largest
        total is among them (a planner asks at every change; a schedule's
        step repeats a few counts over its many operations)."""
        return tuple(tuple(dict.fromkeys(pass_counts(self, i))) for i in range(self.p))

    @cached_property
    def _ticks(self) -> tuple[tuple[tuple[Op, int, int], ...], ...]:
        return simulate_times(self.ops, self.p, self.v, self.v_shaped)

    @cached_property
    def timeline(self) -> tuple[tuple[Timed, ...], ...]:
        """``timeline[i]``: stage ``i``'s operations with start and end
        times (:mod:`actmem.run.schedule.schedule_timing`); built once per schedule."""
        v = self.v
        return tuple(tuple(Timed(op, Fraction(a, v), Fraction(b, v)) for op, a, b in stage)
                     for stage in self._ticks)

    def shortest_op(self) -> Fraction:
        """Duration of the shortest operation (time units, as
        :attr:`timeline`)."""
        return Fraction(min(b - a for stage in self._ticks for _, a, b in stage), self.v)

    def makespan(self) -> Fraction:
        """Time from the first forward to the last backward step."""
        return Fraction(max(stage[-1][2] for stage in self._ticks), self.v)

    def bubble_fraction(self) -> Fraction:
        """Idle time over ideal time, per GPU (Narayanan et al. 2021,
        sec. 2.2): ``(makespan - 3m) / 3m``, where ``3m`` is the time a
        GPU computes (m forwards of 1 unit and m backwards of 2)."""
        ideal = self.m * (PASS_TIME[FORWARD] + PASS_TIME[BACKWARD])
        return (self.makespan() - ideal) / ideal


_SCHEDULE = {"schedule": one_of(ALL_SCHEDULES), "order": one_of(ORDERS), "p": positive_int,
             "m": positive_int, "v": positive_int,
             "ops": lambda name, value: tuples_of(Op, name, value),
             "microbatch_group_size": lambda name, value: optional(positive_int, name, value)}


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


@lists_keywords
@kept_by_repr(64)  # a frozen result: a planner asks at every change of a control
def simulate_schedule(schedule: str, p: int, m: int, v: int = 1, order: str | None = None,
                      microbatch_group_size: int | None = None) -> PipelineSchedule:
    """Build a pipeline schedule's operations for every stage.

    Args:
        schedule: one of :data:`ALL_SCHEDULES`.
        p: pipeline-parallel size (stages). m: micro-batches per optimizer
            step. v: model chunks per GPU (``"interleaved"`` >= 2,
            ``"zbv"`` and ``"dualpipev"`` exactly 2, ``"interleaved-zb"``
            and ``"looped-bfs"`` any; the others 1).
        order: ``"megatron"`` (default) or ``"pytorch"``; the
            :data:`PYTORCH_ONLY` schedules take only ``"pytorch"`` (default).
        microbatch_group_size: ``N`` of Megatron-LM's interleaved schedule
            (default ``p``); see the module docstring for its rules.

    Returns:
        A :class:`PipelineSchedule`.

    Raises:
        TypeError: ``p``, ``m``, ``v`` or ``microbatch_group_size`` not an int.
        ValueError: a value < 1, an unknown ``schedule`` or ``order``, a
            ``v`` the schedule does not take, or a combination the chosen
            implementation refuses (each message names the argument and
            what is allowed).

    >>> s = simulate_schedule("1f1b", p=4, m=8)
    >>> [s.peak_in_flight(i) for i in range(4)]
    [4, 3, 2, 1]
    >>> " ".join(map(str, s.ops[0]))
    'F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7'
    >>> [simulate_schedule("interleaved", 4, 6, 2, microbatch_group_size=6)
    ...  .peak_in_flight(i) for i in range(4)]
    [12, 11, 9, 7]
    """
    p, m, v = (positive_int(name, x) for name, x in (("p", p), ("m", m), ("v", v)))
    order = resolve_order(schedule, order)
    group = check_schedule(schedule, p, m, v, order, microbatch_group_size)
    ops = [_stage_ops(schedule, p, m, v, i, group) for i in range(p)]
    return PipelineSchedule(schedule, order, p, m, v, tuple(map(tuple, ops)), group)


def _stage_ops(schedule: str, p: int, m: int, v: int, i: int, group: int | None) -> list[Op]:
    if schedule == "interleaved":
        return megatron.interleaved(p, m, v, i, group)
    if schedule == "interleaved-zb":
        return zero_bubble.interleaved_zero_bubble(p, m, v, i)
    if schedule == "looped-bfs":
        return zero_bubble.looped_bfs(p, m, v, i)
    if schedule == "zbv":
        return zero_bubble.zbv(p, m, i)
    if schedule == "dualpipev":
        return dualpipev(p, m, i)
    return (megatron.gpipe if schedule == "gpipe" else megatron.one_f_one_b)(p, m, i)

"""The rules of :func:`actmem.simulate_schedule`: which schedules, orders,
chunk counts ``v``, micro-batch counts ``m`` and group sizes ``N`` each
implementation accepts (one copy, also used by the widgets to offer only
valid values). Sources: Megatron-LM ``schedules.py``
(``forward_backward_pipelining_with_interleaving``) and the constructors of
PyTorch 2.13's schedule classes (``torch/distributed/pipelining/schedules.py``).
"""

from __future__ import annotations

from . import schedule_orders as megatron
from . import zero_bubble
from .dualpipe import check_dualpipev
from ...validate import choice, positive_int

SCHEDULES = ("gpipe", "1f1b", "interleaved")
"""Schedules the whole package takes (``training_memory``, the command
line, the glossary): GPipe, 1F1B and interleaved 1F1B."""
PYTORCH_ONLY = ("interleaved-zb", "zbv", "dualpipev", "looped-bfs")
"""Schedules only PyTorch implements (``torch.distributed.pipelining``
classes ``ScheduleInterleavedZeroBubble``, ``ScheduleZBVZeroBubble``,
``ScheduleDualPipeV``, ``ScheduleLoopedBFS``); their order is PyTorch's."""
ALL_SCHEDULES = SCHEDULES + PYTORCH_ONLY
"""Schedule names :func:`actmem.simulate_schedule` accepts."""
ORDERS = ("megatron", "pytorch")
"""Whose order of operations: Megatron-LM's or ``torch.distributed.pipelining``'s."""
MAX_OPERATIONS = 10**6
"""Most operations (``3*p*m*v``, all stages) a simulation builds. Measured
(``benchmarks/schedule_cap.py``, GPipe at p=100, CPU seconds): 10.4 s and
368 MiB at 1.5 x 10^6 (2.2 s to build, 8.2 s for the bubble's timing), 79 s
and 2.4 GiB at 10^7: about 7 us per operation, so the cap keeps one call
near 7 s, under the 10 s a learner waits; larger sizes have closed forms."""
MAX_TIMELINE_OPERATIONS = 2 * 10**5
"""Most operations (``3*p*m*v``) :func:`actmem.training_memory` times: its
timeline sums what is alive after every operation, about 36 us of CPU per
operation (measured: llama2-7b, t=2, p=2, m=20000 took 4.3 s), so the cap
keeps a call near 7 s; m=120692 ran past 10 s."""


def check_size(p: int, m: int, v: int, limit: int = MAX_OPERATIONS,
               what: str = "the simulation's") -> tuple[int, int, int]:
    """``(p, m, v)`` as plain ints, if ``3*p*m*v`` is at most ``limit``;
    checked before any operation is built.

    Raises:
        TypeError, ValueError: a size is not a positive int, or too many
            operations (the message says what they cost).
    """
    p, m, v = (positive_int(name, x) for name, x in (("p", p), ("m", m), ("v", v)))
    if 3 * p * m * v > limit:
        cost = ("about 7 s of CPU; its timing costs about 7 us per operation"
                if limit == MAX_OPERATIONS else
                f"about {limit * 36 // 10**6} s of CPU at about 36 us per operation")
        raise ValueError(f"p={p}, m={m}, v={v}: 3*p*m*v operations exceed {what} "
                         f"{limit:,} ({cost}); the closed forms of "
                         "actmem.pipeline_formulas answer such sizes")
    return p, m, v


def resolve_order(schedule: str, order: str | None) -> str:
    """The order: ``"megatron"`` by default, ``"pytorch"`` for PyTorch-only
    schedules (ValueError if asked for Megatron-LM's)."""
    choice("schedule", schedule, ALL_SCHEDULES)
    if order is None:
        return "pytorch" if schedule in PYTORCH_ONLY else "megatron"
    choice("order", order, ORDERS)
    if schedule in PYTORCH_ONLY and order != "pytorch":
        raise ValueError(f"order={order!r}: schedule {schedule!r} exists only in PyTorch "
                         "(torch.distributed.pipelining); use order='pytorch' or None")
    return order


def check_schedule(schedule: str, p: int, m: int, v: int = 1, order: str | None = None,
                   microbatch_group_size: int | None = None) -> int | None:
    """The rules of :func:`actmem.simulate_schedule` (one copy, also used by the
    widgets to offer only valid values); returns the micro-batch group size
    ``N`` of the interleaved schedules, or None for the others.

    Raises:
        TypeError, ValueError: as :func:`actmem.simulate_schedule`.
    """
    order = resolve_order(schedule, order)
    p, m, v = check_size(p, m, v)
    if microbatch_group_size is not None and schedule != "interleaved":
        raise ValueError(f"microbatch_group_size={microbatch_group_size!r}: only "
                         "schedule='interleaved' (Megatron-LM) has a group size")
    if schedule == "interleaved":
        return megatron.interleaved_group(p, m, v, order, microbatch_group_size)
    if schedule in ("zbv", "dualpipev"):
        if v != 2:
            raise ValueError(f"v={v}: schedule {schedule!r} needs exactly v=2 model "
                             "chunks per GPU (the two arms of the V)")
        if schedule == "dualpipev":
            check_dualpipev(p, m, v)
        return None
    if schedule == "interleaved-zb":
        return zero_bubble.pytorch_rounds(p, m, "ScheduleInterleavedZeroBubble")
    if schedule == "looped-bfs":
        return None
    if v != 1:
        raise ValueError(f"v={v}: model chunks (v > 1) need schedule='interleaved', "
                         f"'interleaved-zb', 'zbv', 'dualpipev' or 'looped-bfs'; "
                         f"{schedule!r} takes v=1")
    if schedule == "1f1b" and order == "pytorch" and m < p:
        raise ValueError(f"m={m} < p={p}: PyTorch's Schedule1F1B needs at least "
                         "as many micro-batches as stages (Megatron-LM's 1F1B "
                         "accepts m < p: use order='megatron')")
    return None

"""The orders of GPipe, 1F1B and interleaved 1F1B, stage by stage, with the
rules that decide which micro-batch counts each implementation accepts.

Sources: Megatron-LM ``megatron/core/pipeline_parallel/schedules.py``
(``forward_backward_pipelining_without_interleaving``,
``get_pp_rank_microbatches``, ``get_schedule_table`` and the checks at the top
of ``forward_backward_pipelining_with_interleaving``); PyTorch 2.13
``torch/distributed/pipelining/schedules.py`` (``ScheduleGPipe``,
``Schedule1F1B``, ``ScheduleInterleaved1F1B``). The module docstring of
:mod:`actmem.run.schedule.schedules` describes each order in words.
"""

from __future__ import annotations

from .ops import BACKWARD, FORWARD, Op
from ...validate import positive_int


def gpipe(p: int, m: int, i: int) -> list[Op]:
    """All ``m`` forwards, then all ``m`` backwards in micro-batch order."""
    return [Op(FORWARD, j) for j in range(m)] + [Op(BACKWARD, j) for j in range(m)]


def one_f_one_b(p: int, m: int, i: int) -> list[Op]:
    """``min(p - i - 1, m)`` warm-up forwards, one forward and one backward
    until the forwards run out, then the remaining backwards."""
    warmup = min(p - i - 1, m)
    ops = [Op(FORWARD, j) for j in range(warmup)]
    for j in range(m - warmup):
        ops += [Op(FORWARD, warmup + j), Op(BACKWARD, j)]
    return ops + [Op(BACKWARD, j) for j in range(m - warmup, m)]


def interleaved_group(p: int, m: int, v: int, order: str,
                      microbatch_group_size: int | None = None) -> int:
    """Micro-batches per group ``N`` of the interleaved schedule, checked.

    Megatron-LM (``order="megatron"``): ``N`` is
    ``--microbatch-group-size-per-virtual-pipeline-stage`` (default ``p``);
    Megatron-LM raises if ``N > m``, ``N < p`` or ``0 < m mod N < p``
    (``forward_backward_pipelining_with_interleaving``). PyTorch
    (``order="pytorch"``): ``N = m // max(1, m // p)``, which needs ``m`` a
    multiple of ``max(1, m // p)`` (``ScheduleInterleaved1F1B.__init__``);
    PyTorch has no group-size option.

    Raises:
        TypeError: ``microbatch_group_size`` not an int.
        ValueError: ``v < 2``, ``p < 2``, or a rule above broken; the message
            names the argument, its value and what is allowed.
    """
    if v < 2:
        raise ValueError(f"v={v}: the interleaved schedule needs v >= 2 model "
                         "chunks per GPU (v=1 is schedule='1f1b')")
    if p < 2:
        raise ValueError(f"p={p}: the interleaved schedule needs p >= 2 stages")
    if order == "pytorch":
        if microbatch_group_size is not None:
            raise ValueError(f"microbatch_group_size={microbatch_group_size!r}: "
                             "PyTorch's ScheduleInterleaved1F1B has no group size; "
                             "use order='megatron' or leave it None")
        rounds = max(1, m // p)
        if m % rounds:
            raise ValueError(f"m={m}: PyTorch's ScheduleInterleaved1F1B needs m to be "
                             f"a multiple of max(1, m // p) = {rounds}")
        return m // rounds
    if microbatch_group_size is None:
        if m % p:
            raise ValueError(
                f"m={m}: Megatron-LM's interleaved schedule with the default "
                f"microbatch_group_size (N = p) needs m to be a multiple of p={p}; "
                "microbatch_group_size=N with p <= N <= m and m mod N = 0 or >= p "
                "lifts that" + (f" (e.g. N={m})" if m >= p else " (none exists: m < p)"))
        return p
    return megatron_group(p, m, positive_int("microbatch_group_size",
                                             microbatch_group_size))


def megatron_group(p: int, m: int, group: int) -> int:
    """``group`` if Megatron-LM accepts it for ``p`` stages and ``m``
    micro-batches, else ValueError naming ``microbatch_group_size``."""
    if not p <= group <= m:
        raise ValueError(f"microbatch_group_size={group}: Megatron-LM needs "
                         f"p <= N <= m, here {p} <= N <= {m}"
                         + (" (none: m < p)" if m < p else ""))
    rest = m % group
    if 0 < rest < p:
        raise ValueError(f"microbatch_group_size={group}: m mod N = {m} mod {group} "
                         f"= {rest}; Megatron-LM needs it to be 0 or at least p={p} "
                         "(a last group smaller than p stalls the pipeline)")
    return group


def megatron_groups(p: int, m: int) -> list[int]:
    """Every group size ``N`` Megatron-LM accepts for ``p`` and ``m``
    (empty when ``m < p``)."""
    return [n for n in range(p, m + 1) if not 0 < m % n < p]


def interleaved(p: int, m: int, v: int, i: int, group: int) -> list[Op]:
    """Stage ``i``'s interleaved order: forwards follow the schedule table
    (groups of ``group`` micro-batches, chunk by chunk), backwards the same
    table with the chunks reversed; ``min(2*(p-i-1) + (v-1)*group, m*v)``
    warm-up forwards, then one forward and one backward, then the rest."""
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

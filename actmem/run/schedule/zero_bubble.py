"""PyTorch's newer pipeline schedules as data: interleaved zero bubble, ZBV,
DualPipeV and looped BFS, in PyTorch's order of operations.

Each function returns stage (rank) ``i``'s operations as PyTorch 2.13
computes them in ``torch/distributed/pipelining/schedules.py`` (the method
named in each docstring), without the idle slots (``None``) PyTorch pads
with, and with DualPipeV's overlapped forward+backward pairs
(``OVERLAP_F_B``) written as the forward then the backward, the order of
their ``sub_actions``. A test (``tests/test_zero_bubble.py``) compares every
order with PyTorch's own ``pipeline_order`` for every accepted
``(p, m, v)`` up to ``p = 8``, ``m = 4p``.

``Op.chunk`` is the GPU's local chunk: for the looped schedules virtual
stage ``chunk*p + i``; for the V-shaped ones (ZBV, DualPipeV) chunk 0 is
virtual stage ``i`` and chunk 1 is ``2p - 1 - i``, so the first GPU holds the
first and the last stage (PyTorch ``generate_stage_to_rank_mapping(...,
style="v")``).
"""

from __future__ import annotations

from collections import Counter

from .ops import BACKWARD, FORWARD, INPUT_GRAD, WEIGHT_GRAD, Op

V_SHAPED = ("zbv", "dualpipev")
"""Schedules whose rank ``i`` holds virtual stages ``i`` and ``2p-1-i``."""


def pytorch_rounds(p: int, m: int, who: str) -> int:
    """Micro-batches per round ``N = m // max(1, m // p)`` of PyTorch's
    looped interleaved schedules; ValueError unless ``max(1, m // p)``
    divides ``m`` (``ScheduleInterleavedZeroBubble.__init__``)."""
    rounds = max(1, m // p)
    if m % rounds:
        raise ValueError(f"m={m}: PyTorch's {who} needs m to be a multiple of "
                         f"max(1, m // p) = {rounds}")
    return m // rounds


def interleaved_zero_bubble(p: int, m: int, v: int, i: int) -> list[Op]:
    """``ScheduleInterleavedZeroBubble._calculate_single_rank_operations``
    (the paper's ZB-1p, as PyTorch's docstring says, not its handcrafted
    ZB-H1; Qi et al., ICLR 2024, arXiv 2401.10241):
    ``min((v-1)*N + p-1-i, m*v)`` warm-up forwards,
    then F and I pairs; the first ``i`` of them without a W, after that each
    I is followed by the W of the oldest backward still waiting for one;
    the Ws left over run at the end (``_get_1f1b_rank_ops`` with
    ``enable_zero_bubble=True``)."""
    group = pytorch_rounds(p, m, "ScheduleInterleavedZeroBubble")
    total = m * v
    warmup = min((v - 1) * group + p - 1 - i, total)

    def forward_chunk(step):
        return (step // group) % v

    def backward_chunk(step):
        return v - 1 - ((step - warmup) // group) % v

    count: dict[str, Counter] = {FORWARD: Counter(), INPUT_GRAD: Counter(),
                                 WEIGHT_GRAD: Counter()}
    ops: list[Op] = []

    def emit(kind, chunk):
        ops.append(Op(kind, count[kind][chunk], chunk))
        count[kind][chunk] += 1

    backward_steps: list[int] = []
    for step in range(total + warmup):
        if step < total:
            emit(FORWARD, forward_chunk(step))
        if step >= warmup:
            emit(INPUT_GRAD, backward_chunk(step))
            backward_steps.append(step)
            if step - warmup >= i:
                emit(WEIGHT_GRAD, backward_chunk(backward_steps[count[WEIGHT_GRAD].total()]))
    while count[WEIGHT_GRAD].total() < len(backward_steps):
        emit(WEIGHT_GRAD, backward_chunk(backward_steps[count[WEIGHT_GRAD].total()]))
    return ops


def looped_bfs(p: int, m: int, v: int, i: int) -> list[Op]:
    """``ScheduleLoopedBFS._calculate_single_rank_operations``: every
    micro-batch's forward through chunk 0, then chunk 1, ...; then the full
    backwards, last chunk first, last micro-batch first."""
    ops = [Op(FORWARD, j, c) for c in range(v) for j in range(m)]
    return ops + [Op(BACKWARD, j, c) for c in reversed(range(v)) for j in reversed(range(m))]


def zbv(p: int, m: int, i: int) -> list[Op]:
    """``ScheduleZBVZeroBubble._calculate_single_rank_operations``: warm-up
    ``2(p-i)-1`` forwards on chunk 0, ``i`` pairs F1 F0, ``p-i`` triples
    F1 I1 W1; then F0 I0 W0 F1 I1 W1 until the forwards run out; cool-down
    ``i`` pairs I0 I1, ``p-i`` pairs I0 W0, then the Ws left. PyTorch plans
    ``max(2p-1, m)`` micro-batches and drops those beyond ``m``."""
    planned = max(2 * p - 1, m)
    count = {kind: [0, 0] for kind in (FORWARD, INPUT_GRAD, WEIGHT_GRAD)}
    ops: list[Op] = []

    def emit(kind, chunk):
        ops.append(Op(kind, count[kind][chunk], chunk))
        count[kind][chunk] += 1

    def backward(chunk):
        emit(INPUT_GRAD, chunk)
        emit(WEIGHT_GRAD, chunk)

    for _ in range(2 * (p - i) - 1):
        emit(FORWARD, 0)
    for _ in range(i):
        emit(FORWARD, 1)
        emit(FORWARD, 0)
    for _ in range(p - i):
        emit(FORWARD, 1)
        backward(1)
    while count[FORWARD][1] < count[FORWARD][0] or count[FORWARD][0] < planned:
        if count[FORWARD][0] < planned:
            emit(FORWARD, 0)
        backward(0)
        emit(FORWARD, 1)
        backward(1)
    for _ in range(i):
        emit(INPUT_GRAD, 0)
        emit(INPUT_GRAD, 1)
    for _ in range(p - i):
        backward(0)
    for chunk in (1, 0):
        while count[WEIGHT_GRAD][chunk] < count[INPUT_GRAD][chunk]:
            emit(WEIGHT_GRAD, chunk)
    return [op for op in ops if op.microbatch < m]

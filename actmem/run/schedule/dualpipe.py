"""DeepSeek's DualPipe family: DualPipeV simulated in PyTorch's order, and
DualPipe (bidirectional, two stages per rank) as a documented closed form.

DualPipeV (DeepSeek's "cut-in-half" DualPipe; PyTorch 2.13
``ScheduleDualPipeV._calculate_single_rank_operations``): rank ``i`` holds
virtual stages ``i`` and ``2p-1-i`` (a V), needs ``m >= 2p``, and runs eight
steps: F0; F0 F1; I1 W F1; the main F0B1-F1B0 overlapped pairs; B1 F1B0;
B1 B0 (the second half as I); W B0; W. Full backwards (``B``) and split ones
(``I`` then a later ``W`` from a first-in first-out queue) are mixed.
:func:`dualpipev` ports that method line by line; the test compares it with
PyTorch's ``pipeline_order``.

DualPipe (DeepSeek-V3 technical report, sec. 3.2.1, and the DualPipe README,
github.com/deepseek-ai/DualPipe): micro-batches are fed from both ends of
the pipeline, so rank ``i`` holds two different stages, its own stage ``i``
and the mirror stage ``p-1-i`` (``examples/example_dualpipe.py``:
``nn.Sequential(full_modules[rank], full_modules[pp_size - 1 - rank])``).
Each stage is thus on two ranks, and the gradients of its two copies are
summed across the mirror ranks (``p0.grad += p1all[pp_size - 1 - rank]``).
A rank keeps twice one stage's parameters, not two copies of its own
stage's. The README's table gives, per rank, parameters ``2x``, activations
of ``PP + 1`` micro-batches (each of one stage's layers) and a bubble of
``(PP/2 - 1)(F&B + B - 3W)``.
It is not simulated here (PyTorch has no DualPipe class to compare an order
with): :func:`dualpipe_in_flight` and :func:`dualpipe_parameter_copies` are
the README's numbers.
"""

from __future__ import annotations

from .ops import BACKWARD, FORWARD, INPUT_GRAD, WEIGHT_GRAD, Op
from ...validate import positive_int


def dualpipev(p: int, m: int, i: int) -> list[Op]:
    """Rank ``i``'s operations under PyTorch's ``ScheduleDualPipeV``
    (chunk 0 = virtual stage ``i``, chunk 1 = ``2p-1-i``); an overlapped
    pair is its forward then its backward."""
    ops: list[Op] = []
    forwards, backwards = [0, 0], [0, 0]
    waiting: list[tuple[int, int]] = []   # (chunk, micro-batch) of Is without their W

    def forward(chunk):
        ops.append(Op(FORWARD, forwards[chunk], chunk))
        forwards[chunk] += 1

    def backward(chunk, split=False):
        ops.append(Op(INPUT_GRAD if split else BACKWARD, backwards[chunk], chunk))
        if split:
            waiting.append((chunk, backwards[chunk]))
        backwards[chunk] += 1

    def weight():
        if waiting:
            chunk, j = waiting.pop(0)
            ops.append(Op(WEIGHT_GRAD, j, chunk))

    for _ in range(2 * (p - i - 1)):
        forward(0)
    for _ in range(i + 1):
        forward(0)
        forward(1)
    for _ in range(p - i - 1):
        backward(1, split=True)
        weight()
        forward(1)
    for _ in range(m - 2 * p + i + 1):
        forward(0)        # the last rank's first pair is not overlapped: same order
        backward(1)
        forward(1)
        backward(0)
    for _ in range(p - i - 1):
        backward(1)
        forward(1)
        backward(0)
    split = False
    for k in range(i + 1):
        split |= k == (i + 1) // 2 and i % 2 == 1
        backward(1, split)
        split |= k == (i + 1) // 2 and i % 2 == 0
        backward(0, split)
    for _ in range(p - i - 1):
        weight()
        backward(0, split)
    for _ in range(i + 1):
        weight()
    return ops


def check_dualpipev(p: int, m: int, v: int) -> None:
    """ValueError unless ``v == 2`` and ``m >= 2p`` (PyTorch
    ``ScheduleDualPipeV.__init__``)."""
    if v != 2:
        raise ValueError(f"v={v}: schedule 'dualpipev' needs exactly v=2 model chunks "
                         "per GPU (the two arms of the V)")
    if m < 2 * p:
        raise ValueError(f"m={m}: PyTorch's ScheduleDualPipeV needs m >= 2p = {2 * p} "
                         "micro-batches (at least as many as virtual stages)")


def dualpipe_in_flight(p: int) -> int:
    """Micro-batches whose activations (one stage's layers each) a DualPipe
    rank holds at its peak: ``p + 1`` (DualPipe README, "Activation" column;
    DeepSeek-V3 report, Table 2). Needs an even ``p`` (two streams meet).

    >>> dualpipe_in_flight(8)
    9

    Raises:
        TypeError, ValueError: ``p`` not a positive even int.
    """
    p = positive_int("p", p)
    if p % 2:
        raise ValueError(f"p={p}: DualPipe needs an even number of pipeline ranks")
    return p + 1


def dualpipe_parameter_copies() -> int:
    """A DualPipe rank's parameters, in stages' worth: 2, its own stage
    ``i`` and the mirror stage ``p-1-i`` (two different stages, not two
    copies of one; ``examples/example_dualpipe.py``), so each stage's
    parameters are on two ranks, whose gradients are summed (DualPipe
    README, "Parameter" column: 2x)."""
    return 2

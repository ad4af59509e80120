"""One operation of a pipeline stage, and one placed in time.

The kinds are PyTorch's (``torch/distributed/pipelining/schedules.py``,
``_ComputationType``): ``F`` forward, ``B`` full backward, and for the
zero-bubble schedules the backward split in two (Qi et al. 2023, "Zero Bubble
Pipeline Parallelism", sec. 2): ``I`` the input gradient (what the previous
stage waits for) and ``W`` the weight gradient (which nothing waits for, so
it can fill a bubble).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

FORWARD, BACKWARD, INPUT_GRAD, WEIGHT_GRAD = "F", "B", "I", "W"
KINDS = (FORWARD, BACKWARD, INPUT_GRAD, WEIGHT_GRAD)
"""Operation kinds: forward, full backward, input-gradient step, weight-gradient step."""
PASS_TIME = {FORWARD: Fraction(1), BACKWARD: Fraction(2), INPUT_GRAD: Fraction(1),
             WEIGHT_GRAD: Fraction(1)}
"""Time units of one micro-batch's pass through one whole stage (L/p layers):
a backward costs two forwards (two matrix products per forward one), split
evenly between I and W (one product each; Qi et al. 2023, sec. 2)."""


@dataclass(frozen=True)
class Op:
    """One operation of a stage: ``kind`` (one of :data:`KINDS`) of
    micro-batch ``microbatch`` (0-based) through the stage's model chunk
    ``chunk`` (0-based, local to the GPU). Printed as ``F3`` (chunk 0) or
    ``I3/1`` (chunk 1)."""

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

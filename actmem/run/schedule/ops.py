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

from ..job.record_fields import check_fields, non_negative_fraction, one_of
from ...validate import instance

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

    def __init__(self, kind: str, microbatch: int, chunk: int = 0):
        """Raises TypeError, ValueError: a kind not in :data:`KINDS`, or a
        micro-batch or chunk that is not an integer >= 0. Written out (not
        the dataclass's ``__init__``): a schedule makes thousands, and the
        plain case costs a few type tests."""
        fields = self.__dict__  # frozen: set once, here
        fields["kind"], fields["microbatch"], fields["chunk"] = kind, microbatch, chunk
        if not (type(kind) is str and kind in KINDS and type(microbatch) is int
                and type(chunk) is int and microbatch >= 0 and chunk >= 0):
            check_fields(self, _OP)

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

    def __post_init__(self):
        """Raises TypeError, ValueError: ``op`` not an :class:`Op`; ``start``
        or ``end`` not a Fraction or integer >= 0; ``end < start``."""
        if not (type(self.op) is Op and type(self.start) is Fraction
                and type(self.end) is Fraction and 0 <= self.start):
            check_fields(self, _TIMED)
        if self.end < self.start:
            raise ValueError(f"Timed.end must be >= start={self.start}, got {self.end}")


_OP = {"kind": one_of(KINDS)}
_TIMED = {"op": lambda name, value: instance(name, value, Op, "Op('F', 0)"),
          "start": non_negative_fraction, "end": non_negative_fraction}

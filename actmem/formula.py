"""The paper's closed forms, kept apart from the ledger to check it.

Korthikanti et al. 2022, Table 2 (sec. 5), bytes per layer per
micro-batch per GPU, as exact integers. The ledger in :mod:`actmem.ledger`
must add up to these; tests and notebooks compare the two.
"""

from __future__ import annotations

from .config import LayerConfig


def seed_formula(s: int, b: int, h: int, a: int, t: int = 1) -> int:
    """``s*b*h*(10 + 24/t + 5*a*s/(h*t))`` = 10sbh + 24sbh/t + 5as^2b/t bytes.

    Raises:
        TypeError, ValueError: invalid input, as :class:`LayerConfig`.
    """
    LayerConfig(s, b, h, a, t)
    sbh = s * b * h
    return 10 * sbh + (24 * sbh + 5 * a * s * s * b) // t


TABLE2_FORMULAS = {
    "no parallelism": lambda s, b, h, a, t: 34 * s * b * h + 5 * a * s * s * b,
    "tensor parallel": lambda s, b, h, a, t: seed_formula(s, b, h, a, t),
    "tensor + sequence parallel":
        lambda s, b, h, a, t: (34 * s * b * h + 5 * a * s * s * b) // t,
    "tensor parallel + selective recompute":
        lambda s, b, h, a, t: 10 * s * b * h + 24 * s * b * h // t,
    "tensor + sequence parallel + selective recompute":
        lambda s, b, h, a, t: 34 * s * b * h // t,
    "full recompute": lambda s, b, h, a, t: 2 * s * b * h,
}
"""Table 2's six closed forms, each ``f(s, b, h, a, t) -> bytes``."""

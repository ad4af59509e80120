"""The paper's closed forms, kept apart from the ledger to check it.

Korthikanti et al. 2022, Table 2 (sec. 5), bytes per layer per micro-batch
per GPU, as exact integers. The ledger in :mod:`actmem.ledger` must add up
to these; tests and notebooks compare the two. Each form validates its
input as :class:`~actmem.config.LayerConfig` does and refuses a division
that would not be exact, so it never returns a floored number.
"""

from __future__ import annotations

from .config import LayerConfig
from ..validate import lists_keywords


def _checked(s, b, h, a, t, **options) -> tuple[int, int, int, int, int]:
    """The inputs validated by :class:`LayerConfig`, as plain ints (a NumPy
    integer would overflow silently in the products below)."""
    c = LayerConfig(s, b, h, a, t, **options)
    return c.s, c.b, c.h, c.a, c.t


def _exact(numerator: int, t: int) -> int:
    """``numerator / t``, which validation guarantees to be whole."""
    quotient, remainder = divmod(numerator, t)
    if remainder:
        raise ValueError(f"{numerator} bytes do not split evenly over t={t} ranks")
    return quotient


@lists_keywords
def paper_formula(s: int, b: int, h: int, a: int, t: int = 1) -> int:
    """``s*b*h*(10 + 24/t + 5*a*s/(h*t))`` = 10sbh + 24sbh/t + 5as^2b/t bytes.

    The paper's formula (Korthikanti et al. 2022, arXiv 2205.05198): tensor
    parallelism without sequence parallelism (sec. 4.2.1; Table 2, row 2),
    16-bit activations, 1-byte dropout masks, attention map stored.

    Raises:
        TypeError, ValueError: invalid input, as :class:`LayerConfig`.
    """
    s, b, h, a, t = _checked(s, b, h, a, t)
    sbh = s * b * h
    return 10 * sbh + _exact(24 * sbh + 5 * a * s * s * b, t)


def _no_parallelism(s, b, h, a, t):
    s, b, h, a, t = _checked(s, b, h, a, t)
    return 34 * s * b * h + 5 * a * s * s * b


def _sequence_parallel(s, b, h, a, t):
    s, b, h, a, t = _checked(s, b, h, a, t, sequence_parallel=True)
    return _exact(34 * s * b * h + 5 * a * s * s * b, t)


def _selective(s, b, h, a, t):
    s, b, h, a, t = _checked(s, b, h, a, t)
    return 10 * s * b * h + _exact(24 * s * b * h, t)


def _sequence_parallel_selective(s, b, h, a, t):
    s, b, h, a, t = _checked(s, b, h, a, t, sequence_parallel=True)
    return _exact(34 * s * b * h, t)


def _full(s, b, h, a, t):
    s, b, h, a, t = _checked(s, b, h, a, t)
    return 2 * s * b * h


TABLE2_FORMULAS = {
    "no parallelism": _no_parallelism,
    "tensor parallel": paper_formula,
    "tensor + sequence parallel": _sequence_parallel,
    "tensor parallel + selective recompute": _selective,
    "tensor + sequence parallel + selective recompute": _sequence_parallel_selective,
    "full recompute": _full,
}
"""Table 2's six closed forms, each ``f(s, b, h, a, t) -> bytes``.

"no parallelism" is evaluated as written, whatever ``t`` (the paper's
t = 1 row); ``t`` is still validated.
"""

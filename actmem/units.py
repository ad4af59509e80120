"""Byte units: MiB = 2^20, GiB = 2^30 bytes, GB = 10^9 bytes."""

from __future__ import annotations

UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "GB": 10**9}
"""Bytes per unit."""


def convert(n_bytes: int, unit: str) -> float:
    """``n_bytes`` expressed in ``unit`` (one of ``UNITS``).

    Raises:
        ValueError: unknown unit.
    """
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}, got {unit!r}")
    return n_bytes / UNITS[unit]


def to_mib(n_bytes: int) -> float:
    """Bytes to MiB (2^20 bytes)."""
    return convert(n_bytes, "MiB")


def to_gib(n_bytes: int) -> float:
    """Bytes to GiB (2^30 bytes)."""
    return convert(n_bytes, "GiB")


def to_gb(n_bytes: int) -> float:
    """Bytes to GB (10^9 bytes)."""
    return convert(n_bytes, "GB")


def format_bytes(n_bytes: int, unit: str = "MiB", digits: int = 2) -> str:
    """``n_bytes`` in ``unit`` with the unit printed, e.g. ``'184 MiB'``.

    Whole values print without decimals; others keep up to ``digits``
    decimals, trailing zeros removed (``'5.75 GiB'``).
    """
    value = convert(n_bytes, unit)
    text = f"{value:.{digits}f}".rstrip("0").rstrip(".")
    return f"{text} {unit}"

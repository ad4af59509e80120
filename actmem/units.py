"""Byte units: MiB = 2^20, GiB = 2^30, TiB = 2^40 bytes; GB = 10^9, TB = 10^12."""

from __future__ import annotations

import re
from fractions import Fraction
from numbers import Real

UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
         "GB": 10**9, "TB": 10**12}
"""Bytes per unit."""

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*$")


def convert(n_bytes: Real, unit: str) -> float:
    """``n_bytes`` expressed in ``unit`` (one of ``UNITS``).

    Raises:
        TypeError: ``n_bytes`` is not a number.
        ValueError: unknown unit.
    """
    if isinstance(n_bytes, bool) or not isinstance(n_bytes, Real):
        raise TypeError(f"n_bytes must be a number of bytes, got {n_bytes!r}")
    if not isinstance(unit, str) or unit not in UNITS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}, got {unit!r}")
    return n_bytes / UNITS[unit]


def to_mib(n_bytes: Real) -> float:
    """Bytes to MiB (2^20 bytes)."""
    return convert(n_bytes, "MiB")


def to_gib(n_bytes: Real) -> float:
    """Bytes to GiB (2^30 bytes)."""
    return convert(n_bytes, "GiB")


def to_gb(n_bytes: Real) -> float:
    """Bytes to GB (10^9 bytes)."""
    return convert(n_bytes, "GB")


def format_value(n_bytes: Real, unit: str = "MiB", digits: int = 2) -> str:
    """The number of ``unit`` in ``n_bytes``, fixed-point, without the unit.

    Whole values print without decimals (``'4036608'``, never ``4.03661e+06``);
    others keep up to ``digits`` decimals, trailing zeros removed
    (``'5.75'``). Used for table columns whose header names the unit.

    Raises:
        TypeError: ``n_bytes`` not a number, ``digits`` not an int.
        ValueError: unknown unit, or ``digits`` < 0.
    """
    if isinstance(digits, bool) or not isinstance(digits, int):
        raise TypeError(f"digits must be an integer, got {digits!r}")
    if digits < 0:
        raise ValueError(f"digits must be >= 0, got {digits}")
    text = f"{convert(n_bytes, unit):.{digits}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def format_bytes(n_bytes: Real, unit: str = "MiB", digits: int = 2) -> str:
    """``n_bytes`` in ``unit`` with the unit printed, e.g. ``'184 MiB'``.

    See :func:`format_value` for the number; errors as there.
    """
    return f"{format_value(n_bytes, unit, digits)} {unit}"


def parse_size(name: str, value: object) -> int:
    """Bytes from ``value``: an int of bytes, or a string such as ``"80GB"``
    (80 x 10^9 bytes) or ``"80GiB"`` (80 x 2^30 bytes); units as
    :data:`UNITS`. ``name`` is the argument named in errors.

    >>> parse_size("gpu_memory", "80GiB") - parse_size("gpu_memory", "80GB")
    5899345920

    Raises:
        TypeError: not an int or a string (a bool is refused).
        ValueError: a string that is not a number and a unit, an unknown
            unit, a size that is not a whole number of bytes, or < 1.
    """
    if isinstance(value, str):
        match = _SIZE.match(value)
        if not match or match.group(2) not in UNITS:
            raise ValueError(f"{name}={value!r} is not a size: write a number and a unit, "
                             f"e.g. '80GB' (10^9 bytes) or '80GiB' (2^30 bytes); "
                             f"units: {', '.join(UNITS)}")
        size = Fraction(match.group(1)) * UNITS[match.group(2)]
        if size.denominator != 1:
            raise ValueError(f"{name}={value!r} is not a whole number of bytes")
        value = int(size)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be bytes (an int) or a size such as '80GB', "
                        f"got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1 byte, got {value}")
    return value

"""Byte units: MiB = 2^20, GiB = 2^30, TiB = 2^40, PiB = 2^50 bytes; GB = 10^9,
TB = 10^12.

Sizes are whole, non-negative numbers of bytes (``int``, or anything with
``__index__`` such as NumPy integers); anything else is a clear error, never
``'nan MiB'``. Formatting is exact: no float, so a 400-digit size prints
every digit and a small term is never lost next to a huge one. Sizes stop
below :data:`MAX_BYTES`, so that every one can be printed (Python refuses to
print integers of more than 4,300 digits).
"""

from __future__ import annotations

import re
from fractions import Fraction

from .validate import MAX_INT_DIGITS, integer, lists_keywords, shown

UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
         "PiB": 2**50, "GB": 10**9, "TB": 10**12}
"""Bytes per unit."""
MAX_DIGITS = 20
"""Most decimals :func:`format_value` prints."""
MAX_BYTES = 10**MAX_INT_DIGITS
"""Sizes (and differences) must be smaller than this (4,000 digits, checked
by :func:`actmem.validate.integer`), which :func:`format_value` can print
with its 20 decimals within Python's limit of 4,300 digits for turning an
integer into text."""
MAX_SIZE_TEXT = 100
"""Most characters :func:`parse_size` reads."""

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*$")


def _whole(name: str, value: object) -> int:
    return integer(name, value, "a whole number of bytes (an int)")  # < MAX_BYTES


def _size(name: str, value: object) -> int:
    number = _whole(name, value)
    if number < 0:
        raise ValueError(f"{name} must be >= 0 bytes, got {number}")
    return number


def _unit(unit: object) -> int:
    if not isinstance(unit, str) or unit not in UNITS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}, got {shown(unit)}")
    return UNITS[unit]


@lists_keywords
def convert(n_bytes: int, unit: str) -> float:
    """``n_bytes`` expressed in ``unit`` (one of ``UNITS``), as a float
    (for plotting; use :func:`format_value` for exact text).

    Raises:
        TypeError: ``n_bytes`` is not a whole number.
        ValueError: a negative size, >= :data:`MAX_BYTES`, an unknown
            unit, or a size too large for a float.
    """
    n, per = _size("n_bytes", n_bytes), _unit(unit)
    try:
        return n / per
    except OverflowError:
        raise ValueError(f"n_bytes has {len(str(n))} digits, too many for a float; "
                         "format_value prints it exactly") from None


@lists_keywords
def to_mib(n_bytes: int) -> float:
    """Bytes to MiB (2^20 bytes)."""
    return convert(n_bytes, "MiB")


@lists_keywords
def to_gib(n_bytes: int) -> float:
    """Bytes to GiB (2^30 bytes)."""
    return convert(n_bytes, "GiB")


@lists_keywords
def to_gb(n_bytes: int) -> float:
    """Bytes to GB (10^9 bytes)."""
    return convert(n_bytes, "GB")


@lists_keywords
def format_value(n_bytes: int, unit: str = "MiB", digits: int = 2) -> str:
    """The number of ``unit`` in ``n_bytes``, fixed-point, without the unit,
    computed exactly (rounded half to even at ``digits`` decimals).

    Whole values print without decimals (``'4036608'``, never ``4.03661e+06``);
    others keep up to ``digits`` decimals, trailing zeros removed
    (``'5.75'``). Used for table columns whose header names the unit.

    >>> format_value(10**30, "PiB")
    '888178419700125.23'

    Raises:
        TypeError: ``n_bytes`` not a whole number, ``digits`` not an int.
        ValueError: a negative size, >= :data:`MAX_BYTES`, an unknown unit,
            or ``digits`` outside 0..20.
    """
    n_bytes, per = _size("n_bytes", n_bytes), _unit(unit)  # checked in argument order
    digits = integer("digits", digits)
    if not 0 <= digits <= MAX_DIGITS:
        raise ValueError(f"digits must be between 0 and {MAX_DIGITS}, got {digits}")
    scaled, rest = divmod(n_bytes * 10**digits, per)
    if 2 * rest > per or (2 * rest == per and scaled % 2):  # half to even, as round()
        scaled += 1
    whole, part = divmod(scaled, 10**digits)
    text = f"{whole}.{part:0{digits}d}".rstrip("0").rstrip(".") if digits else str(whole)
    return text


@lists_keywords
def format_bytes(n_bytes: int, unit: str = "MiB", digits: int = 2) -> str:
    """``n_bytes`` in ``unit`` with the unit printed, e.g. ``'184 MiB'``.

    See :func:`format_value` for the number; errors as there.
    """
    return f"{format_value(n_bytes, unit, digits)} {unit}"


@lists_keywords
def format_change(delta: int, unit: str = "MiB", digits: int = 2) -> str:
    """A signed difference of bytes without the unit: ``'+80'``, ``'-80'``,
    or ``'0'`` when it rounds to nothing at ``digits`` decimals."""
    number = _whole("delta", delta)
    text = format_value(abs(number), unit, digits)
    return text if text == "0" else ("+" if number > 0 else "-") + text


@lists_keywords
def parse_size(name: str, value: object) -> int:
    """Bytes from ``value``: an int of bytes, or a string such as ``"80GB"``
    (80 x 10^9 bytes) or ``"80GiB"`` (80 x 2^30 bytes); units as
    :data:`UNITS`. ``name`` is the argument named in errors.

    >>> parse_size("gpu_memory", "80GiB") - parse_size("gpu_memory", "80GB")
    5899345920

    Raises:
        TypeError: not an int or a string (a bool is refused).
        ValueError: a string that is not a number and a unit (or longer
            than :data:`MAX_SIZE_TEXT`), an unknown unit, a size that is not
            a whole number of bytes, < 1 or >= :data:`MAX_BYTES`.
    """
    if isinstance(value, str):
        if len(value) > MAX_SIZE_TEXT:
            raise ValueError(f"{name} is a text of {len(value)} characters; a size is a "
                             f"number and a unit in at most {MAX_SIZE_TEXT}, e.g. '80GB'")
        match = _SIZE.match(value)
        if not match or match.group(2) not in UNITS:
            raise ValueError(f"{name}={value!r} is not a size: write a number and a unit, "
                             f"e.g. '80GB' (10^9 bytes) or '80GiB' (2^30 bytes); "
                             f"units: {', '.join(UNITS)}")
        size = Fraction(match.group(1)) * UNITS[match.group(2)]
        if size.denominator != 1:
            raise ValueError(f"{name}={value!r} is not a whole number of bytes")
        value = int(size)
    try:
        value = _whole(name, value)
    except TypeError:
        raise TypeError(f"{name} must be bytes (an int) or a size such as '80GB', "
                        f"got {shown(value)}") from None
    if value < 1:
        raise ValueError(f"{name} must be at least 1 byte, got {value}")
    return value

"""Field checks for the run's records (``Op``, ``GPU``, ``Event``,
``StageMemory``, ``ModelStates`` ...), for a record built directly.

Each record's ``__post_init__`` calls :func:`check_fields`: every field is
checked by its annotation (``int``: bytes or a count, an integer >= 0;
``bool``; ``str``; tuples of them; ``| None``), or by the record's own
check for the fields an annotation does not settle (kinds' names, sizes
>= 1, nested records). NumPy integers become ``int`` (:func:`actmem.validate.integer`);
bools where integers are meant, floats, arrays, negative bytes and unknown
names raise ``TypeError``/``ValueError`` naming ``Record.field``, the value
and what is allowed. Records are built often (thousands of timeline events
per run), so a field that already holds the plain value costs a type test.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from ...validate import (MAX_INT_DIGITS, choice, flag, instance, non_negative_int, optional,
                        shown)

_LIMIT = 10**MAX_INT_DIGITS


def text(name: str, value: object) -> str:
    """``value`` if it is a ``str``; else ``TypeError``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {shown(value)} ({type(value).__name__})")
    return value


def tuple_of(check, name: str, value: object, length: int | None = None) -> tuple:
    """``value`` as a tuple, each item passed through ``check`` (named
    ``name[i]``); ``length``: how many items it must have."""
    if not isinstance(value, tuple):
        raise TypeError(f"{name} must be a tuple, got {shown(value)} ({type(value).__name__})")
    if length is not None and len(value) != length:
        raise ValueError(f"{name} must have {length} items, got {len(value)}: {shown(value)}")
    items = tuple(check(f"{name}[{i}]", item) for i, item in enumerate(value))
    return value if all(a is b for a, b in zip(items, value)) else items


def non_negative_fraction(name: str, value: object) -> Fraction:
    """``value`` (a ``Fraction`` or an integer, not a bool) as a ``Fraction`` >= 0."""
    if type(value) is not Fraction:
        value = Fraction(non_negative_int(name, value))
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def int_tuple(name: str, value: object, length: int | None = None) -> tuple[int, ...]:
    """``value``: a tuple of integers >= 0 (``length`` of them if given),
    NumPy integers made ``int``."""
    if (type(value) is tuple and (length is None or len(value) == length)
            and {*map(type, value)} <= {int} and (not value or min(value) >= 0)
            and (not value or max(value) < _LIMIT)):
        return value
    return tuple_of(non_negative_int, name, value, length)


def records(kind: type, name: str, value: object, length: int | None = None) -> tuple:
    """``value``: a non-empty tuple of ``kind`` records (``length`` of them if given)."""
    if type(value) is tuple and value and {*map(type, value)} == {kind} and (
            length is None or len(value) == length):
        return value
    items = tuple_of(lambda n, v: instance(n, v, kind, f"a {kind.__name__} record"),
                     name, value, length)
    if not items:
        raise ValueError(f"{name} must hold at least one {kind.__name__}, got ()")
    return items


def tuples_of(kind: type, name: str, value: object) -> tuple:
    """``value``: a tuple of tuples of ``kind`` records (e.g. each pipeline
    stage's operations; a tuple may be empty)."""
    def row(label, items):
        if type(items) is tuple and {*map(type, items)} <= {kind}:
            return items
        return tuple_of(lambda n, v: instance(n, v, kind, f"a {kind.__name__} record"),
                        label, items)
    return tuple_of(row, name, value)


def _texts(name, value):
    return tuple_of(text, name, value)


BY_ANNOTATION = {"int": non_negative_int, "bool": flag, "str": text,
                 "int | None": lambda name, value: optional(non_negative_int, name, value),
                 "tuple[int, ...]": int_tuple, "tuple[str, ...]": _texts}
"""A field's check by its annotation (as written under ``from __future__
import annotations``)."""
_PLANS: dict[type, tuple] = {}


def _plan(kind: type, special: dict) -> tuple:
    plan = []
    for field in dataclasses.fields(kind):
        check = special.get(field.name) or BY_ANNOTATION.get(field.type)
        if check is None:
            raise TypeError(f"{kind.__name__}.{field.name} ({field.type}) has no check: "
                            "give one in its __post_init__")
        fast = None if field.name in special else {"int": int, "bool": bool,
                                                     "str": str}.get(field.type)
        plan.append((field.name, check, fast, f"{kind.__name__}.{field.name}"))
    _PLANS[kind] = tuple(plan)
    return _PLANS[kind]


def check_fields(record, special: dict | None = None) -> None:
    """Check every field of the dataclass ``record`` (in its
    ``__post_init__``): by ``special[field]`` (``check(name, value)``,
    returning the value to keep) or by its annotation (:data:`BY_ANNOTATION`);
    a check's plain value replaces the field's (a NumPy integer becomes
    ``int``). ``special`` must be the same for every record of a kind.

    Raises:
        TypeError, ValueError: the first invalid field, named ``Record.field``.
    """
    fields = record.__dict__
    plan = _PLANS.get(type(record)) or _plan(type(record), special or {})
    for name, check, fast, label in plan:
        value = fields[name]
        if fast is not None and type(value) is fast and (
                fast is not int or 0 <= value < _LIMIT):
            continue
        checked = check(label, value)
        if checked is not value:
            object.__setattr__(record, name, checked)


def one_of(allowed: tuple[str, ...]):
    """A field check: one of ``allowed`` names (:func:`actmem.validate.choice`)."""
    return lambda name, value: choice(name, value, allowed)

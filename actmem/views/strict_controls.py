"""Explorer controls that take only what they offer (issue 21).

ipywidgets compares a new value with the menu by ``==``: ``True``, ``1.0``,
``Fraction(4, 1)`` or ``np.array([4])`` select the option ``1`` or ``4``
(``ipywidgets/widgets/widget_selection.py``, ``_Selection._validate_value``
and ``findvalue``), and a checkbox's ``Bool`` trait turns ``0`` and ``1``
into ``False`` and ``True`` (``traitlets.Bool.validate``). Its refusals
name no control (``"Invalid selection: value not found"``). :func:`strict`
makes a control refuse any value that is not one of its options, of the
same kind (a bool is not an int, a float or an array is not an int), with
a :class:`ControlError` that names the control, the value and the choices.
"""

from __future__ import annotations

import traitlets

from ..validate import shown


class ControlError(traitlets.TraitError, ValueError):
    """A value a control does not offer (a ``ValueError`` too)."""


def _kind(value) -> str:
    """``'bool'``, ``'int'`` (Python's or NumPy's integers) or the type's name."""
    name = type(value).__name__
    if name in ("bool", "bool_"):
        return "bool"
    if name != "ndarray" and hasattr(type(value), "__index__"):
        return "int"
    return name


def offered(value, options) -> bool:
    """Whether ``value`` is one of ``options``, of the same kind."""
    kind = _kind(value)
    return any(_kind(o) == kind and o == value for o in options)


def _choices(options) -> str:
    return ", ".join(shown(o) for o in options)


class _StrictBool(traitlets.Bool):
    """A checkbox's value: ``True`` or ``False`` only (no ``0``/``1``)."""

    def __init__(self, name: str, default: bool):
        super().__init__(default)
        self.control = name

    def validate(self, obj, value):
        if isinstance(value, bool):
            return value
        raise ControlError(f"{self.control}={shown(value)} is not offered; choose True "
                           "or False")


def same(a, b) -> bool:
    """``a == b`` for menus: lists of values or ``(label, value)`` pairs,
    compared item by item and kind by kind (an array is never equal)."""
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        return (isinstance(a, (tuple, list)) and isinstance(b, (tuple, list))
                and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b)))
    return _kind(a) == _kind(b) != "ndarray" and a == b


def strict(name: str, control, offered_options=None) -> None:
    """Make ``control`` (a menu or a checkbox of the explorer, called
    ``name``) refuse values it does not offer, naming itself; with
    ``offered_options`` (a function giving the menu the explorer offers,
    or None while the explorer changes it), a menu set from code that
    differs is refused before it changes anything."""
    if isinstance(getattr(type(control), "value", None), traitlets.Bool):
        # traitlets' add_traits, not the widget's: "value" is synced already
        traitlets.HasTraits.add_traits(control, value=_StrictBool(name, control.value)
                                       .tag(sync=True))
        return
    if not hasattr(control, "options"):
        return
    original = control._trait_validators.get("value")

    def check(obj, proposal):
        value, options = proposal["value"], list(obj._options_values)
        if options and not offered(value, options):
            raise ControlError(f"{name}={shown(value)} is not offered; choose one of "
                               f"{_choices(options)}")
        return original(obj, proposal) if original else value

    control._register_validator(check, ["value"])
    if offered_options is None:
        return
    original_options = control._trait_validators.get("options")

    def check_options(obj, proposal):
        menu = offered_options()
        if menu is not None and not same(list(proposal["value"]), menu):
            raise ControlError(
                f"{name}.options={shown(proposal['value'])} refused: the explorer offers only "
                f"values valid with the other controls ({_choices(menu)}); set "
                f"{name}.value instead")
        return original_options(obj, proposal) if original_options else proposal["value"]

    control._register_validator(check_options, ["options"])


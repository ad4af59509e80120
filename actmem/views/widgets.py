"""Controls for the notebooks: thin ipywidgets views over actmem's functions.

Each explorer holds dropdowns whose options are only valid values (t among
the divisors of a and h; a among the head counts that divide h), recomputes
with :func:`actmem.activation_memory` (or the training helpers) when a value
changes, and writes the results into ``Label``/``HTML`` state widgets
(``.readouts``) that tests and notebook ``assert``s read. Figures are PNG
bytes in an ``Image`` widget, so no ipympl is needed. Core widgets only;
the code runs under ipywidgets 7.7 and 8. Display an explorer with
``display(explorer.box)``. ``import actmem`` never imports ipywidgets:
this module, :mod:`actmem.variant_views` and :mod:`actmem.measure.widgets`
(whose explorers are subclasses of this module's ``_Explorer``) import it
when used.

Constructor arguments are checked before any widget is built: an invalid
value raises ``TypeError`` or ``ValueError`` naming the argument, its value
and the values allowed.

Labels follow :mod:`actmem.language` at construction: after
``actmem.set_language("zh")`` an explorer shows Chinese control labels and
readouts, while each readout's ``value`` stays English (:meth:`_Explorer.say`).
"""

from __future__ import annotations

import html
import re
import sys
import warnings
from contextlib import ExitStack, contextmanager

import ipywidgets as widgets

from . import figures
from .readouts import HTML, TEXT, ReadoutPanel
from .redraw import png
from .strict_controls import strict
from ..language import english, get_language, tr, translator
from ..layer.coefficients import coefficient_units, coefficients
from ..layer.config import SP_AT_T1
from ..layer.dimensions import valid_tensor_parallel_sizes
from ..layer.memory import activation_memory
from ..units import format_bytes, format_value
from ..validate import flag, lists_keywords, positive_int, shown

S_CHOICES = (512, 1024, 2048, 4096, 8192)
"""Sequence lengths offered (tokens)."""
B_CHOICES = (1, 2, 4, 8)
"""Micro-batch sizes offered (sequences)."""
H_CHOICES = (1024, 2048, 4096, 5120, 6656, 8192, 12288)
"""Hidden sizes offered (GPT-3 family and the a=52 model)."""
A_CHOICES = (8, 16, 32, 40, 52, 64, 96)
"""Head counts offered; only those dividing h are shown."""
L_CHOICES = (24, 32, 40, 48, 96)
"""Layer counts offered."""
IMAGES_KEPT = 16
"""Figures (PNG bytes, tens of KiB each) an explorer keeps to show again."""


def _with(choices, *values) -> list[int]:
    """``choices`` and ``values``, ascending, each once: a menu that also
    offers the (valid) values a learner passed in."""
    return sorted(set(choices) | set(values))


def head_choices(h: int) -> list[int]:
    """Head counts from :data:`A_CHOICES` that divide ``h``."""
    return [a for a in A_CHOICES if h % a == 0]


def closest(value: int, options: list[int]) -> int:
    """``value`` if allowed, else the largest option below it (or the first).

    Raises:
        ValueError: ``options`` is empty.
    """
    if not options:
        raise ValueError(f"options must offer at least one value, got {options!r}")
    if value in options:
        return value
    below = [o for o in options if o <= value]
    return below[-1] if below else options[0]


def coefficients_text(result, tr=english) -> str:
    """One line: the three coefficients with their units (LedgerExplorer),
    its words translated by ``tr`` (:mod:`actmem.language`; default English).

    >>> from actmem import activation_memory
    >>> coefficients_text(activation_memory(2048, 1, 4096, 32, t=2))
    'fixed 10 sbh, intermediate 24 sbh/t, attention map 5 bas^2/t'
    >>> coefficients_text(activation_memory(2048, 1, 4096, 32, t=2, flash_attention=True))
    'fixed 10 sbh, intermediate 24 sbh/t, attention-map statistics 4 bas/t (no s x s map)'
    """
    k, unit = coefficients(result), coefficient_units(result.config)
    term = {g: f"{k[g]} {unit[g]}" for g in k}
    attention = (tr("attention-map statistics {k} bas/t (no s x s map)").format(
        k=k["attention_map"]) if result.config.flash_attention else
        tr("attention map {term}").format(term=term["attention_map"]))
    return tr("fixed {fixed}, intermediate {intermediate}, {attention}").format(
        fixed=term["fixed"], intermediate=term["intermediate"], attention=attention)


LEDGER_COLUMNS = ("tensor", "block", "shape", "bytes/elem", "placement", "group",
                  "MiB per GPU", "needed for")
"""Column headings of :func:`ledger_html`."""


def ledger_html(result, tr=english) -> str:
    """The ledger rows of ``result`` as an HTML table (bytes in MiB, fixed
    point with up to 4 decimals, so small rows such as FlashAttention's
    statistics do not round to 0 and large ones never print as 1.6e+06),
    with the backward computation each row is kept for; words translated
    by ``tr`` (:mod:`actmem.language`; default English)."""
    head = "<tr>" + "".join(f"<th>{tr(c)}</th>" for c in LEDGER_COLUMNS) + "</tr>"
    if tr is not english:  # short Chinese words: space the columns, keep placements on one line
        head = ('<colgroup><col><col><col><col style="width: 5em"><col style="width: 7.5em">'
                "</colgroup>" + head)
    body = "".join(
        f"<tr><td>{html.escape(tr(r.name))}</td><td>{tr(r.block)}</td>"
        f"<td>{' x '.join(r.shape)}</td><td>{r.bytes_per_element}</td>"
        f"<td>{tr(r.placement)}</td><td>{tr(r.group)}</td>"
        f"<td>{format_value(r.bytes, digits=4)}</td><td>{html.escape(tr(r.needed_for))}</td></tr>"
        for r in result.rows)
    return f"{table_tag(tr)}{head}{body}</table>"


def table_tag(tr) -> str:
    """A readout table's opening tag: in another language than English, with
    space between the columns (Chinese words are short, and cells would touch)."""
    return ("<table>" if tr is english else
            '<table style="border-collapse: separate; border-spacing: 0.8em 0.1em">')


def _option_values(options) -> list:
    """The values of ``options``: plain values, or the second item of
    ``(label, value)`` pairs."""
    return [o[1] if isinstance(o, tuple) else o for o in options]


def _dropdown(name: str, options, value, rule: str = "") -> "widgets.Dropdown":
    """A Dropdown offering ``options`` (values or ``(label, value)``
    pairs), set to ``value``.

    Raises:
        TypeError: an integer menu got a non-integer (or a bool).
        ValueError: ``value`` is not offered; the message names the
            argument, its value, the choices (the values of pairs) and
            ``rule`` (why those); with no choices at all, that the other
            arguments leave none, and ``rule``.
    """
    options = list(options)
    values = _option_values(options)
    if all(isinstance(o, int) for o in values):
        positive_int(name, value)
    why = f" ({rule})" if rule else ""
    if not values:   # never "choose one of" nothing: say why there is nothing
        raise ValueError(f"{name}={shown(value)} is not offered: the other arguments leave "
                         f"no {name} to choose{why}; change them first")
    if value not in values:
        raise ValueError(f"{name}={shown(value)} is not offered; choose one of "
                         f"{', '.join(str(o) for o in values)}{why}")
    return widgets.Dropdown(options=options, value=value, description=tr(name))


def _t_dropdown(h: int, a: int, t) -> "widgets.Dropdown":
    return _dropdown("t", valid_tensor_parallel_sizes(h, a), t,
                     f"t must divide a={a} and h={h}")


class _Explorer:
    """Controls -> one pure computation -> readouts (and an image).

    ``readouts`` maps each readout's name to its kind (:data:`TEXT` or
    :data:`HTML`); ``self.readouts[name].value`` is its text, and all of
    them are shown in one panel (:mod:`actmem.views.readouts`). ``box``
    stacks the controls (one row, or the widgets of ``layout``), the
    readouts and the image. DOM hooks for browser tests: ``box`` has the
    CSS class ``actmem-explorer`` and each readout ``actmem-readout-<name>``.
    """

    def __init_subclass__(cls, **kwargs):
        """Every explorer names its options when given an unknown keyword."""
        super().__init_subclass__(**kwargs)
        if "__init__" in vars(cls):
            cls.__init__ = lists_keywords(cls.__init__)

    def __init__(self, controls: dict, readouts: dict[str, str], image: bool,
                 layout: list | None = None):
        self.language = get_language()  # of the labels, fixed at construction
        self.controls = controls
        self.panel = ReadoutPanel(readouts)
        self.readouts = self.panel.readouts
        self.image = widgets.Image(format="png") if image else None
        self._figure = None  # redrawn in place by show_figure
        self._drawn = None  # what it shows: (draw, args, kwargs, language)
        self._images = []  # (what, PNG) of the figures shown last, newest first
        self._held = None  # the controls' held updates, see _controls_held
        self._busy = False
        self.cause = None  # the control whose change is being applied
        self._offered = {name: list(c.options) for name, c in controls.items()
                         if hasattr(c, "options")}  # set by the explorer only
        for name, control in controls.items():
            strict(name, control, lambda name=name: None if self._busy else
                   self._offered.get(name))  # refuses what it does not offer, by name
            control.observe(self._changed, names="value")
            if hasattr(control, "options"):
                control.observe(self._options_changed, names="options")
        if layout is None:
            layout = [widgets.HBox(list(controls.values()))]
        children = [*layout, self.panel.widget]
        self.box = widgets.VBox(children + ([self.image] if image else []))
        self.box.add_class("actmem-explorer")
        self._refresh()

    def values(self) -> dict:
        """Current value of every control, by name."""
        return {name: c.value for name, c in self.controls.items()}

    def _changed(self, change) -> None:
        if not self._busy:
            self.cause = next(k for k, c in self.controls.items() if c is change["owner"])
            self._refuse_foreign_options(self.cause, change["old"])
            self._refuse_invalid(change)
            with self._controls_held():
                self._busy = True
                try:
                    self.restrict()
                finally:
                    self._busy = False
                self._refresh()

    @contextmanager
    def _controls_held(self):
        """Hold the controls' updates (narrowed menus) until the readouts
        are sent (:meth:`_release_controls`), so that the browser shows the
        readouts first."""
        with ExitStack() as held:
            for control in self.controls.values():
                held.enter_context(control.hold_sync())
            self._held = held.pop_all()
        try:
            yield
        finally:
            self._release_controls()

    def _release_controls(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held.close()

    def _options_changed(self, change) -> None:
        if not self._busy:
            name = next(k for k, c in self.controls.items() if c is change["owner"])
            self._refuse_foreign_options(name, change["owner"].value)

    def _refuse_foreign_options(self, name: str, value) -> None:
        """Menus set from code (``.options = ...``) are put back, with the
        value, and refused: the explorer offers only values valid with the
        other controls, so that the readouts always match the controls."""
        control, offered = self.controls[name], self._offered.get(name)
        if offered is None or list(control.options) == offered:
            return
        given = list(control.options)
        self._busy = True
        try:
            control.options = offered
            control.value = closest(value, _option_values(offered))
        finally:
            self._busy = False
        raise ValueError(f"{name}.options={given!r} refused: the explorer offers only "
                         f"values valid with the other controls "
                         f"({', '.join(str(v) for v in _option_values(offered))}); "
                         f"set {name}.value instead")

    def _refuse_invalid(self, change) -> None:
        """A value set from code that the control does not offer (None, or
        a non-bool on a checkbox) is put back, and refused with a message
        naming the control, so readouts always match the controls."""
        control, value = change["owner"], change["new"]
        if isinstance(control, widgets.Checkbox):
            ok, allowed = isinstance(value, bool), "True or False"
        else:
            values = _option_values(control.options)
            ok, allowed = value in values, ", ".join(str(v) for v in values)
        if not ok:
            self._busy = True
            try:
                control.value = change["old"]
            finally:
                self._busy = False
            raise ValueError(f"{self.cause}={value!r} is not offered; choose one of {allowed}")

    def _refresh(self) -> None:
        """:meth:`refresh` without the API's sequence-parallelism-at-t=1
        warning: the readouts already show that it changes nothing."""
        with warnings.catch_warnings(), self.panel.hold():
            warnings.filterwarnings("ignore", message=re.escape(SP_AT_T1))
            self.refresh()

    def say(self, name: str, build) -> None:
        """Write readout ``name`` from ``build(tr)``, text made with a label
        translator (:mod:`actmem.language`): English into ``value``, the
        explorer's language into ``shown``."""
        value = build(english)
        shown = value if self.language == "en" else build(translator(self.language))
        self.readouts[name].write(value, shown)

    def show_figure(self, draw, *args, **kwargs) -> None:
        """Set the image to ``draw(*args, **kwargs)``, a figure function of
        actmem, redrawing the explorer's previous Figure in place
        (:mod:`actmem.views.redraw`). Call it after the readouts are set:
        they are sent first, before the controls' held updates and before
        drawing starts, because in a Jupyter kernel ``sys.stdout.flush()``
        waits until the kernel's output thread has sent every message queued
        before it (without the wait, that thread sends them only when this
        one next lets go of the GIL).
        Nothing is drawn when ``draw`` and its arguments (compared with
        ``==``) are those of the figure shown, and a figure among the last
        :data:`IMAGES_KEPT` shown is sent again without drawing (a learner
        who goes back to a setting sees it at once)."""
        self.panel.send()
        sys.stdout.flush()  # the readouts leave now
        self._release_controls()
        what = (draw, args, kwargs, get_language())
        if what == self._drawn:  # the same figure (a control it does not show changed)
            return
        image = next((kept for shown, kept in self._images if shown == what), None)
        if image is None:
            sys.stdout.flush()
            self._figure = draw(*args, fig=self._figure, **kwargs)
            image = png(self._figure)
        self._images = [(what, image)] + [x for x in self._images if x[0] != what]
        del self._images[IMAGES_KEPT:]
        self.image.value = image
        self._drawn = what

    def restrict(self) -> None:
        """Narrow dependent options to valid values (override); ``cause``
        names the control the user changed."""

    def _set_options(self, name: str, options: list, prefer=None):
        """Offer ``options`` (values or ``(label, value)`` pairs); keep the
        value (or ``prefer``) if allowed, else the closest allowed value
        below it (:func:`closest`). Returns the value set."""
        control = self.controls[name]
        value = closest(control.value if prefer is None else prefer,
                        _option_values(options))
        self._offered[name] = list(options)
        if list(control.options) != options:
            control.options = options
        control.value = value
        return value

    def refresh(self) -> None:
        """Recompute and write every readout (override)."""
        raise NotImplementedError


class LayerExplorer(_Explorer):
    """s, b, h, a, t -> shapes and the three terms (notebooks 01 and 04).

    Readouts (``Label`` values, MiB): ``fixed``, ``intermediate``,
    ``attention_map``, ``total``; ``shapes`` (HTML) lists the tensor shapes
    on one GPU. With ``figure=True`` the image shows the three terms
    against every valid t with the current t outlined, and the readout
    ``chart`` (``Label``) its title (:func:`actmem.figures.terms_vs_t_title`),
    as text above the image the browser sets rather than pixels drawn on
    each change.
    """

    def __init__(self, s=2048, b=1, h=4096, a=32, t=1, figure=False):
        activation_memory(s, b, h, a, t)  # the model's checks and messages first
        flag("figure", figure)
        self._layer_heads = (h, a)  # offered again whenever h comes back
        controls = {
            "s": _dropdown("s", _with(S_CHOICES, s), s),
            "b": _dropdown("b", _with(B_CHOICES, b), b),
            "h": _dropdown("h", _with(H_CHOICES, h), h),
            "a": _dropdown("a", self._heads(h), a),
            "t": _t_dropdown(h, a, t),
        }
        readouts = {**dict.fromkeys(("fixed", "intermediate", "attention_map", "total"),
                                    TEXT), "shapes": HTML, **({"chart": TEXT} if figure else {})}
        super().__init__(controls, readouts, figure)

    def _heads(self, h: int) -> list[int]:
        """Head counts offered for ``h``: :func:`head_choices`, and the
        constructor's a when h is the constructor's h."""
        given = {self._layer_heads[1]} if h == self._layer_heads[0] else set()
        return _with(head_choices(h), *given)

    def restrict(self):
        self._set_options("a", self._heads(self.controls["h"].value))
        v = self.values()
        self._set_options("t", valid_tensor_parallel_sizes(v["h"], v["a"]))

    def refresh(self):
        v = self.values()
        result = activation_memory(**v)
        for group in ("fixed", "intermediate", "attention_map", "total"):
            size = format_bytes(getattr(result, group))
            self.say(group, lambda tr: tr(group.replace("_", " ") + ": {size}").format(size=size))
        self.say("shapes", lambda tr: tr(
            "hidden activations (s, b, h) = ({s}, {b}, {h}); "
            "Q, K, V on one GPU (s, b, h/t) = ({s}, {b}, {h_t}); "
            "MLP inner (s, b, 4h/t) = ({s}, {b}, {f_t}); "
            "attention map on one GPU (b, a/t, s, s) = ({b}, {a_t}, {s}, {s})").format(
                **v, h_t=v["h"] // v["t"], f_t=4 * v["h"] // v["t"], a_t=v["a"] // v["t"]))
        s, b, h, a, t = v["s"], v["b"], v["h"], v["a"], v["t"]
        if self.image is not None:
            self.say("chart", lambda tr: figures.terms_vs_t_title(s, b, h, a, result.fixed, tr,
                                                                  caption=True))
            self.show_figure(figures.terms_vs_t_figure, s, b, h, a, highlight=t, title=False)


class LedgerExplorer(_Explorer):
    """Storage options -> the ledger table and coefficients (notebook 02).

    Controls: t, MLP activation (``gelu`` with f = 4h, ``swiglu`` with
    Megatron-LM's default width), FlashAttention.
    Readouts: ``table`` (HTML, :func:`ledger_html`), ``coefficients``
    (Label, :func:`coefficients_text`), ``total`` (Label, MiB).
    """

    def __init__(self, s=2048, b=1, h=4096, a=32, t=1):
        activation_memory(s, b, h, a, t)
        self.layer = dict(s=s, b=b, h=h, a=a)
        controls = {
            "t": _t_dropdown(h, a, t),
            "activation": _dropdown("MLP", [(tr("gelu"), "gelu"), (tr("swiglu"), "swiglu")], "gelu"),
            "flash_attention": widgets.Checkbox(value=False,
                                                description=tr("FlashAttention")),
        }
        readouts = {"coefficients": TEXT, "total": TEXT, "table": HTML}
        super().__init__(controls, readouts, image=False)

    def restrict(self):
        """SwiGLU's default width f must split t ways too (h=1280, a=20:
        f=3392 allows t = 1, 2, 4 of the 1, 2, 4, 5, 10, 20 GeLU allows)."""
        self._set_options("t", valid_tensor_parallel_sizes(
            self.layer["h"], self.layer["a"], activation=self.controls["activation"].value))

    def refresh(self):
        result = activation_memory(**self.layer, **self.values())
        self.say("coefficients", lambda tr: coefficients_text(result, tr))
        self.say("total", lambda tr: tr("total: {size}").format(size=format_bytes(result.total)))
        self.say("table", lambda tr: ledger_html(result, tr))


class ShardingExplorer(_Explorer):
    """t -> who keeps what on GPU 0 and GPU 1 (notebook 03).

    Readouts (``Label``, MiB per GPU): ``fixed``, ``intermediate``,
    ``attention_map``; the image is :func:`actmem.figures.sharding_figure`.
    """

    def __init__(self, s=2048, b=1, h=4096, a=32, t=2):
        activation_memory(s, b, h, a, t)
        self.layer = dict(s=s, b=b, h=h, a=a)
        controls = {"t": _t_dropdown(h, a, t)}
        readouts = dict.fromkeys(("fixed", "intermediate", "attention_map"), TEXT)
        super().__init__(controls, readouts, image=True)

    def refresh(self):
        t = self.controls["t"].value
        result = activation_memory(**self.layer, t=t)
        for group in self.readouts:
            size = format_bytes(result.group_bytes(group))
            self.say(group, lambda tr: tr(group.replace("_", " ") + " per GPU: {size}").format(size=size))
        self.show_figure(figures.sharding_figure, **self.layer, t=t)

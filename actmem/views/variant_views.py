"""Views for notebook 07, "what each trick removes": a stacked-bar figure,
text and HTML tables, and an explorer whose controls toggle every storage
option and show, row by row, what it removes, shrinks, grows or adds.

The options are those of Korthikanti et al. 2022 (sequence parallelism,
sec. 4.2.2; selective and full recomputation, sec. 5 and Table 2) and of
later practice (FlashAttention, grouped-query attention, SwiGLU, no
dropout). Every number comes from :func:`actmem.activation_memory` and
:func:`actmem.ledger_diff.diff_ledgers`; nothing here retypes a formula.

The functions that return text and choices are pure. :class:`VariantExplorer`
is an explorer of :mod:`actmem.widgets` (same machinery: valid choices only,
state widgets, a PNG figure), so this module imports that one, and with it
ipywidgets and matplotlib; ``import actmem`` does not import this module
and stays light.
"""

from __future__ import annotations

import functools
import html
from contextlib import suppress
from fractions import Fraction

import ipywidgets as widgets

from ..language import english, tr, translator
from ..layer.config import RECOMPUTE
from ..layer.dimensions import ACTIVATIONS, default_ffn_hidden_size, valid_tensor_parallel_sizes
from ..layer.ledger import GROUPS
from ..layer.ledger_diff import RowChange, diff_ledgers
from ..layer.memory import ActivationMemory, activation_memory
from ..units import format_bytes, format_change, format_value, to_mib
from ..validate import common_divisors, flag, positive_int
from .readouts import HTML, TEXT
from .redraw import changing_only, figure_axes
from .widgets import _dropdown, _Explorer, _with, head_choices, table_tag

GROUP_NAMES = {"fixed": "fixed", "intermediate": "intermediate",
               "attention_map": "attention map"}
"""Short column headings for the three groups."""

ACTIVATION_NAMES = {"gelu": "GeLU", "swiglu": "SwiGLU", "squared_relu": "squared ReLU"}
"""The MLP menu's names for :data:`actmem.layer.dimensions.ACTIVATIONS` (its
values stay the code's)."""

TABLE_DIGITS = 4
"""Decimals of MiB in the HTML diff table, so that small rows (the
FlashAttention statistics, 0.0312 MiB at s=2048, b=1, a=32, t=8) are not shown as 0."""

BASELINE = "paper's layer (no options)"
"""What :class:`VariantExplorer` compares the chosen layer with: the
paper's layer (sec. 4.1) at the same s, b, h, a and t."""


# ------------------------------------------------------------------ choices

def _t_choices(h: int, a: int, s: int, sequence_parallel: bool) -> list[int]:
    return valid_tensor_parallel_sizes(h, a, s if sequence_parallel else None)


def kv_head_choices(a: int, t: int) -> list[int]:
    """Key/value head counts g for grouped-query attention: g divides a
    (each group serves a/g query heads) and t divides g (each rank keeps
    g/t key/value heads), ascending. g = a is ordinary multi-head attention.

    >>> kv_head_choices(64, 8)
    [8, 16, 32, 64]

    Raises:
        TypeError, ValueError: ``a`` or ``t`` is not a positive integer.
    """
    positive_int("a", a)
    positive_int("t", t)
    return [g for g in common_divisors(a) if g % t == 0]


FFN_RATIOS = (("4h", Fraction(4)), ("8h/3", Fraction(8, 3)),
              ("7h/2", Fraction(7, 2)))
"""MLP widths offered: the paper's 4h, SwiGLU's parameter-matched 8h/3, and
3.5h (LLaMA-2-70B's f = 28672 for h = 8192)."""


def ffn_choices(h: int, t: int, extra: int | None = None
                ) -> list[tuple[str, int]]:
    """``(label, f)`` pairs (labels in the current language) for the MLP
    inner width f, each a whole number that t divides: :data:`FFN_RATIOS`,
    Megatron-LM's SwiGLU default
    (:func:`actmem.default_ffn_hidden_size`) and ``extra`` (e.g. a model's
    published f), each when valid and not already listed. 4h always
    qualifies because t divides h.

    >>> ffn_choices(3072, 8)
    [('4h = 12288', 12288), ('8h/3 = 8192', 8192), ('7h/2 = 10752', 10752)]
    >>> ffn_choices(4096, 8)[-1]
    ('SwiGLU default = 10880', 10880)

    Raises:
        TypeError, ValueError: ``h``, ``t`` or ``extra`` is not a positive
            integer.
    """
    positive_int("h", h)
    positive_int("t", t)
    if extra is not None:
        positive_int("extra", extra)
    pairs = [(label, ratio * h) for label, ratio in FFN_RATIOS]
    with suppress(ValueError):  # h < 24: the SwiGLU rule gives no width
        pairs.append((tr("SwiGLU default"), Fraction(default_ffn_hidden_size(h, "swiglu"))))
    if extra is not None:
        pairs.append(("f", Fraction(extra)))
    seen, choices = set(), []
    for label, f in pairs:
        if f.denominator == 1 and f % t == 0 and f not in seen:
            seen.add(f)
            choices.append((f"{label} = {f}", int(f)))
    return choices


# ------------------------------------------------------------------ text

def breakdown(result: ActivationMemory, tr=None) -> str:
    """One line: total and the three groups, in MiB; group names
    translated by ``tr`` (:mod:`actmem.language`; default: the current
    language)."""
    tr = translator() if tr is None else tr
    parts = tr(", ").join(f"{tr(GROUP_NAMES[g])} {format_bytes(result.group_bytes(g))}"
                          for g in GROUPS)
    return tr("{total} ({parts})").format(total=format_bytes(result.total), parts=parts)


def change_text(before: ActivationMemory, after: ActivationMemory, tr=None) -> str:
    """Signed change of the total, in MiB and as a share of ``before``,
    e.g. ``'-80 MiB (-43.5%)'``; a change under 0.05% reads ``'(under 0.1%)'``,
    not ``'(-0.0%)'``; words translated by ``tr`` (:mod:`actmem.language`;
    default: the current language)."""
    tr = translator() if tr is None else tr
    delta = after.total - before.total
    share = f"{delta / before.total:+.1%}"
    if delta and float(share[:-1]) == 0:
        share = tr("under 0.1%")
    return tr("{change} MiB ({share})").format(change=format_change(delta), share=share)


def results_table(results: dict[str, ActivationMemory], tr=None) -> str:
    """Plain-text table: one line per result, the three groups and the
    total in MiB, per layer, per micro-batch, per GPU; names translated by
    ``tr`` (default: the current language) and padded by display width."""
    from .printed import pad, width as columns

    tr = translator() if tr is None else tr
    names = {name: tr(name) for name in results}
    width = max(columns(n) for n in names.values())
    heads = [GROUP_NAMES[g] for g in GROUPS] + ["total"]
    lines = [f"{'':<{width}} " + " ".join(pad(tr(h), 14, ">") for h in heads)]
    for name, r in results.items():
        values = [r.group_bytes(g) for g in GROUPS] + [r.total]
        lines.append(pad(names[name], width) + " "
                     + " ".join(f"{format_bytes(v):>14}" for v in values))
    return "\n".join(lines)


def format_changes(changes: tuple[RowChange, ...], unit: str = "MiB", tr=None) -> str:
    """:func:`actmem.ledger_diff.format_changes` (one line per row: kind,
    bytes before -> after) with the words translated by ``tr`` (default: the
    current language) and padded by display width: the same text in English.

    Raises:
        ValueError: unknown ``unit`` (see :data:`actmem.UNITS`).
    """
    from .printed import pad, width

    tr = translator() if tr is None else tr
    name_width, kind_width = 45, 9   # English: the widths of ledger_diff.format_changes
    if tr is not english:            # another language: as wide as its words, plus 2
        name_width = max(width(tr(w)) for w in ("tensor", *(c.name for c in changes))) + 2
        kind_width = max(width(tr(w)) for w in ("change", *(c.kind for c in changes)))
    lines = [pad(tr("tensor"), name_width) + " " + pad(tr("change"), kind_width) + " "
             + pad(tr("before"), 12, ">") + " " + pad(tr("after"), 12, ">")]
    for c in changes:
        before, after = (format_bytes(n, unit) if row else "-"
                         for n, row in ((c.bytes_before, c.before),
                                        (c.bytes_after, c.after)))
        lines.append(pad(tr(c.name), name_width) + " " + pad(tr(c.kind), kind_width)
                     + f" {before:>12} {after:>12}")
    return "\n".join(lines)


DIFF_COLUMNS = ("tensor", "change", "before (MiB)", "after (MiB)", "difference (MiB)")
"""Column headings of :func:`diff_html`."""


def diff_html(changes: tuple[RowChange, ...], tr=english) -> str:
    """The ledger diff as an HTML table (MiB per GPU); changed rows bold;
    words translated by ``tr`` (:mod:`actmem.language`)."""
    head = "<tr>" + "".join(f"<th>{tr(c)}</th>" for c in DIFF_COLUMNS) + "</tr>"
    body = "".join(_diff_row(c, tr) for c in changes)
    return f"{table_tag(tr)}{head}{body}</table>"


def _diff_row(c: RowChange, tr) -> str:
    cells = [html.escape(tr(c.name)), tr(c.kind),
             format_value(c.bytes_before, digits=TABLE_DIGITS) if c.before else "-",
             format_value(c.bytes_after, digits=TABLE_DIGITS) if c.after else "-",
             format_change(c.delta, digits=TABLE_DIGITS)]
    tag = "td" if c.kind == "unchanged" else 'td style="font-weight:bold"'
    return "<tr>" + "".join(f"<{tag}>{cell}</td>" for cell in cells) + "</tr>"


# ------------------------------------------------------------------ figure

def same_decimals(numbers: list[str]) -> list[str]:
    """Fixed-point numbers padded with zeros to the same count of decimals.

    >>> same_decimals(["358", "358.12", "0.5"])
    ['358.00', '358.12', '0.50']
    """
    places = max(len(n.partition(".")[2]) for n in numbers)
    if not places:
        return numbers
    return [f"{n}{'' if '.' in n else '.'}{'0' * (places - len(n.partition('.')[2]))}"
            for n in numbers]


def stacked_figure(results: dict[str, ActivationMemory], title: str, fig=None):
    """Horizontal bars, one per result, stacked by the three groups (MiB).

    Colours are those of :mod:`actmem.figures` (Okabe-Ito, colour-blind
    safe); the legend uses its neutral :data:`~actmem.figures.GROUP_LABELS`,
    true whatever the options (under sequence parallelism the fixed term is
    split along s; with FlashAttention the attention-map term is only
    statistics). The total is written at the end of each bar. ``fig``: a
    Figure this function returned, to redraw in place
    (:mod:`actmem.views.redraw`).
    Returns a :class:`matplotlib.figure.Figure` (pyplot is not touched).
    """
    from .figures import GROUP_LABELS, TERM_COLOURS

    names = list(results)[::-1]
    labels = [tr(n) for n in names]
    fig, ax = figure_axes(fig, (9, 0.55 * len(names) + 1.6))
    left = [0.0] * len(names)
    for group in GROUPS:
        widths = [to_mib(results[n].group_bytes(group)) for n in names]
        ax.barh(labels, widths, left=left, color=TERM_COLOURS[group],
                label=tr(GROUP_LABELS[group]), edgecolor="black", linewidth=0.5)
        left = [u + v for u, v in zip(left, widths)]
    full = [i for i, n in enumerate(names) if results[n].config.recompute == "full"]
    if full:  # its one tensor is the checkpoint, not the paper's fixed term
        ax.barh([labels[i] for i in full], [left[i] for i in full], fill=False, hatch="//",
                edgecolor="black", linewidth=0.5,
                label=tr("layer input, kept for full recomputation"))
    totals = same_decimals([format_value(results[n].total) for n in names])
    for y, (text, end) in enumerate(zip(totals, left)):
        ax.text(end, y, f" {text}", va="center", fontsize=8)
    ax.set_xlim(0, max(left) * 1.12)
    ax.set_xlabel(tr("activation memory per layer, per micro-batch, per GPU (MiB)"))
    ax.set_title(tr(title))
    legend = ax.legend(fontsize=8, loc="lower right")
    # the bars, totals and legend (drawn over the bars) change with the
    # options; the axes, bar names and title are kept by png while they stay
    changing_only(fig, (ax.get_xlim(), tuple(labels), ax.get_title(), ax.get_xlabel()),
                  [*ax.patches, *ax.texts, legend, *ax.spines.values()])
    return fig


# ------------------------------------------------------------------ explorer

class VariantExplorer(_Explorer):
    """Toggle every storage option; see what the ledger loses and gains.

    The layer's s, b and h are fixed at construction; the controls are the
    number of heads a, the tensor-parallel size t, sequence parallelism,
    recomputation, FlashAttention, key/value heads, the MLP activation and
    width f, and dropout. Choices are only valid values: a divides h; t
    divides a and h (and s under sequence parallelism); kv_heads divides a
    and is a multiple of t; t divides f. When a, t or sequence parallelism
    change, dependent choices narrow and an invalid value moves to the
    nearest valid one below it (or the smallest).

    Readouts (state widgets that tests read): ``chosen`` and ``baseline``
    (``Label``, :func:`breakdown` of the chosen layer and of the paper's
    layer, no options, with the same s, b, h, a, t), ``change`` (``Label``,
    :func:`change_text`) and ``diff`` (``HTML``, :func:`diff_html`). ``image``
    shows both as stacked bars (PNG). Display with ``display(x.box)``.

    Raises:
        TypeError, ValueError: invalid initial values, as
            :class:`actmem.LayerConfig`.
    """

    def __init__(self, s=2048, b=1, h=4096, a=32, t=8, sequence_parallel=False,
                 recompute="none", flash_attention=False, kv_heads=None,
                 ffn_hidden_size=None, activation="gelu", dropout=True,
                 figure=True):
        activation_memory(s, b, h, a, t, sequence_parallel=sequence_parallel,
                          recompute=recompute, flash_attention=flash_attention,
                          kv_heads=kv_heads, ffn_hidden_size=ffn_hidden_size,
                          activation=activation, dropout=dropout)
        flag("figure", figure)
        self.layer = dict(s=s, b=b, h=h)
        self._extra_f = ffn_hidden_size
        self._heads = a  # to keep multi-head attention when a changes
        controls = self._build_controls(
            a=a, t=t, sequence_parallel=sequence_parallel, recompute=recompute,
            flash_attention=flash_attention, kv_heads=kv_heads or a,
            activation=activation, ffn_hidden_size=ffn_hidden_size or 4 * h,
            dropout=dropout)
        layout = [widgets.HBox([controls[k] for k in ("a", "t", "kv_heads", "ffn_hidden_size")]),
                  widgets.HBox([controls[k] for k in ("sequence_parallel", "flash_attention",
                                                      "dropout")]),
                  controls["recompute"], controls["activation"]]
        readouts = {"chosen": TEXT, "baseline": TEXT, "change": TEXT, "diff": HTML}
        super().__init__(controls, readouts, figure, layout)

    def _build_controls(self, **v) -> dict:
        """One control per option, offering only values valid for ``v``."""
        s, h, a, t = self.layer["s"], self.layer["h"], v["a"], v["t"]
        check = widgets.Checkbox
        return {
            "a": _dropdown("a", _with(head_choices(h), a), a),
            "t": _dropdown("t", _t_choices(h, a, s, v["sequence_parallel"]), t),
            "sequence_parallel": check(value=v["sequence_parallel"],
                                       description=tr("sequence parallel")),
            "recompute": widgets.ToggleButtons(options=[(tr(r), r) for r in RECOMPUTE],
                                               value=v["recompute"],
                                               description=tr("recompute")),
            "flash_attention": check(value=v["flash_attention"],
                                     description=tr("FlashAttention")),
            "kv_heads": _dropdown("kv_heads", kv_head_choices(a, t), v["kv_heads"]),
            "activation": widgets.ToggleButtons(options=[(tr(ACTIVATION_NAMES[x]), x)
                                                         for x in ACTIVATIONS],
                                                value=v["activation"], description="MLP"),
            "ffn_hidden_size": _dropdown("f", ffn_choices(h, t, self._extra_f),
                                         v["ffn_hidden_size"]),
            "dropout": check(value=v["dropout"], description=tr("dropout")),
        }

    def results(self) -> tuple[ActivationMemory, ActivationMemory]:
        """(paper's layer with no options, chosen layer) for the current
        controls' s, b, h, a, t."""
        return _results(*self._key())

    def _key(self) -> tuple[tuple, tuple]:
        """The layer's fixed sizes and the controls' values, as hashable items."""
        return tuple(self.layer.items()), tuple(sorted(self.values().items()))

    def restrict(self) -> None:
        """Narrow t, kv_heads and f to values valid for the current a, t, SP.

        Multi-head attention (kv_heads = a) stays multi-head when a changes.
        """
        v = self.values()
        s, h = self.layer["s"], self.layer["h"]
        multi_head = v["kv_heads"] == self._heads
        self._heads = v["a"]
        t = self._set_options("t", _t_choices(h, v["a"], s, v["sequence_parallel"]))
        self._set_options("kv_heads", kv_head_choices(v["a"], t),
                          v["a"] if multi_head else None)
        self._set_options("ffn_hidden_size", ffn_choices(h, t, self._extra_f))

    def refresh(self) -> None:
        """Recompute both layers and write every readout (and the image)."""
        key = self._key()
        for name in ("chosen", "baseline", "change", "diff"):
            self.say(name, lambda tr, name=name: _texts(*key, tr)[name])
        base, chosen = self.results()
        if self.image is not None:
            self.show_figure(stacked_figure, {"paper's layer": base, "chosen": chosen},
                             tr("Paper's layer (no options) vs the chosen options"))


@functools.lru_cache(maxsize=64)
def _results(layer: tuple, values: tuple) -> tuple[ActivationMemory, ActivationMemory]:
    """:meth:`VariantExplorer.results` of the items of its layer and values,
    kept (a learner toggling an option back costs a look-up)."""
    layer, v = dict(layer), dict(values)
    return (activation_memory(**layer, a=v["a"], t=v["t"]), activation_memory(**layer, **v))


@functools.lru_cache(maxsize=64)
def _texts(layer: tuple, values: tuple, tr) -> dict[str, str]:
    """The explorer's readouts in ``tr``'s language, kept like :func:`_results`."""
    base, chosen = _results(layer, values)
    return {"chosen": tr("chosen layer: {sizes}").format(sizes=breakdown(chosen, tr)),
            "baseline": tr("{baseline}: {sizes}").format(baseline=tr(BASELINE),
                                                         sizes=breakdown(base, tr)),
            "change": tr("change: {change}").format(change=change_text(base, chosen, tr)),
            "diff": diff_html(diff_ledgers(base, chosen), tr)}

"""Figures for the notebooks: pure functions that return matplotlib Figures.

Each function takes the paper's symbols (Korthikanti et al. 2022, sec. 4.1-4.2)
or an :class:`~actmem.memory.ActivationMemory`, draws from actmem's numbers
(never a retyped formula) and returns a :class:`matplotlib.figure.Figure`
without touching pyplot's global state. Axes are in MiB (2^20 bytes).
Colours are the Okabe-Ito palette, safe for colour-blind readers.
matplotlib is imported here only, so ``import actmem`` stays light.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.collections import PolyCollection
from matplotlib.patches import Rectangle

from ..language import tr
from ..layer.ledger import GROUPS, HEAD_SPLIT, HIDDEN_SPLIT, REPLICATED
from ..layer.memory import ActivationMemory, activation_memory
from ..units import format_bytes, format_value, to_mib
from ..validate import common_divisors, positive_int
from .redraw import changing_only, figure_axes

OKABE_ITO = {
    "blue": "#0072B2", "orange": "#E69F00", "green": "#009E73",
    "vermillion": "#D55E00", "sky": "#56B4E9", "purple": "#CC79A7",
    "yellow": "#F0E442", "grey": "#999999",
}
GPU_COLOURS = (OKABE_ITO["purple"], OKABE_ITO["green"])
"""GPU 0 and GPU 1 in the sharding and tensor-parallel figures: colours
the term figures do not use (blue and orange are terms there)."""
TERM_COLOURS = {"fixed": OKABE_ITO["grey"], "intermediate": OKABE_ITO["blue"],
                "attention_map": OKABE_ITO["orange"]}
TERM_LABELS = {"fixed": "fixed (replicated)",
               "intermediate": "intermediate (split by hidden or heads)",
               "attention_map": "attention map (split by heads)"}
"""Group labels for the paper's layer (no storage options), as drawn by
:func:`sharding_figure` and :func:`terms_vs_t_figure`. Not true under
options: use :data:`GROUP_LABELS` there."""
GROUP_LABELS = {"fixed": "fixed term",
                "intermediate": "intermediate term",
                "attention_map": "attention-map term (s x s maps or their statistics)"}
"""Neutral group labels, true for every storage option (sequence
parallelism splits the fixed term along s; FlashAttention keeps only
statistics of the attention map)."""
PLACEMENT_LABELS = {
    REPLICATED: "full copy on each GPU",
    HIDDEN_SPLIT: "a 1/t slice of h (Q, K, V) or of the MLP's 4h",
    HEAD_SPLIT: "a/t heads, each map whole s x s",
}
OTHER = "#DDDDDD"
"""Ranks other than GPU 0 and GPU 1 (t > 2)."""


# ---------------------------------------------------------------- sharding

def _group_tensors(result: ActivationMemory, group: str):
    """One representative row per distinct shape in ``group`` (ledger order)."""
    seen = {}
    for row in result.rows:
        if row.group == group and row.shape not in seen:
            seen[row.shape] = row
    return list(seen.values())


def _owner(index: int, pieces: int, t: int) -> int:
    """Rank that keeps piece ``index`` of ``pieces`` equal pieces split over t."""
    return index * t // pieces


def _colour(rank: int | None, column: int | None) -> str:
    """Fill for a piece owned by ``rank`` in ``column`` (None = global view)."""
    if rank is None:  # replicated
        return OKABE_ITO["grey"] if column is None else GPU_COLOURS[column]
    if column is None:
        return GPU_COLOURS[rank] if rank < 2 else OTHER
    return GPU_COLOURS[column] if rank == column else "white"


def _box(x: float, y: float, width: float, height: float) -> list[tuple[float, float]]:
    """The corners of a box, counter-clockwise from its lower left."""
    return [(x, y), (x + width, y), (x + width, y + height), (x, y + height)]


def _draw_matrix(ax, boxes, row, x0, t, column):
    """A (s, b, width) tensor as a box; width h is 1 unit, 4h is 4 units.
    Its pieces are appended to ``boxes`` as (corners, fill, edge width)."""
    width = 4.0 if row.shape[-1] in ("4h", "f") else 1.0
    pieces = 1 if row.placement == REPLICATED else t
    for i in range(pieces):
        rank = None if pieces == 1 else _owner(i, pieces, t)
        boxes.append((_box(x0 + i * width / pieces, 0, width / pieces, 1),
                      _colour(rank, column), 0.6))
    ax.text(x0 + width / 2, -0.25, " x ".join(row.shape), ha="center", va="top",
            fontsize=9)
    return x0 + width + 0.5


def _draw_heads(ax, boxes, row, x0, t, a, column):
    """A (b, a, s, s) tensor as ``a`` squares, one whole s x s map per head,
    appended to ``boxes`` as (corners, fill, edge width)."""
    per_line = min(a, 16)
    lines = -(-a // per_line)
    size = min(1.0 / lines, 4.0 / per_line) * 0.9
    for head in range(a):
        x = x0 + (head % per_line) * size / 0.9
        y = 1 - (head // per_line + 1) * size / 0.9
        boxes.append((_box(x, y, size, size), _colour(_owner(head, a, t), column), 0.4))
    ax.text(x0 + 2, -0.25, tr("{shape} (one square per head)").format(
        shape=" x ".join(row.shape)),
            ha="center", va="top", fontsize=9)
    return x0 + 4.5


def _draw_group(ax, result, group, column):
    """Every distinct tensor of ``group``: global view or GPU ``column``.
    The boxes go in as one collection (fast to add and to draw); returns it."""
    c = result.config
    x, boxes = 0.0, []
    for row in _group_tensors(result, group):
        if row.shape[1:2] == ("a",):
            x = _draw_heads(ax, boxes, row, x, c.t, c.a, column)
        else:
            x = _draw_matrix(ax, boxes, row, x, c.t, column)
    corners, fills, widths = zip(*boxes)
    pieces = PolyCollection(corners, facecolors=fills, edgecolors="black", linewidths=widths)
    ax.add_collection(pieces, autolim=False)
    ax.set_xlim(-0.2, 5.7)
    ax.set_ylim(-0.8, 1.4)
    ax.set_axis_off()
    return pieces


def sharding_figure(s: int = 2048, b: int = 1, h: int = 4096, a: int = 32,
                    t: int = 2, fig: Figure | None = None) -> Figure:
    """What GPU 0 and GPU 1 keep of each term's tensors (notebook 03).

    Rows are the paper's three groups (fixed, intermediate, attention map);
    columns are the global tensor, then GPU 0 and GPU 1. How each tensor is
    drawn follows the ledger's ``placement`` field: replicated tensors are
    whole on every GPU, hidden-split ones keep a 1/t slice of the MLP's 4h,
    head-split ones keep a/t heads (h/t columns of Q, K, V and the
    projection's input; a/t whole s x s squares of the maps). Shapes are
    logical (paper sec. 4.1), not to scale. For t = 1 there is no GPU 1;
    for t > 2 the other ranks are drawn light grey in the global column.
    ``fig``: a Figure this function returned, to redraw in place
    (:mod:`actmem.views.redraw`): the shapes' labels and the global
    column's titles, the same for every t, are kept as drawn.

    Raises:
        TypeError, ValueError: invalid sizes, see :class:`actmem.LayerConfig`.
    """
    result = activation_memory(s, b, h, a, t)
    fig, axes = figure_axes(fig, (12, 6.5), 3, 3)
    titles = (tr("global tensor"), "GPU 0", "GPU 1" if t == 2 else
              tr("GPU 1 (of {t})").format(t=t))
    changing = []  # what depends on t (see redraw.changing_only)
    for r, group in enumerate(GROUPS):
        per_gpu = tr("{size} per GPU").format(size=format_bytes(result.group_bytes(group)))
        placement = _group_tensors(result, group)[-1].placement
        for col in range(3):
            ax = axes[r, col]
            if col == 2 and t == 1:
                ax.set_axis_off()
                changing.append(ax.text(0.5, 0.5, tr("t = 1: no GPU 1"), ha="center",
                                        transform=ax.transAxes))
                continue
            changing.append(_draw_group(ax, result, group, None if col == 0 else col - 1))
            label = tr(TERM_LABELS[group]) if col == 0 else \
                tr("{placement}: {size}").format(placement=tr(PLACEMENT_LABELS[placement]),
                                                 size=per_gpu)
            ax.set_title(f"{titles[col]}\n{label}" if r == 0 else label, fontsize=9)
            if col > 0:
                changing.append(ax.title)
    fig.suptitle(tr("Who keeps what at t = {t} (s={s}, b={b}, h={h}, a={a}); "
                    "logical shapes, not to scale").format(t=t, s=s, b=b, h=h, a=a))
    kept = tuple((ax.get_title(), *(text.get_text() for text in ax.texts))
                 for ax in axes.flat if ax.title not in changing)
    changing_only(fig, (t == 1, kept), [*changing, fig._suptitle])
    return fig


# ---------------------------------------------------------------- tensor parallelism

def tensor_parallel_figure(t: int = 2) -> Figure:
    """How Megatron-LM splits an MLP block over t GPUs (notebook 03).

    Shoeybi et al. 2019, sec. 3; Korthikanti et al. 2022, sec. 4.2.1. One
    row per GPU: the block's input X is whole on every GPU (replicated);
    the first linear layer is *column-parallel* (GPU i holds columns i of
    W1, so it computes its own slice of the 4h-wide output and applies
    GeLU to it alone: hidden-split); the second is *row-parallel* (GPU i
    holds the matching rows of W2 and produces a partial sum of the whole
    (s, b, h) output); an all-reduce adds the partial sums, so the output
    is whole on every GPU again. Attention is split the same way, by heads.

    Raises:
        TypeError, ValueError: ``t`` is not an integer from 2 to 4.
    """
    positive_int("t", t)
    if not 2 <= t <= 4:
        raise ValueError(f"t={t} must be 2, 3 or 4 (one row per GPU is drawn)")
    fig = Figure(figsize=(11, 1.6 + 1.2 * t), layout="constrained")
    ax = fig.subplots()
    # (x, width, label, whole on every GPU?, what the arrow into it is)
    steps = [(0.0, 1.7, tr("X  (s, b, h)\nwhole"), True, None),
             (2.5, 1.9, tr("X W1[:, part {gpu}]\n(s, b, 4h/t)"), False,
              tr("column-parallel linear\n(GPU i: part i of W1's columns)")),
             (5.1, 1.7, "GeLU\n(s, b, 4h/t)", False, None),
             (7.5, 1.7, tr("partial sum {gpu}\n(s, b, h)"), False,
              tr("row-parallel linear\n(GPU i: part i of W2's rows)")),
             (10.2, 1.7, tr("Y  (s, b, h)\nwhole"), True, tr("all-reduce:\nsum over GPUs"))]
    for gpu in range(t):
        y = (t - 1 - gpu) * 1.2
        colour = GPU_COLOURS[gpu] if gpu < 2 else OTHER
        ax.text(-0.2, y + 0.4, f"GPU {gpu}", ha="right", va="center", fontsize=10,
                fontweight="bold")
        for x, width, label, whole, _ in steps:
            ax.add_patch(Rectangle((x, y), width, 0.8, edgecolor="black", linewidth=0.8,
                                   facecolor=OKABE_ITO["grey"] if whole else colour))
            ax.text(x + width / 2, y + 0.4, label.format(gpu=gpu), ha="center",
                    va="center", fontsize=9)
        for (x0, w0, *_), (x1, *_) in zip(steps, steps[1:]):
            ax.annotate("", (x1, y + 0.4), (x0 + w0, y + 0.4),
                        arrowprops=dict(arrowstyle="->", linewidth=1))
    top = (t - 1) * 1.2 + 0.8
    ax.plot([9.7, 9.7], [0.4, top - 0.4], color="black", linewidth=2)  # the all-reduce
    for (x0, w0, *_), (x1, _, _, _, arrow) in zip(steps, steps[1:]):
        if arrow:
            ax.text((x0 + w0 + x1) / 2, top + 0.1, arrow, ha="center", va="bottom", fontsize=9)
    ax.set_xlim(-1.1, 12.0)
    ax.set_ylim(-0.1, top + 0.75)
    ax.set_axis_off()
    ax.set_title(tr("An MLP block on t = {t} GPUs (Megatron-LM): only the 4h-wide middle is "
                    "split; input and output are whole on every GPU").format(t=t), fontsize=10)
    return fig


def bytes_per_gpu_figure(s: int = 2048, b: int = 1, h: int = 4096, a: int = 32,
                         t: int = 2) -> Figure:
    """To scale: each saved tensor's bytes, whole and on one GPU (notebook 03).

    One horizontal bar per ledger row, lengths in MiB: the whole tensor as
    an outline, the part one GPU keeps filled in its group's colour. The
    companion of :func:`sharding_figure`, whose shapes are not to scale.

    Raises:
        TypeError, ValueError: invalid sizes, see :class:`actmem.LayerConfig`.
    """
    result = activation_memory(s, b, h, a, t)
    rows = result.rows[::-1]  # first tensor on top
    fig = Figure(figsize=(10, 0.38 * len(rows) + 1.4), layout="constrained")
    ax = fig.subplots()
    names = [tr(r.name) for r in rows]
    ax.barh(names, [to_mib(r.global_bytes) for r in rows], fill=False,
            edgecolor="black", linewidth=0.8,  # at t = 1 the fill covers it: no legend entry
            label=tr("whole tensor") if t > 1 else "_nolegend_")
    for group in GROUPS:
        ax.barh(names, [to_mib(r.bytes) if r.group == group else 0 for r in rows],
                color=TERM_COLOURS[group],
                label=tr("kept by one GPU: {term}").format(term=tr(TERM_LABELS[group])))
    for y, r in enumerate(rows):
        ax.text(to_mib(r.global_bytes), y, " " + tr("{part} of {whole}").format(
            part=format_value(r.bytes), whole=format_value(r.global_bytes)),
            va="center", fontsize=9)
    ax.set_xlim(0, to_mib(max(r.global_bytes for r in rows)) * 1.3)
    ax.tick_params(labelsize=9)
    ax.set_xlabel(tr("MiB per layer, per micro-batch (bar lengths to scale)"), fontsize=9)
    ax.set_title(tr("What one GPU keeps at t = {t} (s={s}, b={b}, h={h}, a={a}), to scale")
                 .format(t=t, s=s, b=b, h=h, a=a), fontsize=10)
    ax.legend(fontsize=9, loc="lower right")
    return fig


def _stacked_terms(ax, results: list[ActivationMemory], fontsize: int) -> list[float]:
    """One bar per result at x = 0, 1, ..., stacked by the three groups
    (MiB, the paper's labels), its total written on top; returns the tops."""
    tops = [0.0] * len(results)
    for group in GROUPS:
        heights = [to_mib(r.group_bytes(group)) for r in results]
        ax.bar(range(len(results)), heights, bottom=tops, color=TERM_COLOURS[group],
               label=tr(TERM_LABELS[group]), edgecolor="black", linewidth=0.5)
        tops = [u + v for u, v in zip(tops, heights)]
    for i, (top, r) in enumerate(zip(tops, results)):
        ax.text(i, top, format_value(r.total), ha="center", va="bottom", fontsize=fontsize)
    return tops


def doubling_figure(s: int = 2048, b: int = 1, h: int = 4096, a: int = 32,
                    t: int = 1) -> Figure:
    """The three terms of a layer, and of the same layer with one symbol
    doubled (notebook 01): which term grows with which symbol.

    One group of stacked bars per case (the layer, then 2s, 2b, 2h, 2a,
    2t), in MiB, with each total written above its bar.

    Raises:
        TypeError, ValueError: invalid sizes, or a doubled size that is not
            valid (see :class:`actmem.LayerConfig`).
    """
    base = dict(s=s, b=b, h=h, a=a, t=t)
    cases = {tr("the layer"): base, **{f"2{k}": {**base, k: 2 * v} for k, v in base.items()}}
    results = {name: activation_memory(**sizes) for name, sizes in cases.items()}
    fig = Figure(figsize=(8, 4.2), layout="constrained")
    ax = fig.subplots()
    _stacked_terms(ax, list(results.values()), fontsize=9)
    ax.set_xticks(range(len(results)), list(results))
    ax.set_ylabel(tr("MiB per layer, per micro-batch, per GPU"))
    ax.set_title(tr("Double one symbol (s={s}, b={b}, h={h}, a={a}, t={t})").format(**base))
    ax.legend(fontsize=9)
    return fig


# ---------------------------------------------------------------- terms vs t

TERMS_MARGINS = (1.3, 0.15, 0.55, 0.55, 0.0)
"""Left, right, top, bottom margins (inches) of :func:`terms_vs_t_figure`:
room for a two-line y label beside seven-digit MiB ticks and a two-line
title, so a new layer never needs the figure laid out again. Without the
title the top margin is 0.15 inch and the figure that much shorter."""


def terms_vs_t_title(s: int, b: int, h: int, a: int, fixed: int, tr=tr,
                     caption: bool = False) -> str:
    """The title of :func:`terms_vs_t_figure`, two lines: the layer and the
    fixed floor ``fixed`` (bytes); one line with ``caption`` (text above an
    explorer's image). Words translated by ``tr`` (:mod:`actmem.language`)."""
    text = tr("Three terms against t (s={s}, b={b}, h={h}, a={a}); fixed floor (dashed) "
              "{size} at every t") if caption else \
        tr("Three terms against t (s={s}, b={b}, h={h}, a={a});\nfixed floor (dashed) {size} "
           "at every t")
    return text.format(s=s, b=b, h=h, a=a, size=format_bytes(fixed))


def terms_vs_t_figure(s: int = 2048, b: int = 1, h: int = 4096, a: int = 32,
                      t_values: list[int] | None = None,
                      highlight: int | None = None, fig: Figure | None = None,
                      title: bool = True) -> Figure:
    """Stacked bars of the three terms (MiB) for each tensor-parallel size.

    The fixed term is the same at every t, so it is drawn as a floor (a
    dashed line) under which no amount of tensor parallelism goes (notebook
    04). ``t_values`` defaults to every valid t (divisors of a and h);
    ``highlight`` outlines one bar. ``fig``: a Figure this function
    returned, to redraw in place (:mod:`actmem.views.redraw`). ``title``:
    False to leave out the title (:func:`terms_vs_t_title`), which an
    explorer shows as text above the image; the axes keep their size.

    Raises:
        TypeError, ValueError: invalid sizes, see :class:`actmem.LayerConfig`.
    """
    ts = t_values or common_divisors(a, h)
    results = [activation_memory(s, b, h, a, t) for t in ts]
    margins = TERMS_MARGINS if title else (*TERMS_MARGINS[:2], 0.15, *TERMS_MARGINS[3:])
    fig, ax = figure_axes(fig, (8, 4.5 - TERMS_MARGINS[2] + margins[2]), margins=margins)
    tops = _stacked_terms(ax, results, fontsize=9)
    floor = ax.axhline(to_mib(results[0].fixed), color="black", linestyle="--", linewidth=1,
                       label=tr("fixed floor: the same at every t"))
    if highlight in ts:  # above the floor line, under the labels and the legend
        i = ts.index(highlight)
        ax.bar([i], [tops[i]], fill=False, edgecolor=OKABE_ITO["vermillion"],
               linewidth=2.5, zorder=2.6, label=tr("outlined: the t chosen"))
    ax.set_xticks(range(len(ts)), [str(t) for t in ts])
    ax.tick_params(labelsize=9)
    ax.set_xlabel(tr("tensor-parallel size t (GPUs)"))
    bar_labels = list(ax.texts)
    # the y label beside the axis, not the axis's own: a redraw of the
    # ticks (an Axis draws its label too) does not draw it again; 50 pt
    # clear of the axis, wider than seven-digit ticks at 9 pt
    ax.annotate(tr("activation memory (MiB)\nper layer, per micro-batch, per GPU"), (0, 0.5),
                xycoords="axes fraction", xytext=(-50, 0), textcoords="offset points",
                rotation=90, ha="right", va="center", multialignment="center")
    ax.yaxis.set_label_coords(0.5, 0.5)  # no label: never placed beside the tick labels
    if title:
        ax.set_title(terms_vs_t_title(s, b, h, a, results[0].fixed))
    legend = ax.legend(fontsize=9, loc="upper right")  # "best" picks it here
    # a new layer or t changes the bars, their labels, the floor, the
    # outline, the title and the y ticks (fixed margins leave room for the
    # widest); png keeps the rest (x axis, y label, legend) while t's values
    # and the legend stay
    changing_only(fig, (ax.get_xlim(), tuple(map(str, ts)),
                        tuple(text.get_text() for text in legend.get_texts())),
                  [*ax.patches, *bar_labels, floor, ax.title, ax.yaxis])
    return fig


TRAINING_MEMORY_PARTS = (
    ("model states", ("parameters", "gradients", "optimizer states")),
    ("activations", ("Transformer layers (this formula)",
                     "embedding, output layer and loss")),
    ("runtime", ("communication buffers", "kernel workspaces",
                 "allocator overhead and fragmentation")),
)
"""What a training GPU's memory holds besides (and including) the layers'
activations, as notebook 05 lists them. Only the first activation entry is
the formula; notebook 09 puts a number on each."""

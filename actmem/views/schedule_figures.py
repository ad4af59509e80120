"""Figures for pipeline schedules (notebook 05): the chart, memory over time,
and the first stage against p.

:func:`schedule_figure` draws a :class:`~actmem.schedules.PipelineSchedule`
from its operations and simulated times: a Gantt chart (stages as rows,
time as columns, forward, backward and, for the zero-bubble schedules,
input-gradient (I) and weight-gradient (W) boxes labelled by micro-batch) above
the number of forward passes each stage holds over time (a pass counted
until its B or W), which is what its activation memory follows (Korthikanti
et al. 2022, sec. 4.2.3). Colours are Okabe-Ito (colour-blind safe); chunk 1
and later of a multi-chunk schedule are hatched, with the hatching left out
behind the box numbers. Nothing here computes a number the schedule does
not already hold.

Drawn for speed in an explorer (issue 19): all boxes are one
``PolyCollection`` and the hatching one compound path, and all box numbers one
``PathCollection`` of glyph outlines (``TextPath``), which Agg fills in C++
instead of laying out one ``Text`` per box. The lower panel has no legend:
a sample of each stage's line stands beside the stage's name above, so what
stays while p stays (stage names and their samples) is one image kept by
:func:`actmem.views.redraw.png`, and the legend and the axis labels are
stamps it draws once and pastes.
"""

from __future__ import annotations

import functools

import numpy as np
from matplotlib.collections import LineCollection, PathCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch, PathPatch
from matplotlib.path import Path
from matplotlib.textpath import TextPath
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import Affine2D, IdentityTransform, blended_transform_factory

from ..language import tr
from .figures import OKABE_ITO
from .redraw import changing_only, figure_axes
from ..layer.memory import ActivationMemory
from ..run.schedule.schedules import (BACKWARD, FORWARD, INPUT_GRAD, WEIGHT_GRAD, PipelineSchedule,
                             simulate_schedule)
from ..run.schedule.training import model_activation_memory
from ..units import format_bytes, format_value, to_mib
from ..validate import common_divisors

PASS_COLOURS = {FORWARD: OKABE_ITO["sky"], BACKWARD: OKABE_ITO["orange"],
                INPUT_GRAD: OKABE_ITO["yellow"], WEIGHT_GRAD: OKABE_ITO["green"]}
"""Forward, backward, input-gradient and weight-gradient boxes."""
STAGE_COLOURS = (OKABE_ITO["blue"], OKABE_ITO["vermillion"], OKABE_ITO["green"],
                 OKABE_ITO["purple"], OKABE_ITO["orange"], "#000000",
                 OKABE_ITO["sky"], OKABE_ITO["grey"])
"""Lines of the in-flight plot, stage 0 first: Okabe-Ito's seven colours and
black (repeated after 8 stages, then with another line style)."""
STAGE_STYLES = ("-", "--", ":", "-.")
"""Line styles of the in-flight plot: with :data:`STAGE_COLOURS`, no two of
16 stages share colour and style, and neighbours never share a style."""
DIGIT_PT = (5.0, 9.0)
"""Smallest and largest font size (points) of the box numbers: boxes too
small for the smallest get none, and the title says so."""
MARGINS = (1.2, 2.35, 0.5, 0.6, 0.12)
"""Left (stage names and their line keys), right (legend), top (title) and
bottom (time axis) margins and the space between the panels, inches:
placed at once, without constrained layout
(:func:`actmem.views.redraw.figure_axes`). Without a title the top margin
is :data:`UNTITLED_TOP` and the figure that much shorter."""
UNTITLED_TOP = 0.15
"""Top margin (inches) of a figure drawn without its title."""
KEY_PT = (26.0, 4.0)
"""Where each stage's line key runs, points left of the chart: from the
first to the second; the stage's name is set left of it."""


def _chart_points() -> float:
    """The chart's width (points), which sets how large box numbers can be."""
    left, right, *_ = MARGINS
    return (10 - left - right) * 72

TITLES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "interleaved 1F1B",
          "interleaved-zb": "interleaved zero bubble", "zbv": "zero bubble V",
          "dualpipev": "DualPipe V", "looped-bfs": "looped breadth-first"}


def stage_style(i: int) -> dict:
    """Colour and line style of stage ``i``'s line in the in-flight plot."""
    return dict(color=STAGE_COLOURS[i % len(STAGE_COLOURS)],
                linestyle=STAGE_STYLES[(i + i // len(STAGE_COLOURS)) % len(STAGE_STYLES)])


@functools.lru_cache(maxsize=4096)
def _glyphs(text: str, size: float) -> Path:
    """``text`` as a glyph outline ``size`` points high, centred on (0, 0)
    (points; built once per text and size)."""
    path = TextPath((0, 0), text, size=size)
    box = path.get_extents()
    return path.transformed(Affine2D().translate(-(box.x0 + box.x1) / 2,
                                                          -(box.y0 + box.y1) / 2))


def digit_size(schedule: PipelineSchedule) -> float | None:
    """Font size (points) of the box numbers, from the narrowest box: the
    widest number fits in 85 % of its width and 70 % of its row; None when
    that is below :data:`DIGIT_PT`'s smallest size."""
    p = schedule.p
    box_w = float(schedule.shortest_op() / schedule.makespan()) * _chart_points()
    panels = _figure_height(p) - sum(MARGINS[2:])
    box_h = 0.8 * 72 * panels * max(p, 2) / (max(p, 2) + 2) / p
    digits = len(str(schedule.m - 1))
    size = min(DIGIT_PT[1], 0.7 * box_h / 0.73, 0.85 * box_w / (0.62 * digits))
    return round(size * 2) / 2 if size >= DIGIT_PT[0] else None  # half points: few sizes


@functools.lru_cache(maxsize=256)
def _band(width: float, height: float) -> Path:
    """A rectangle ``width`` x ``height`` points, centred on (0, 0)."""
    return Path.unit_rectangle().transformed(
        Affine2D().translate(-0.5, -0.5).scale(width, height))


def _figure_height(p: int, title: bool = True) -> float:
    return 2.2 + 0.35 * p - (0 if title else MARGINS[2] - UNTITLED_TOP)


def _labels(ax, centres, fills, size: float, scale: float) -> None:
    """Box numbers ``(x, y, text, hatched, width)`` at ``size`` points and,
    in each hatched box, behind its number a band of the box's own colour
    across the box (``scale``: points per time unit), so no hatching runs
    through the digits. One collection each."""
    def collection(paths, offsets, colours, zorder):
        shapes = PathCollection(paths, [1.0], offsets=offsets, offset_transform=ax.transData,
                                facecolors=colours, edgecolors="none", linewidths=0,
                                zorder=zorder)
        shapes.set_transform(IdentityTransform())  # paths in points, as scatter's markers
        ax.add_collection(shapes, autolim=False)
    collection([_glyphs(text, size) for _, _, text, _, _ in centres],
               [(x, y) for x, y, *_ in centres], "black", 3)
    behind = [((x, y), round(width * scale - 1.5, 1), fill)
              for (x, y, _, hatched, width), fill in zip(centres, fills) if hatched]
    if behind:
        collection([_band(width, 0.73 * size + 3) for _, width, _ in behind],
                   [xy for xy, _, _ in behind], [fill for *_, fill in behind], 2.5)


def _chart(ax, schedule: PipelineSchedule, timeline) -> None:
    """Gantt chart: one row per stage, stage 0 on top; the boxes in one
    collection, the hatching of chunks >= 1 over them as one path."""
    corners, centres, fills = [], [], []
    for i, stage in enumerate(timeline):
        for timed in stage:
            x0, x1 = float(timed.start), float(timed.end)
            corners.append([(x0, i - 0.4), (x1, i - 0.4), (x1, i + 0.4), (x0, i + 0.4)])
            centres.append(((x0 + x1) / 2, i, str(timed.op.microbatch), timed.op.chunk > 0,
                            x1 - x0))
            fills.append(PASS_COLOURS[timed.op.kind])
    ax.add_collection(PolyCollection(corners, facecolors=fills, edgecolors="black",
                                     linewidths=0.4), autolim=False)
    hatched = [box for box, centre in zip(corners, centres) if centre[3]]
    if hatched:  # one path: Agg builds the hatch pattern once, not once per box;
        # add_artist, not add_patch: the limits are set below, and add_patch
        # would walk every box's Bezier segments to update them
        ax.add_artist(PathPatch(Path.make_compound_path_from_polys(np.array(hatched)),
                                facecolor="none", edgecolor="black", linewidth=0.4, hatch="//"))
    size = digit_size(schedule)
    if size is not None:
        _labels(ax, centres, fills, size, _chart_points() / float(schedule.makespan()))
    ax.set_yticks(range(schedule.p), [tr("stage {i}").format(i=i) for i in range(schedule.p)])
    _stage_keys(ax, schedule.p)
    ax.set_ylim(schedule.p - 0.5, -0.5)
    ax.set_xlim(0, float(schedule.makespan()))
    kinds = {op.kind for stage in schedule.ops for op in stage}
    labels = {FORWARD: tr("forward (1 unit per stage)"), BACKWARD: tr("backward (2 units)"),
              INPUT_GRAD: tr("input gradient I (1 unit)"),
              WEIGHT_GRAD: tr("weight gradient W (1 unit)")}
    handles = [Patch(facecolor=PASS_COLOURS[kind], edgecolor="black", label=label)
               for kind, label in labels.items() if kind in kinds]
    if schedule.v > 1:
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="//",
                             label=tr("model chunk >= 1")))
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))


def schedule_title(schedule: PipelineSchedule, tr=tr, bubble: bool = True) -> str:
    """The chart's title, two lines: the schedule, p, m and v; the bubble,
    and whether the boxes carry micro-batch numbers (:func:`digit_size`).
    ``bubble=False``: one line without the bubble (an explorer's caption
    above the image, beside a readout of the bubble). Words translated by
    ``tr`` (:mod:`actmem.language`)."""
    chunks = tr(", v={v} chunks per GPU").format(v=schedule.v) if schedule.v > 1 else ""
    note = tr("box numbers: micro-batch") if digit_size(schedule) is not None else \
        tr("boxes too narrow for micro-batch numbers")
    text = tr("{title}: p={p} stages, m={m} micro-batches{chunks}\n"
              "bubble {bubble:.1%} of the ideal time; {note}") if bubble else \
        tr("{title}: p={p} stages, m={m} micro-batches{chunks}; {note}")
    return text.format(title=tr(TITLES[schedule.schedule]), p=schedule.p, m=schedule.m,
                       chunks=chunks, bubble=float(schedule.bubble_fraction()), note=note)


def _stage_keys(ax, p: int) -> None:
    """Beside each stage's name, a sample of its line in the lower panel
    (:func:`stage_style`): that panel's key, one collection, no text, so
    the figure needs no legend that changes with ``p``."""
    x0, x1 = (-pt / _chart_points() for pt in KEY_PT)
    styles = [stage_style(i) for i in range(p)]
    keys = LineCollection([[(x0, i), (x1, i)] for i in range(p)],
                          colors=[style["color"] for style in styles],
                          linestyles=[style["linestyle"] for style in styles], linewidths=1.5,
                          transform=blended_transform_factory(ax.transAxes, ax.transData),
                          clip_on=False)
    ax.add_artist(keys)
    ax.tick_params(axis="y", length=0, pad=KEY_PT[0] + 3)


def _in_flight(ax, schedule: PipelineSchedule, timeline) -> None:
    """Forward passes held by each stage after each of its operations, one
    colour and line style per stage (:func:`stage_style`, keyed beside the
    stage names above)."""
    for i, stage in enumerate(timeline):
        times = [0.0] + [float(t.end) for t in stage]
        counts = [0] + schedule.in_flight(i)
        ax.step(times, counts, where="post", linewidth=1.5, **stage_style(i))
    ax.set_xlim(0, float(schedule.makespan()))
    ax.set_ylim(0, None)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts: no 2.5 passes
    # axis labels as texts beside the axes, so that a redraw of the ticks
    # (an Axis draws its label too) does not draw them again
    ax.annotate(tr("chunk passes held") if schedule.v > 1 else tr("micro-batches held"),
                (0, 0.5), xycoords="axes fraction", xytext=(-24, 0), textcoords="offset points",
                rotation=90, ha="right", va="center", fontsize=8)
    ax.annotate(tr("time (units: one forward pass of one micro-batch through one stage)"),
                (0.5, 0), xycoords="axes fraction", xytext=(0, -20), textcoords="offset points",
                ha="center", va="top")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_label_coords(0.5, 0.5)  # no label: never placed beside the tick labels


def schedule_figure(schedule: PipelineSchedule, fig: Figure | None = None,
                    title: bool = True) -> Figure:
    """The schedule chart above the in-flight count per stage over time.

    Box numbers (micro-batches) are drawn 5 to 9 pt high, as the narrowest
    box allows (:func:`digit_size`); when it allows less, none are drawn and
    the title says so.

    Args:
        schedule: from :func:`actmem.simulate_schedule`.
        fig: a Figure this function returned, to redraw in place
            (:mod:`actmem.views.redraw`).
        title: False to leave out the title (:func:`schedule_title`), which
            an explorer shows as text above the image; the panels keep their
            size.

    Returns:
        A matplotlib Figure (not registered with pyplot).

    Raises:
        TypeError: ``schedule`` is not a :class:`PipelineSchedule`.
    """
    if not isinstance(schedule, PipelineSchedule):
        raise TypeError("schedule must be a PipelineSchedule from "
                        f"actmem.simulate_schedule, got {type(schedule).__name__}")
    margins = MARGINS if title else (*MARGINS[:2], UNTITLED_TOP, *MARGINS[3:])
    fig, (chart, held) = figure_axes(fig, (10, _figure_height(schedule.p, title)), 2, 1,
                                     margins, sharex=True,
                                     height_ratios=[max(schedule.p, 2), 2])
    timeline = schedule.timeline
    _chart(chart, schedule, timeline)
    _in_flight(held, schedule, timeline)
    if title:
        chart.set_title(schedule_title(schedule), fontsize=9)
    # what changes with the schedule, v, m and the order while p stays; the
    # rest (stage names and their keys) is kept by png, one image per p,
    # and the legend and the axis labels as stamps
    chart.tick_params(axis="x", bottom=False)  # time is read on the lower panel
    legend = chart.get_legend()
    changing_only(fig, tuple(text.get_text() for text in chart.get_yticklabels()),
                  [*(c for c in chart.collections if not isinstance(c, LineCollection)),
                   *chart.patches, *held.lines, chart.title,
                   held.xaxis, held.yaxis, *chart.spines.values(), *held.spines.values()],
                  [(legend, tuple(text.get_text() for text in legend.get_texts())),
                   *((text, text.get_text()) for text in held.texts)])
    return fig


def first_stage_figure(per_layer: ActivationMemory, L: int, m: int) -> Figure:
    """The first stage's activations against p (bars, MiB): 1F1B and
    interleaved 1F1B (v=2, hatched) from the simulation, with ``L*M`` (one
    GPU, all layers) and the naive ``L*M/p`` as lines. Under 1F1B with
    ``m >= p`` every bar is ``L*M``: p cancels (sec. 4.2.3); each
    interleaved bar is labelled with its excess over ``L*M`` (the factor
    ``1 + (p-1)/(p*v)`` once ``m >= 2p``). p runs over the divisors of
    ``L`` up to ``m``; interleaved bars only where Megatron-LM accepts them
    with its default group size (``p`` divides ``m``, ``2p`` divides ``L``).
    Bar labels are 9 pt.

    Raises:
        TypeError, ValueError: ``L`` or ``m`` not a positive int.
    """
    ps = [p for p in common_divisors(L) if p <= m]
    whole = model_activation_memory(per_layer, L)
    fig = Figure(figsize=(8, 4.8), layout="constrained")
    ax = fig.subplots()
    x = range(len(ps))
    one = [simulate_schedule("1f1b", p, m).stage_activation_memory(0, per_layer, L) for p in ps]
    ax.bar([i - 0.2 for i in x], [to_mib(n) for n in one], width=0.4,
           color=PASS_COLOURS[FORWARD], edgecolor="black", label=f"1F1B, m={m}")
    inter = [(i, simulate_schedule("interleaved", p, m, 2).stage_activation_memory(
        0, per_layer, L)) for i, p in zip(x, ps) if p > 1 and m % p == 0 and L % (2 * p) == 0]
    ax.bar([i + 0.2 for i, _ in inter], [to_mib(n) for _, n in inter], width=0.4,
           color=PASS_COLOURS[BACKWARD], edgecolor="black", hatch="//",
           label=tr("interleaved 1F1B, v=2, m={m}: % over L*M on each bar").format(m=m))
    labels = [(i - 0.2, format_value(n), n) for i, n in zip(x, one)] + [
        (i + 0.2, f"{format_value(n)}\n+{n / whole - 1:.1%}", n) for i, n in inter]
    for i, label, n in labels:
        ax.text(i, to_mib(n), label, ha="center", va="bottom", fontsize=9,
                bbox=dict(facecolor="white", edgecolor="none", pad=1))
    ax.axhline(to_mib(whole), color="black", linewidth=1,
               label=tr("L*M = {size}: all L layers, one micro-batch").format(
                   size=format_bytes(whole)))
    ax.plot(list(x), [to_mib(whole) / p for p in ps], color=OKABE_ITO["vermillion"],
            linestyle="--", marker="o", label=tr("L*M/p: naive, not the peak"))
    ax.set_ylim(0, 1.25 * max(to_mib(n) for n in [*one, *(n for _, n in inter)]))
    ax.set_xticks(list(x), [str(p) for p in ps])
    ax.tick_params(labelsize=9)
    ax.set_xlabel(tr("pipeline-parallel size p (stages)"))
    ax.set_ylabel(tr("first stage's activations (MiB)"))
    ax.set_title(tr("Under 1F1B p cancels: the first stage holds L*M whatever p (L={L}, "
                    "M={size});\ninterleaving (hatched) holds more, except at m = p")
                 .format(L=L, size=format_bytes(per_layer.total)), fontsize=10)
    ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    return fig

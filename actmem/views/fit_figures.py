"""Figures for notebook 09, "Will it fit?": stages against the GPU, what
is alive when during one training step (the timeline), and full
recomputation's peak against the group size k.

Bars are to scale, in GiB (2^30 bytes); colours are Okabe-Ito, one per part
of :data:`actmem.peak.PARTS`. Every number comes from
:func:`actmem.training_memory`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from ..language import tr, translator
from .figures import OKABE_ITO
from .printed import event_label  # noqa: F401  (notebooks 09 and 12 import it from here)
from .redraw import changing_only, figure_axes
from .timeline_marks import draw_marks, legend_entries, name_transients, new_marks
from ..run.job.model import ModelConfig
from ..run.peak import PARTS, TrainingMemory, training_memory
from ..run.moments.timeline import CATEGORIES
from ..run.schedule.training import chunk_layers
from ..units import format_bytes, format_value, to_gib

PART_COLOURS = {
    "weights": OKABE_ITO["blue"], "gradients": OKABE_ITO["sky"],
    "optimizer": OKABE_ITO["purple"], "layer_activations": OKABE_ITO["orange"],
    "embedding_activations": OKABE_ITO["yellow"], "output_activations": OKABE_ITO["vermillion"],
    "recompute_working_set": OKABE_ITO["green"], "reserve": OKABE_ITO["grey"],
}
PART_LABELS = {name: name.replace("_", " ") for name in PARTS}


def stage_memory_figure(result: TrainingMemory, title: str = "",
                        fig: Figure | None = None) -> Figure:
    """Stacked bars, one per pipeline stage, of every part in GiB (their
    sum), the stage's peak beside it (a black bar across the stack: the
    most alive at one moment, which the sum is not; plus the stage's
    reserve, which the bars stack too), both written above it, and the GPU's capacity as a line when ``result.gpu_memory`` is set. ``fig``: a
    Figure this function returned, to redraw in place
    (:mod:`actmem.views.redraw`).

    Raises:
        TypeError: ``result`` is not a :class:`TrainingMemory`.
    """
    if not isinstance(result, TrainingMemory):
        raise TypeError("result must be a TrainingMemory from actmem.training_memory, "
                        f"got {type(result).__name__}")
    fig, ax = figure_axes(fig, (8, 4.5))
    x = range(len(result.stages))
    bottom = [0.0] * len(result.stages)
    for part in PARTS:
        heights = [to_gib(stage.parts[part]) for stage in result.stages]
        if any(heights):
            ax.bar(x, heights, bottom=bottom, color=PART_COLOURS[part],
                   edgecolor="black", linewidth=0.4, label=tr(PART_LABELS[part]))
            bottom = [b + h for b, h in zip(bottom, heights)]
    # what must fit: the peak, plus the reserve where the bars stack one
    peaks = [stage.peak + stage.reserve for stage in result.stages]
    reserved = any(stage.reserve for stage in result.stages)
    ax.hlines([to_gib(v) for v in peaks], [i - 0.45 for i in x], [i + 0.45 for i in x],
              color="black", linewidth=2, label=tr("peak (one moment) plus the reserve")
              if reserved else tr("peak (one moment)"))
    for i, stage in zip(x, result.stages):
        text = tr("sum {total}\npeak + reserve {peak}") if reserved else tr("sum {total}\npeak {peak}")
        ax.text(i, max(bottom[i], to_gib(peaks[i])), text.format(
            total=format_value(stage.total, "GiB"), peak=format_value(peaks[i], "GiB")),
            ha="center", va="bottom", fontsize=8)
    if result.gpu_memory is not None:
        label = tr("GPU: {size} (fits)") if result.fits else tr("GPU: {size} (does not fit)")
        ax.axhline(to_gib(result.gpu_memory), color="black", linestyle="--",
                   label=label.format(size=format_bytes(result.gpu_memory, "GiB")))
    ax.set_xticks(list(x), [tr("stage {i}").format(i=stage.stage) for stage in result.stages])
    ax.set_ylabel(tr("memory per GPU (GiB)"))
    ax.set_title(tr(title) if title else tr("Peak memory of each pipeline stage's GPU"))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


def recompute_figure(model: ModelConfig, **run) -> Figure:
    """Full recomputation in groups of k layers: the checkpoints held
    between passes fall as 1/k, the group recomputed during backward grows
    as k; their sum, the peak, is U-shaped in k. ``run`` are the other
    arguments of :func:`actmem.training_memory` (t, p, m, ...); the
    first stage is drawn, in GiB.

    Raises:
        TypeError, ValueError: as :func:`actmem.training_memory`.
    """
    layers = chunk_layers(model.L, run.get("p", 1), run.get("v", 1))
    ks = list(range(1, layers + 1))
    stages = [training_memory(model, recompute="full", recompute_num_layers=k, **run)
              .stages[0] for k in ks]
    held = [to_gib(s.layer_activations) for s in stages]
    working = [to_gib(s.recompute_working_set) for s in stages]
    peak = [a + b for a, b in zip(held, working)]
    best = peak.index(min(peak))
    fig = Figure(figsize=(8, 4.5), layout="constrained")
    ax = fig.subplots()
    lowest = stages[best].layer_activations + stages[best].recompute_working_set
    ax.plot(ks, held, color=OKABE_ITO["orange"], label=tr("checkpoints held between passes"))
    ax.plot(ks, working, color=OKABE_ITO["green"], label=tr("one group recomputed in backward"))
    ax.plot(ks, peak, color="black", linewidth=2, label=tr("peak: their sum"))
    ax.plot([ks[best]], [peak[best]], "o", color=OKABE_ITO["vermillion"],
            label=tr("lowest peak: k={k}, {size}").format(k=ks[best],
                                                         size=format_bytes(lowest, "GiB")))
    ax.set_xscale("log", base=2)
    ax.set_xlabel(tr("k = recompute_num_layers (layers per checkpointed group, log scale)"))
    ax.set_ylabel(tr("first stage's layer activations (GiB)"))
    ax.set_title(tr("Full recomputation: the peak against k ({layers} layers on the stage)")
                 .format(layers=layers))
    ax.legend(fontsize=8)
    return fig


# ------------------------------------------------------------------ timeline

CATEGORY_COLOURS = {
    "weights": OKABE_ITO["blue"], "gradients": OKABE_ITO["sky"],
    "optimizer": OKABE_ITO["purple"], "activations": OKABE_ITO["orange"],
    "logits_loss": OKABE_ITO["vermillion"], "transient": OKABE_ITO["green"],
    "workspace": OKABE_ITO["grey"],
}
"""One colour per :data:`actmem.CATEGORIES`, the same as the parts they
come from in :func:`stage_memory_figure`."""
CATEGORY_LABELS = {"weights": "weights", "gradients": "gradients", "optimizer": "optimizer",
                   "activations": "activations", "logits_loss": "logits and loss",
                   "transient": "transient (inside an operation)",
                   "workspace": "workspaces and buffers"}
"""Legend labels of the categories (English keys of the catalog)."""


def timeline_stages(result: TrainingMemory, stages=None) -> list[int]:
    """The stages to draw: ``stages`` (an iterable of stage indices), or
    every stage; ``"ends"`` for the first, the last and the most loaded.

    Raises:
        ValueError: a stage that is not in ``result``, or none at all.
    """
    p = len(result.stages)
    if stages is None:
        return list(range(p))
    if isinstance(stages, str) and stages == "ends":
        return sorted({0, result.most_loaded.stage, p - 1})
    chosen = sorted(set(stages))
    if not chosen or any(isinstance(i, bool) or i not in range(p) for i in chosen):
        raise ValueError(f"stages must be stage numbers from 0 to {p - 1}, or 'ends', "
                         f"got {stages!r}")
    return chosen


def _measured_curves(measured, events: int, stored: bool) -> list[tuple[str, list]]:
    """(legend label, bytes per event) for each measured curve.

    Raises:
        TypeError: ``measured`` is not a sequence of ints or a dict of them.
        ValueError: a curve whose length is not the number of events.
    """
    if measured is None:
        return []
    base = tr("measured (stored)") if stored else tr("measured")
    curves = ([(f"{base}: {name}", values) for name, values in measured.items()]
              if isinstance(measured, Mapping) else [(base, measured)])
    for label, values in curves:
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or \
                not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise TypeError("measured must be a sequence of bytes (ints) per event, or a "
                            f"dict name -> such a sequence; got {values!r:.80}")
        if len(values) != events:
            raise ValueError(f"measured curve {label!r} has {len(values)} values; the "
                             f"stage's timeline has {events} events")
    return curves


def timeline_figure(result: TrainingMemory, title: str = "", measured=None,
                    measured_stage: int = 0, stored: bool = True, stages=None,
                    fig: Figure | None = None) -> Figure:
    """What is alive when: each stage's bytes at every event of one step.

    One panel per pipeline stage (shared y axis, GiB = 2^30 bytes), events
    in order along x (:attr:`actmem.StageMemory.timeline`), bytes stacked by
    category (:data:`actmem.CATEGORIES`); the GPU's capacity as a dashed
    line when ``result.gpu_memory`` is set (and, with a reserve, a dotted
    line at capacity less the reserve: the peak must stay under it); each
    panel's peak event marked and labelled; each backward pass shaded, each
    loss marked along the panel's top, and each tall transient named by
    what it is (:mod:`actmem.views.timeline_marks`).

    Args:
        result: from :func:`actmem.training_memory`.
        title: drawn above the panels (translated when the catalog has it).
        measured: bytes per event measured on stage ``measured_stage``: a
            sequence of ints, or a dict name -> such a sequence (one line each),
            drawn as a line labelled "measured (stored)" (``stored=False``:
            "measured", for a measurement made now).
        stages: which stages to draw (:func:`timeline_stages`).
        fig: a Figure this function returned, to redraw in place: with as
            many panels and no measured curves (then or now), its artists
            (one PolyCollection of stacked areas per panel and one of
            backward shading, the lines, the peak's label, the legend when
            its entries are the same) are updated, the transients' labels made
            anew,
            updated rather than drawn anew (:mod:`actmem.views.redraw`).

    Raises:
        TypeError: ``result`` is not a TrainingMemory, or ``measured`` is
            not bytes. ValueError: a bad ``stages`` or ``measured_stage``,
            or a measured curve of the wrong length.
    """
    if not isinstance(result, TrainingMemory):
        raise TypeError("result must be a TrainingMemory from actmem.training_memory, "
                        f"got {type(result).__name__}")
    drawn = timeline_stages(result, stages)
    if measured is not None and measured_stage not in drawn:
        raise ValueError(f"measured_stage={measured_stage!r} is not a drawn stage; "
                         f"drawn: {drawn}")
    events = {i: result.stages[i].timeline.events for i in drawn}
    curves = _measured_curves(measured, len(events.get(measured_stage, ())), stored)
    shown = [c for c in CATEGORIES if any(e.by_category[c] for i in drawn for e in events[i])]
    figsize = (max(8, 2.2 + 3.4 * len(drawn)), 4.8)
    state = getattr(fig, _TIMELINE, None) if fig is not None else None
    if state is None or state["key"] != (figsize, len(drawn)) or curves or state["curves"]:
        fig, axes = figure_axes(fig, figsize, 1, len(drawn), sharey=True, squeeze=False)
        state = {"key": (figsize, len(drawn)), "curves": bool(curves), "legend": None,
                 "panels": [_new_panel(ax) for ax in axes[0]]}
        setattr(fig, _TIMELINE, state)
    axes = [panel["ax"] for panel in state["panels"]]
    axes[0].set_ylabel(tr("memory per GPU (GiB)"))
    for ax in axes:
        ax.set_xlabel(tr("events of one step, in order"))
    top = 0.0
    for panel, i in zip(state["panels"], drawn):
        top = max(top, _timeline_panel(panel, result, result.stages[i], shown))
        if i == measured_stage:
            ax = panel["ax"]
            for n, (label, values) in enumerate(curves):
                gib = [to_gib(v) for v in values]
                top = max(top, *gib)
                ax.plot(range(len(values)), gib, color="black", drawstyle="steps-mid",
                        linewidth=1.2, linestyle=("-", ":", "-.")[n % 3], label=label)
    if result.gpu_memory is not None:
        top = max(top, to_gib(result.gpu_memory))
    # up to a tick above 5% headroom: the same limit (and the same drawn
    # axis, kept by png) for every plan under the same GPU that fits it
    axes[0].set_ylim(0, _LIMIT.tick_values(0, 1.05 * top)[-1] if top > 0 else 1)
    height = axes[0].get_ylim()[1]
    named = [label for panel, i in zip(state["panels"], drawn)
             for label in name_transients(panel["marks"], panel["ax"], result.stages[i], height)]
    handles, labels = _legend_entries(axes, shown)
    if state["legend"] != labels:
        if axes[-1].get_legend() is not None:
            axes[-1].get_legend().remove()
        axes[-1].legend(handles, labels, fontsize=7, loc="upper left",
                        bbox_to_anchor=(1.01, 1))
        state["legend"] = labels
    heading = tr(title) if title else tr("What is alive when: one training step")
    if fig._suptitle is None:
        fig.suptitle(heading, fontsize=10)
    else:  # where the layout put it
        fig._suptitle.set_text(heading)
    # what changes from plan to plan; the rest (axes, ticks, legend, title)
    # is kept by png while the key is the same (actmem.views.redraw)
    changing = [] if curves else [
        artist for panel in state["panels"] for artist in (
            panel["areas"], panel["capacity"], panel["reserve"], panel["marker"],
            panel["note"], panel["ax"].title, panel["marks"]["spans"], panel["marks"]["losses"],
            *panel["ax"].spines.values())] + named
    changing_only(fig, (tuple(axes[0].get_ylim()), tuple(labels), heading,
                        axes[0].get_ylabel(), axes[0].get_xlabel()), changing)
    return fig


_LIMIT = MaxNLocator(nbins=8, steps=[1, 2, 2.5, 5, 10])


_TIMELINE = "_actmem_timeline"
"""Attribute of a Figure :func:`timeline_figure` drew: its panels' artists,
to update them in place on a redraw."""


def _new_panel(ax) -> dict:
    """The artists of one stage's panel, empty: the stacked areas (one
    PolyCollection, a polygon per category), the capacity and the reserve
    lines, the peak's marker and label."""
    areas = PolyCollection([], linewidths=0)
    ax.add_collection(areas, autolim=False)
    capacity = ax.axhline(0, color="black", linestyle="--")
    reserve = ax.axhline(0, color="black", linestyle=":")
    marker, = ax.plot([], [], marker="v", color="black", linestyle="none")
    note = ax.annotate("", (0, 0), xytext=(6, 6), textcoords="offset points", va="bottom",
                       fontsize=7, bbox=dict(boxstyle="round,pad=0.2", facecolor="white",
                                             alpha=0.85, linewidth=0))
    ax.set_xticks([])  # the order is what matters, not the events' numbers
    return {"ax": ax, "areas": areas, "capacity": capacity, "reserve": reserve,
            "marker": marker, "note": note, "marks": new_marks(ax)}


def _steps(bottom, top) -> np.ndarray:
    """The outline of the area between ``bottom`` and ``top`` drawn as
    steps centred on each event (``fill_between(..., step="mid")``)."""
    x = np.repeat(np.arange(len(top) + 1) - 0.5, 2)[1:-1]
    upper = np.column_stack([x, np.repeat(top, 2)])
    lower = np.column_stack([x, np.repeat(bottom, 2)])[::-1]
    return np.concatenate([upper, lower])


def _timeline_panel(panel: dict, result: TrainingMemory, stage, shown: list[str]) -> float:
    """Update one stage's panel: the stacked categories, the capacity, the
    peak. Returns the highest stacked value, GiB."""
    ax, events = panel["ax"], stage.timeline.events
    bottom = np.zeros(len(events))
    outlines = []
    for category in shown:
        top = bottom + np.array([e.by_category[category] for e in events], dtype=float) / 2**30
        outlines.append(_steps(bottom, top))
        bottom = top
    panel["areas"].set_verts(outlines)
    panel["areas"].set_facecolor([CATEGORY_COLOURS[c] for c in shown])
    capacity, reserve = panel["capacity"], panel["reserve"]
    capacity.set_visible(result.gpu_memory is not None)
    reserve.set_visible(result.gpu_memory is not None and bool(stage.reserve))
    if result.gpu_memory is not None:
        label = tr("GPU: {size} (fits)") if result.fits else tr("GPU: {size} (does not fit)")
        capacity.set_ydata([to_gib(result.gpu_memory)] * 2)
        capacity.set_label(label.format(size=format_bytes(result.gpu_memory, "GiB")))
        reserve.set_ydata([to_gib(result.gpu_memory - stage.reserve)] * 2)
    if not capacity.get_visible():
        capacity.set_label("_capacity")
    reserve.set_label(tr("capacity less the reserve") if reserve.get_visible() else "_reserve")
    _mark_peak(panel, stage, len(events))
    draw_marks(panel["marks"], events)
    ax.set_title(tr("stage {i}: peak {peak}").format(
        i=stage.stage, peak=format_bytes(stage.peak, "GiB")), fontsize=9)
    ax.set_xlim(-0.5, len(events) - 0.5)
    return float(bottom.max()) if len(events) else 0.0


def _mark_peak(panel: dict, stage, count: int) -> None:
    """A marker on the peak event and its label beside it."""
    peak = stage.timeline.peak
    index = stage.timeline.events.index(peak)
    y = to_gib(peak.total)
    panel["marker"].set_data([index], [y])
    note, left = panel["note"], index < count / 2
    note.set_text("\n".join(textwrap.wrap(event_label(peak.label, translator()), 26)))
    note.xy = (index, y)
    note.xyann = (6 if left else -6, 6)
    note.set_horizontalalignment("left" if left else "right")


def _legend_entries(axes, shown: list[str]) -> tuple[list, list]:
    """Legend handles and labels: a patch per category shown, then each
    visible line of the panels (capacity, reserve, measured), each label
    once, in drawing order."""
    entries = {tr(CATEGORY_LABELS[c]): Patch(color=CATEGORY_COLOURS[c], linewidth=0)
               for c in shown}
    entries.update(legend_entries())
    for ax in axes:
        for line in ax.lines:
            if line.get_visible() and not line.get_label().startswith("_"):
                entries.setdefault(line.get_label(), line)
    return list(entries.values()), list(entries.keys())

"""Figures for pipeline schedules (notebook 05): the chart, memory over time,
and the first stage against p.

:func:`schedule_figure` draws a :class:`~actmem.schedules.PipelineSchedule`
from its operations and simulated times: a Gantt chart (stages as rows,
time as columns, forward, backward and, for the zero-bubble schedules,
input-gradient (I) and weight-gradient (W) boxes labelled by micro-batch) above
the number of forward passes each stage holds over time (a pass counted
until its B or W), which is what its activation memory follows (Korthikanti
et al. 2022, sec. 4.2.3). Colours are Okabe-Ito (colour-blind safe); chunk 1
and later of a multi-chunk schedule are hatched. Nothing here computes a number the schedule does
not already hold.
"""

from __future__ import annotations

import functools

from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.markers import MarkerStyle
from matplotlib.patches import Patch
from matplotlib.transforms import IdentityTransform

from ..language import tr
from .figures import OKABE_ITO
from .redraw import changing_only, figure_axes
from ..layer.memory import ActivationMemory
from ..run.schedules import (BACKWARD, FORWARD, INPUT_GRAD, WEIGHT_GRAD, PipelineSchedule,
                             simulate_schedule)
from ..run.training import model_activation_memory
from ..units import format_bytes, format_value, to_mib
from ..validate import common_divisors

PASS_COLOURS = {FORWARD: OKABE_ITO["sky"], BACKWARD: OKABE_ITO["orange"],
                INPUT_GRAD: OKABE_ITO["yellow"], WEIGHT_GRAD: OKABE_ITO["green"]}
"""Forward, backward, input-gradient and weight-gradient boxes."""
STAGE_COLOURS = (OKABE_ITO["blue"], OKABE_ITO["vermillion"], OKABE_ITO["green"],
                 OKABE_ITO["purple"], OKABE_ITO["yellow"], OKABE_ITO["grey"],
                 OKABE_ITO["sky"], OKABE_ITO["orange"])
"""Lines of the in-flight plot, stage 0 first (repeated after 8 stages)."""
LABEL_LIMIT = 256
"""Operations (all stages) up to which boxes carry their micro-batch number."""
TITLES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "interleaved 1F1B",
          "interleaved-zb": "interleaved zero bubble", "zbv": "zero bubble V",
          "dualpipev": "DualPipe V", "looped-bfs": "looped breadth-first"}


@functools.lru_cache(maxsize=None)
def _number(text: str) -> tuple:
    """A micro-batch number as a marker (what ``scatter(marker="$7$")``
    draws): its path and its area in points^2, digits about 6 pt high (a
    marker spans its larger side). Built once per number."""
    marker = MarkerStyle(f"${text}$")
    return marker.get_path().transformed(marker.get_transform()), \
        (6 * max(1.0, 0.6 * len(text))) ** 2


def _chart(ax, schedule: PipelineSchedule) -> None:
    """Gantt chart: one row per stage, stage 0 on top; one ``broken_barh``
    per stage, pass and chunk kind, so large schedules draw quickly."""
    labelled = schedule.p * len(schedule.ops[0]) <= LABEL_LIMIT
    labels: dict[int, list] = {}  # micro-batch -> box centres
    for i, stage in enumerate(schedule.timeline):
        groups: dict[tuple[str, bool], list] = {}
        for timed in stage:
            width = float(timed.end - timed.start)
            groups.setdefault((timed.op.kind, timed.op.chunk > 0), []).append(
                (float(timed.start), width))
            labels.setdefault(timed.op.microbatch, []).append(
                (float(timed.start) + width / 2, i))
        for (kind, later_chunk), spans in groups.items():
            ax.broken_barh(spans, (i - 0.4, 0.8), facecolors=PASS_COLOURS[kind],
                           edgecolor="black", linewidth=0.4,
                           hatch="//" if later_chunk else None)
    if labelled:  # one marker per micro-batch number: far faster than a text per box
        for microbatch, centres in labels.items():
            path, area = _number(str(microbatch))
            numbers = PathCollection([path], [area], offsets=centres, linewidths=0, zorder=3,
                                     offset_transform=ax.transData, facecolors="black",
                                     edgecolors="face")
            numbers.set_transform(IdentityTransform())  # as scatter: the path is in points
            ax.add_collection(numbers, autolim=False)  # the limits are set below
    ax.set_yticks(range(schedule.p), [tr("stage {i}").format(i=i) for i in range(schedule.p)])
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
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    title = tr(TITLES[schedule.schedule])
    chunks = tr(", v={v} chunks per GPU").format(v=schedule.v) if schedule.v > 1 else ""
    ax.set_title(tr("{title}: p={p} stages, m={m} micro-batches{chunks}\n"
                    "bubble {bubble:.1%} of the ideal time; box numbers: micro-batch").format(
                        title=title, p=schedule.p, m=schedule.m, chunks=chunks,
                        bubble=float(schedule.bubble_fraction())), fontsize=9)


def _in_flight(ax, schedule: PipelineSchedule) -> None:
    """Forward passes held by each stage after each of its operations."""
    for i, stage in enumerate(schedule.timeline):
        times = [0.0] + [float(t.end) for t in stage]
        counts = [0] + schedule.in_flight(i)
        ax.step(times, counts, where="post", color=STAGE_COLOURS[i % len(STAGE_COLOURS)],
                linewidth=1.5,
                label=tr("stage {i}: peak {peak}").format(i=i, peak=schedule.peak_in_flight(i)))
    ax.set_xlim(0, float(schedule.makespan()))
    ax.set_ylim(0, None)
    ax.set_ylabel(tr("chunk passes held") if schedule.v > 1 else tr("micro-batches held"),
                  fontsize=8)
    ax.set_xlabel(tr("time (units: one forward pass of one micro-batch through one stage)"))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1),
              ncol=1 + (schedule.p - 1) // 8)


def schedule_figure(schedule: PipelineSchedule, fig: Figure | None = None) -> Figure:
    """The schedule chart above the in-flight count per stage over time.

    Args:
        schedule: from :func:`actmem.simulate_schedule`.
        fig: a Figure this function returned, to redraw in place
            (:mod:`actmem.views.redraw`).

    Returns:
        A matplotlib Figure (not registered with pyplot).

    Raises:
        TypeError: ``schedule`` is not a :class:`PipelineSchedule`.
    """
    if not isinstance(schedule, PipelineSchedule):
        raise TypeError("schedule must be a PipelineSchedule from "
                        f"actmem.simulate_schedule, got {type(schedule).__name__}")
    fig, (chart, held) = figure_axes(fig, (10, 2.2 + 0.35 * schedule.p), 2, 1, sharex=True,
                                     height_ratios=[max(schedule.p, 2), 2])
    _chart(chart, schedule)
    _in_flight(held, schedule)
    # what changes with the schedule, m and the order while p, v and the
    # kinds of pass stay; the rest (the chart's legend and stage names, the
    # axis labels) is kept by png
    changing_only(fig, (tuple(text.get_text() for text in chart.get_legend().get_texts()),
                        held.get_ylabel(), held.get_xlabel()),
                  [*chart.collections, *held.lines, chart.title, chart.xaxis, held.xaxis,
                   held.yaxis, held.get_legend(), *chart.spines.values(),
                   *held.spines.values()])
    return fig


def first_stage_figure(per_layer: ActivationMemory, L: int, m: int) -> Figure:
    """The first stage's activations against p (bars, MiB): 1F1B and
    interleaved 1F1B (v=2) from the simulation, with ``L*M`` (one GPU, all
    layers) and the naive ``L*M/p`` as lines. Under 1F1B with ``m >= p``
    every bar is ``L*M``: p cancels (sec. 4.2.3). p runs over the
    divisors of ``L`` up to ``m``; interleaved bars only where Megatron-LM
    accepts them (``p`` divides ``m``, ``2p`` divides ``L``).

    Raises:
        TypeError, ValueError: ``L`` or ``m`` not a positive int.
    """
    ps = [p for p in common_divisors(L) if p <= m]
    whole = model_activation_memory(per_layer, L)
    fig = Figure(figsize=(8, 4.5), layout="constrained")
    ax = fig.subplots()
    x = range(len(ps))
    one = [simulate_schedule("1f1b", p, m).stage_activation_memory(0, per_layer, L) for p in ps]
    ax.bar([i - 0.2 for i in x], [to_mib(n) for n in one], width=0.4,
           color=PASS_COLOURS[FORWARD], edgecolor="black", label=f"1F1B, m={m}")
    inter = [(i, simulate_schedule("interleaved", p, m, 2).stage_activation_memory(
        0, per_layer, L)) for i, p in zip(x, ps) if p > 1 and m % p == 0 and L % (2 * p) == 0]
    ax.bar([i + 0.2 for i, _ in inter], [to_mib(n) for _, n in inter], width=0.4,
           color=PASS_COLOURS[BACKWARD], edgecolor="black", hatch="//",
           label=tr("interleaved 1F1B, v=2, m={m}").format(m=m))
    for i, n in [*zip([i - 0.2 for i in x], one), *((i + 0.2, n) for i, n in inter)]:
        ax.text(i, to_mib(n), format_value(n), ha="center", va="bottom", fontsize=7)
    ax.axhline(to_mib(whole), color="black", linewidth=1,
               label=tr("L*M = {size}: all L layers, one micro-batch").format(
                   size=format_bytes(whole)))
    ax.plot(list(x), [to_mib(whole) / p for p in ps], color=OKABE_ITO["vermillion"],
            linestyle="--", marker="o", label=tr("L*M/p: naive, not the peak"))
    ax.set_xticks(list(x), [str(p) for p in ps])
    ax.set_xlabel(tr("pipeline-parallel size p (stages)"))
    ax.set_ylabel(tr("first stage's activations (MiB)"))
    ax.set_title(tr("p cancels: the first stage holds L*M whatever p (L={L}, M={size})")
                 .format(L=L, size=format_bytes(per_layer.total)))
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    return fig

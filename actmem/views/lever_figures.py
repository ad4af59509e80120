"""Figures for notebook 12, "Today's jobs": which part of a GPU's peak each
lever moves.

:func:`lever_figure` draws one stacked bar per lever setting: the most
loaded GPU's bytes at its peak moment (the peak event of
:attr:`actmem.StageMemory.timeline`), split by what they are for
(:data:`actmem.run.moments.timeline.CATEGORIES`: weights, gradients, optimizer
states, activations, the logits and the loss, transient tensors inside an
operation, workspaces). The bands of a bar add up to its peak, byte for
byte, so that comparing two bars shows which part a lever moved and by how
much. A run's reserve (:attr:`actmem.StageMemory.reserve`, what lives
outside PyTorch's allocator), when it sets one, is stacked on top, hatched:
the bar's top is then what must fit. The GPU's capacity is a dashed line.

Bars are to scale in GiB (2^30 bytes); the colours and legend labels are
notebook 09's timeline's (:data:`actmem.views.fit_figures.CATEGORY_COLOURS`,
Okabe-Ito), every label goes through :func:`actmem.language.tr`, and every
number comes from :func:`actmem.training_memory`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from matplotlib.figure import Figure

from ..language import tr
from ..run.peak import TrainingMemory
from ..run.moments.timeline import CATEGORIES
from ..units import format_bytes, format_value, to_gib
from .fit_figures import CATEGORY_COLOURS, CATEGORY_LABELS, PART_COLOURS
from .printed import width

FONT = 9
"""The smallest text of the figure, points (the course's readability rule)."""
TICK_WIDTH = 12
"""Display columns (:func:`actmem.views.printed.width`: two per Han
character) of a bar's label per line before it wraps."""


def peak_parts(result: TrainingMemory) -> dict[str, int]:
    """The most loaded GPU's bytes at its peak moment, by category
    (:data:`actmem.run.moments.timeline.CATEGORIES` order), bytes: they add up to
    ``result.most_loaded.peak``.

    Raises:
        TypeError: ``result`` is not a :class:`actmem.TrainingMemory`.
    """
    if not isinstance(result, TrainingMemory):
        raise TypeError("result must be a TrainingMemory from actmem.training_memory, "
                        f"got {type(result).__name__}")
    return result.most_loaded.timeline.peak.by_category


def wrap(label: str, columns: int = TICK_WIDTH) -> str:
    r"""``label`` in lines of at most ``columns`` display columns, broken after
    a space or a Chinese enumeration comma or comma (a longer word keeps its
    own line).

    >>> wrap("core_attn, mlp, layernorm")
    'core_attn,\nmlp,\nlayernorm'
    >>> wrap("核心注意力、MLP、LayerNorm")
    '核心注意力、\nMLP、\nLayerNorm'
    """
    lines = [""]
    for word in re.split(r"(?<=[ 、，])", label):
        if lines[-1] and width(lines[-1] + word.rstrip()) > columns:
            lines.append("")
        lines[-1] += word
    return "\n".join(line.rstrip() for line in lines)


def _checked(runs: object, title: object) -> int | None:
    """The capacity the runs share (bytes, or None when none names a GPU).

    Raises:
        TypeError: ``runs`` not a mapping of str to TrainingMemory, a
            ``title`` that is not a str.
        ValueError: no runs, an empty label, runs on GPUs of different
            capacities.
    """
    if not isinstance(runs, Mapping):
        raise TypeError("runs must be a dict label -> TrainingMemory (actmem.training_memory), "
                        f"got {type(runs).__name__}")
    if not runs:
        raise ValueError("runs must hold at least one lever setting, got an empty dict")
    for label, result in runs.items():
        if not isinstance(label, str) or not label.strip():
            raise (TypeError if not isinstance(label, str) else ValueError)(
                f"runs' labels must be non-empty strings, got {label!r}")
        if not isinstance(result, TrainingMemory):
            raise TypeError(f"runs[{label!r}] must be a TrainingMemory from "
                            f"actmem.training_memory, got {type(result).__name__}")
    if not isinstance(title, str):
        raise TypeError(f"title must be a str, got {type(title).__name__}")
    capacities = {result.gpu_memory for result in runs.values()}
    if len(capacities) > 1:
        raise ValueError("runs must share one gpu_memory (one capacity line), got "
                         f"{sorted(capacities, key=lambda c: (c is None, c or 0))}")
    return capacities.pop()


def lever_figure(runs: Mapping[str, TrainingMemory], title: str = "") -> Figure:
    """One stacked bar per lever setting: the most loaded GPU's bytes at its
    peak by category (:func:`peak_parts`), in GiB, with the peak written
    above each bar (and the reserve stacked on top, hatched, for a run that
    sets one); the GPU's capacity as a dashed line when the runs name a GPU.

    Args:
        runs: label -> :func:`actmem.training_memory` result, in the order
            to draw (labels translated when the catalog has them).
        title: drawn above the bars (translated when the catalog has it);
            empty: "Which part each lever moves".

    Raises:
        TypeError, ValueError: as :func:`_checked` says.
    """
    capacity = _checked(runs, title)
    parts = [peak_parts(result) for result in runs.values()]
    reserves = [result.most_loaded.reserve for result in runs.values()]
    fig = Figure(figsize=(10, 5.5), layout="constrained")
    ax = fig.subplots()
    x = list(range(len(parts)))
    bottom = [0.0] * len(parts)
    for category in CATEGORIES:
        heights = [to_gib(p[category]) for p in parts]
        if any(heights):
            ax.bar(x, heights, bottom=bottom, color=CATEGORY_COLOURS[category],
                   edgecolor="black", linewidth=0.4, label=tr(CATEGORY_LABELS[category]))
            bottom = [b + h for b, h in zip(bottom, heights)]
    tops = [sum(p.values()) for p in parts]
    if any(reserves):
        ax.bar(x, [to_gib(r) for r in reserves], bottom=bottom, color="white",
               edgecolor=PART_COLOURS["reserve"], hatch="//", linewidth=0.8, label=tr("reserve"))
        tops = [t + r for t, r in zip(tops, reserves)]
    for i, top in zip(x, tops):
        ax.text(i, to_gib(top), format_value(top, "GiB"), ha="center", va="bottom",
                fontsize=FONT)
    if capacity is not None:
        ax.axhline(to_gib(capacity), color="black", linestyle="--", label=tr(
            "GPU capacity: {size}").format(size=format_bytes(capacity, "GiB")))
    ax.set_xticks(x, [wrap(tr(label)) for label in runs], fontsize=FONT)
    ax.tick_params(axis="y", labelsize=FONT)
    ax.set_ylabel(tr("most loaded GPU at its peak (GiB)"), fontsize=FONT + 1)
    ax.set_title(tr(title) if title else tr("Which part each lever moves"), fontsize=FONT + 2)
    fig.legend(*ax.get_legend_handles_labels(), fontsize=FONT, loc="outside lower center",
               ncols=4)
    return fig


def imbalance_figure(curves: Mapping[str, Mapping[float, TrainingMemory]],
                     title: str = "") -> Figure:
    """What must fit (the most loaded GPU's peak plus its reserve) against
    a routing imbalance, one line per job: x is ``moe_hot_expert``, the
    busiest expert's copies over the mean (1: balanced routing), and the
    GPU's capacity is a dashed line, so the imbalance a job survives reads
    off where its line crosses it.

    Args:
        curves: label -> {moe_hot_expert -> :func:`actmem.training_memory`
            result}, in the order to draw (labels translated when the
            catalog has them).
        title: drawn above (translated when the catalog has it); empty:
            "What an uneven router costs".

    Raises:
        TypeError, ValueError: ``curves`` not a non-empty mapping of labels
            to non-empty mappings of numbers to results; otherwise as
            :func:`_checked` says of all the results together.
    """
    if not isinstance(curves, Mapping) or not curves or not all(
            isinstance(points, Mapping) and points for points in curves.values()):
        raise TypeError("curves must be a non-empty dict label -> {moe_hot_expert -> "
                        f"TrainingMemory}}, got {curves!r:.80}")
    capacity = _checked({f"{label} {f!r}": result for label, points in curves.items()
                         for f, result in points.items()}, title)
    fig = Figure(figsize=(10, 5.5), layout="constrained")
    ax = fig.subplots()
    for label, points in curves.items():
        factors = sorted(points)
        must_fit = [points[f].most_loaded.peak + points[f].most_loaded.reserve for f in factors]
        ax.plot(factors, [to_gib(n) for n in must_fit], marker="o", label=tr(label))
    if capacity is not None:
        ax.axhline(to_gib(capacity), color="black", linestyle="--", label=tr(
            "GPU capacity: {size}").format(size=format_bytes(capacity, "GiB")))
    ax.tick_params(labelsize=FONT)
    ax.set_xlabel(tr("busiest expert's copies over the mean (moe_hot_expert)"),
                  fontsize=FONT + 1)
    ax.set_ylabel(tr("peak + reserve of the most loaded GPU (GiB)"), fontsize=FONT + 1)
    ax.set_title(tr(title) if title else tr("What an uneven router costs"), fontsize=FONT + 2)
    fig.legend(*ax.get_legend_handles_labels(), fontsize=FONT, loc="outside lower center",
               ncols=3)
    return fig

"""Figures for notebook 08, "Will it fit?": stages against the GPU, and
full recomputation's peak against the group size k.

Bars are to scale, in GiB (2^30 bytes); colours are Okabe-Ito, one per part
of :data:`actmem.peak.PARTS`. Every number comes from
:func:`actmem.training_memory`.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from ..language import tr
from .figures import OKABE_ITO
from .redraw import figure_axes
from ..run.model import ModelConfig
from ..run.peak import PARTS, TrainingMemory, training_memory
from ..run.training import chunk_layers
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
    """Stacked bars, one per pipeline stage, of every part in GiB, with the
    GPU's capacity as a line when ``result.gpu_memory`` is set. ``fig``: a
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
    for i, stage in zip(x, result.stages):
        ax.text(i, bottom[i], format_value(stage.total, "GiB"), ha="center",
                va="bottom", fontsize=8)
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

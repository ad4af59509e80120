"""Notebook 08's planner: pick a model, a parallel layout, the framework's
choices and a GPU; see every stage's parts, its peak (the most alive at one
moment of the step, and the event that sets it), the timeline of the first,
the last and the most loaded stage, and a fits / does-not-fit verdict.

The menus offer only what :func:`actmem.training_memory` accepts: t divides
the heads, hidden size, key/value heads and MLP width (and s under sequence
parallelism); p divides L; schedule, v and m as in notebook 05
(:func:`actmem.schedule_views.couple`); full recomputation's group size k
divides the layers of a model chunk; the GPUs are :data:`actmem.GPUS`, with
the capacity their driver reports. Like the other view modules it imports
ipywidgets and matplotlib; ``import actmem`` does not import it.
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from ..language import english, tr
from ..layer.config import RECOMPUTE, valid_tensor_parallel_sizes
from .fit_figures import event_label, timeline_figure
from ..run.framework import GRADIENT_BUFFERS, LOSSES
from ..run.gpus import GPUS as GPU_PRESETS
from ..run.peak import PARTS, TrainingMemory, training_memory
from ..run.presets import PRESETS, preset
from .schedule_views import chunk_choices, microbatch_choices, restrict_schedule, \
    schedule_options, stage_choices
from .train_cli import verdict
from ..run.training import chunk_layers
from ..units import format_value
from ..validate import common_divisors, flag
from .readouts import HTML, TEXT
from .widgets import _dropdown, _Explorer

D_CHOICES = (1, 2, 4, 8, 16, 32, 64)
"""Data-parallel sizes offered."""
P_MAX = 64
GPUS = tuple(GPU_PRESETS)
"""GPUs offered: the names of :data:`actmem.GPUS` (capacity as the driver
reports it: an "A100 80GB" has 81920 MiB = 80 GiB)."""
LOSS_LABELS = {"vocab_parallel": "Megatron-LM cross-entropy (fp32 copy)",
               "torch": "PyTorch F.cross_entropy",
               "fused": "fused loss (no logits kept)"}
"""Menu labels of :data:`actmem.LOSSES`."""
GRADIENT_LABELS = {"persistent": "gradient buffer from the start",
                   "backward": "gradients made in backward"}
"""Menu labels of :data:`actmem.GRADIENT_BUFFERS`."""
STATES = {
    "Megatron-LM (18 B/param)": ("megatron", 0, False),
    "Megatron-LM distributed optimizer": ("megatron", 0, True),
    "ZeRO stage 0 (16 B/param)": ("zero", 0, False),
    "ZeRO stage 1": ("zero", 1, False),
    "ZeRO stage 2": ("zero", 2, False),
    "ZeRO stage 3": ("zero", 3, False),
}
"""Model-state options: label -> (accounting, zero_stage, distributed_optimizer)."""


def tensor_choices(model, sequence_parallel: bool) -> list[int]:
    """t values that divide a, h, kv_heads and f (and s with sequence
    parallelism)."""
    c = model.layer()
    return valid_tensor_parallel_sizes(c.h, c.a, c.s if sequence_parallel else None,
                                       kv_heads=c.g, ffn_hidden_size=c.f)


def recompute_options(layers: int) -> list[tuple[str, tuple[str, int]]]:
    """(label, (recompute, k)) pairs, labelled in the current language:
    none, selective, and full recomputation in groups of k layers for
    every k dividing ``layers``."""
    plain = [(tr(mode), (mode, 1)) for mode in RECOMPUTE if mode != "full"]
    return plain + [(tr("full, k={k}").format(k=k), ("full", k))
                    for k in common_divisors(layers)]


def run_arguments(values: dict) -> dict:
    """The planner's control values as :func:`actmem.training_memory`
    arguments (model excluded)."""
    recompute, k = values["recompute"]
    accounting, zero_stage, distributed = values["states"]
    return dict(t=values["t"], p=values["p"], d=values["d"], m=values["m"],
                schedule=values["schedule"], v=values["v"],
                sequence_parallel=values["sequence_parallel"], recompute=recompute,
                recompute_num_layers=k, accounting=accounting, zero_stage=zero_stage,
                distributed_optimizer=distributed, gpu_memory=values["gpu"],
                loss=values["loss"], gradient_buffer=values["gradient_buffer"])


def stages_html(result: TrainingMemory, tr=english) -> str:
    """Parts (rows) by stage (columns), GiB, their sum, each stage's peak
    and the event that sets it; words translated by ``tr``
    (:mod:`actmem.language`)."""
    def row(name, cells, bold=False):
        cells = "".join(f"<td><b>{c}</b></td>" if bold else f"<td>{c}</td>" for c in cells)
        return f"<tr><td>{'<b>' + name + '</b>' if bold else name}</td>{cells}</tr>"
    head = "".join(f"<th>{tr('stage {i}').format(i=s.stage)}</th>" for s in result.stages)
    rows = "".join(row(tr(part.replace("_", " ")),
                       [format_value(s.parts[part], "GiB") for s in result.stages])
                   for part in PARTS)
    rows += row(tr("sum of the parts"), [format_value(s.total, "GiB") for s in result.stages])
    rows += row(tr("peak (one moment)"), [format_value(s.peak, "GiB") for s in result.stages],
                bold=True)
    rows += row(tr("peak event"), [html.escape(event_label(s.timeline.peak.label, tr))
                                   for s in result.stages])
    return f"<table><tr><th>{tr('GiB per GPU')}</th>{head}</tr>{rows}</table>"


class FitPlanner(_Explorer):
    """Preset, t, p, d, m, schedule, v, recomputation (and k), FlashAttention,
    sequence parallelism, model-state sharding, the loss, the gradients'
    lifetime and the GPU -> every stage's memory, the verdict, and the
    timeline figure of the first, last and most loaded stages
    (:func:`actmem.fit_figures.timeline_figure`).

    ``flash_attention=None`` (the default) takes the preset's choice, and
    choosing another model takes that model's (the LLaMA presets use it).

    Readouts: ``verdict`` (Label: the most loaded stage's peak and its
    event, the margin, fits or not; :func:`actmem.train_cli.verdict`),
    ``stages`` (HTML, :func:`stages_html`).
    """

    def __init__(self, model="llama2-7b", t=2, p=2, d=2, m=8, schedule="1f1b", v=1,
                 recompute=("none", 1), flash_attention=None, sequence_parallel=False,
                 states="Megatron-LM (18 B/param)", loss="vocab_parallel",
                 gradient_buffer="persistent", gpu="A100 80GB"):
        shape = preset(model)
        if flash_attention is None:
            flash_attention = shape.flash_attention
        flag("flash_attention", flash_attention)
        flag("sequence_parallel", sequence_parallel)
        c = {"model": _dropdown("model", list(PRESETS), model),
             "t": _dropdown("t", tensor_choices(shape, sequence_parallel), t,
                            "t divides a, h, kv_heads and f"),
             "p": _dropdown("p", stage_choices(shape.L, P_MAX), p, "p divides L"),
             "d": _dropdown("d", D_CHOICES, d)}
        chunks = chunk_choices(shape.L, p)
        c["schedule"] = _dropdown("schedule", schedule_options(chunks), schedule)
        c["v"] = _dropdown("v", [1, *chunks], v, "1, or p*v divides L")
        c["m"] = _dropdown("m", microbatch_choices(schedule, p, v), m)
        c["recompute"] = _dropdown("recompute", recompute_options(
            chunk_layers(shape.L, p, v)), tuple(recompute), "k divides a chunk's layers")
        c["flash_attention"] = widgets.Checkbox(value=flash_attention,
                                                description=tr("FlashAttention"))
        c["sequence_parallel"] = widgets.Checkbox(value=sequence_parallel,
                                                  description=tr("sequence parallel"))
        c["states"] = _dropdown("states", [(tr(k), k) for k in STATES], states)
        c["loss"] = _dropdown("loss", [(tr(LOSS_LABELS[k]), k) for k in LOSSES], loss)
        c["gradient_buffer"] = _dropdown(
            "gradient_buffer", [(tr(GRADIENT_LABELS[k]), k) for k in GRADIENT_BUFFERS],
            gradient_buffer)
        # its name is wider than the usual description: give it the room it needs
        c["gradient_buffer"].style.description_width = "initial"
        c["gpu"] = _dropdown("gpu", GPUS, gpu, "a GPU of actmem.GPUS")
        readouts = {"verdict": TEXT, "stages": HTML}
        rows = [widgets.HBox([c[k] for k in row]) for row in (
            ("model", "t", "p", "d"), ("schedule", "v", "m", "recompute"),
            ("flash_attention", "sequence_parallel", "states"),
            ("loss", "gradient_buffer", "gpu"))]
        super().__init__(c, readouts, image=True, layout=rows)

    def model(self):
        """The chosen preset with the FlashAttention choice applied."""
        return PRESETS[self.controls["model"].value].with_(
            flash_attention=self.controls["flash_attention"].value)

    def restrict(self) -> None:
        if self.cause == "model":  # the model as it is trained
            chosen = PRESETS[self.controls["model"].value]
            self.controls["flash_attention"].value = chosen.flash_attention
        shape = self.model()
        self._set_options("t", tensor_choices(shape, self.controls["sequence_parallel"].value))
        p = self._set_options("p", stage_choices(shape.L, P_MAX))
        restrict_schedule(self, chunk_choices(shape.L, p), p)
        layers = chunk_layers(shape.L, p, self.controls["v"].value)
        self._set_options("recompute", recompute_options(layers))

    def result(self) -> TrainingMemory:
        """:func:`actmem.training_memory` for the current controls."""
        values = {**self.values(), "states": STATES[self.controls["states"].value]}
        return training_memory(self.model(), **run_arguments(values))

    def refresh(self) -> None:
        result = self.result()
        gpu = self.controls["gpu"].value
        self.say("verdict", lambda tr: verdict(result, tr, gpu))
        self.say("stages", lambda tr: stages_html(result, tr))
        self.show_figure(timeline_figure, result, tr("{model} on {gpu} GPUs").format(
            model=self.controls["model"].value, gpu=gpu), stages="ends")

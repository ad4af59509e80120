"""The cheat sheet of training memory, page 1: the activation formulas of
notebooks 01-07, the model states, the logits and the peak of notebook 09,
a fit checklist, and the common mistakes with what each one costs.

Nothing here is typed-in arithmetic: every number comes from the ledger,
the schedule simulation, the model-state count, the loss's bytes, the GPU
presets or the step's timeline, so the sheet changes when they do.
:func:`cheat_sheet_figure` lays it out on one landscape A4 page (``python -m
actmem cheatsheet FILE`` writes it as PDF or PNG); :func:`formulas_markdown`,
:func:`mistakes_markdown` and :func:`checklist_markdown` give the same rows
as Markdown tables for a notebook. Words are in the current language
(:mod:`actmem.language`) unless a translator ``tr`` is passed. The sheet's
second page, today's levers (cp, ep, FP8, LoRA, offloading, MLA,
recompute_modules), is :mod:`actmem.views.cheatsheet_levers`.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from matplotlib.figure import Figure

from ..language import translator
from ..layer.memory import activation_memory, table2
from ..run.moments.loss import loss_bytes
from ..run.job.gpus import GPUS
from ..run.job.parameters import parameter_count
from ..run.peak import training_memory
from ..run.schedule.pipeline_formulas import bubble_fraction_formula, interleaved_first_stage_memory
from ..run.job.presets import PRESETS
from ..run.schedule.schedules import simulate_schedule
from ..run.model_states.states import BYTES_PER_PARAMETER, model_states
from ..run.schedule.training import model_activation_memory
from ..units import format_bytes, parse_size

__all__ = ["WORKED", "GPT3", "Mistake", "formulas", "states_and_peak", "checklist",
           "mistakes", "formulas_markdown", "mistakes_markdown", "checklist_markdown",
           "cheat_sheet_figure"]

WORKED = dict(s=2048, b=1, h=4096, a=32)
"""The worked example's layer (notebook 04)."""
GPT3 = {**{k: getattr(PRESETS["gpt3-175b"], k) for k in ("s", "b", "h", "a")}, "t": 8}
"""GPT-3 175B's layer at t = 8 (the paper's Table 2, notebook 07)."""
LLAMA2, LLAMA3 = PRESETS["llama2-7b"], PRESETS["llama3-8b"]
"""LLaMA-2-7B (model states, the peak) and LLaMA-3-8B (a 128k vocabulary)."""
GPU = "A100 80GB"
"""The GPU of the label lesson and of the checklist's case (a preset of
:data:`actmem.GPUS`)."""
FIT = dict(t=2, p=2, d=2, m=8)
"""The checklist's case: LLaMA-2-7B on A100 80GB GPUs (notebook 09)."""
PIPELINE = dict(p=4, m=8)
"""The case of the mistake "the first stage is the most loaded": LLaMA-3-8B
with full recomputation, whose last stage holds the output layer and the
logits."""
GiB, MiB = 2**30, 2**20


def _size(n: int) -> str:
    """Bytes in the largest of GiB, MiB, KiB that leaves at least 1."""
    return format_bytes(n, "GiB" if n >= GiB else "MiB" if n >= MiB else "KiB")


def _tr(tr):
    return translator() if tr is None else tr


def _billions(model) -> str:
    return f"{parameter_count(model) / 1e9:.2f}"


def formulas(tr=None) -> list[tuple[str, str, str]]:
    """Activation rows ``(formula, when it holds, one worked number)``;
    words translated by ``tr`` (default: the current language)."""
    tr = _tr(tr)
    m8 = activation_memory(**WORKED, t=8)
    gpt3 = table2(**GPT3)
    flash = activation_memory(**WORKED, t=8, flash_attention=True)
    L, p, m, v = 32, 4, 8, 2
    gpipe = simulate_schedule("gpipe", p, m).stage_activation_memory(0, m8, L)
    worked, gpt = tr("worked example, t=8: {value}"), tr("GPT-3 175B, t=8: {value}")
    return [
        ("sbh(10 + 24/t + 5as/(ht))",
         tr("per layer, micro-batch, GPU; 16-bit, masks 1 B, map stored"),
         worked.format(value=format_bytes(m8.total))),
        ("10sbh", tr("the fixed term: does not shrink with t, a floor for tensor parallelism"),
         tr("worked example: {value} at every t").format(value=format_bytes(m8.fixed))),
        ("sbh/t (34 + 5as/h)", tr("+ sequence parallelism (t divides s)"),
         gpt.format(value=format_bytes(gpt3["tensor + sequence parallel"].total))),
        ("34sbh/t", tr("+ sequence parallelism + selective recomputation"),
         gpt.format(value=format_bytes(
             gpt3["tensor + sequence parallel + selective recompute"].total))),
        ("2sbh", tr("full recomputation: only the layer input is kept"),
         tr("GPT-3 175B: {value}").format(value=format_bytes(gpt3["full recompute"].total))),
        ("5as²b/t  ->  4bas/t", tr("FlashAttention: fp32 log-sum-exp instead of the map"),
         worked.format(value=f"{format_bytes(m8.attention_map)} -> "
                             f"{format_bytes(flash.attention_map, 'KiB')}")),
        ("L · M", tr("whole model; also the 1F1B first stage when m >= p (p cancels)"),
         tr("worked example, L={L}, t=8: {value}").format(
             L=L, value=format_bytes(model_activation_memory(m8, L), "GiB"))),
        ("m · (L/p) · M", tr("GPipe: every stage holds all m micro-batches"),
         tr("p={p}, m={m}: {value}").format(p=p, m=m, value=format_bytes(gpipe, "GiB"))),
        ("L · M · (1 + (p-1)/(pv))", tr("interleaved 1F1B first stage (m >= 2p)"),
         tr("p={p}, v={v}: {value}").format(
             p=p, v=v, value=format_bytes(interleaved_first_stage_memory(m8, L, p, v), "GiB"))),
        ("(p-1)/m,  (p-1)/(vm)", tr("bubble: GPipe and 1F1B; interleaved"),
         tr("p={p}, m={m}: {one}; v={v}: {interleaved}").format(
             p=p, m=m, v=v, one=f"{float(bubble_fraction_formula('1f1b', p, m)):.1%}",
             interleaved=f"{float(bubble_fraction_formula('interleaved', p, m, v)):.2%}")),
    ]


def _logits(model=LLAMA3) -> dict[str, int]:
    """What Megatron-LM's loss holds for ``model``'s micro-batch at t = 1."""
    tokens = model.s * model.b
    return loss_bytes("vocab_parallel", tokens * model.padded_vocab(1), tokens)


def _plain_pytorch_peak():
    """LLaMA-2-7B on one GPU with plain PyTorch's gradients (freed each step)."""
    return training_memory(LLAMA2, gradient_buffer="backward").stages[0]


def states_and_peak(tr=None) -> list[tuple[str, str, str]]:
    """Model states per parameter, the logits and the peak, as
    ``(formula, when it holds, one worked number)`` rows."""
    tr = _tr(tr)
    (zw, zg, zo), (mw, mg, mo) = BYTES_PER_PARAMETER["zero"], BYTES_PER_PARAMETER["megatron"]
    name = tr("LLaMA-2-7B ({n} B): {value}")
    d = 8
    tokens_vocab = LLAMA3.s * LLAMA3.b * LLAMA3.padded_vocab(1)
    loss = _logits()
    kept, at_loss = loss["saved"] // tokens_vocab, loss["forward"] // tokens_vocab
    peak = _plain_pytorch_peak()
    return [
        (f"{zw} + {zg} + {zo} = {zw + zg + zo}",
         tr("bytes per parameter, ZeRO's mixed-precision Adam: fp16 weights, fp16 gradients, "
            "fp32 weights and Adam moments"),
         name.format(n=_billions(LLAMA2),
                     value=format_bytes(model_states(LLAMA2).total, "GiB"))),
        (f"{mw} + {mg} + {mo} = {mw + mg + mo}",
         tr("bytes per parameter, Megatron-LM: fp32 gradient buffer"),
         name.format(n=_billions(LLAMA2), value=format_bytes(
             model_states(LLAMA2, accounting="megatron").total, "GiB"))),
        (f"{mw + mg} + {mo}/d",
         tr("bytes per parameter, Megatron-LM's distributed optimizer shards the {o}").format(
             o=mo),
         tr("d={d}: {value}").format(d=d, value=format_bytes(model_states(
             LLAMA2, accounting="megatron", distributed_optimizer=True, d=d).total, "GiB"))),
        (f"{kept}·s·b·V/t  ({at_loss}·s·b·V/t)",
         tr("logits on the last stage, kept in fp32 by the loss; in parentheses the loss "
            "moment, when Megatron's loss also holds the bf16 logits"),
         tr("LLaMA-3-8B, s={s}, V={V}: {kept} ({at_loss})").format(
             s=LLAMA3.s, V=LLAMA3.padded_vocab(1), kept=_size(loss["saved"]),
             at_loss=_size(loss["forward"]))),
        (tr("peak = the largest moment"),
         tr("of the step's timeline, not the sum of the parts: weights, gradients and "
            "activations are not all alive at once"),
         tr("LLaMA-2-7B, gradients freed after each step: peak {peak}, parts {parts}").format(
             peak=format_bytes(peak.peak, "GiB"), parts=format_bytes(peak.total, "GiB"))),
    ]


def checklist(tr=None) -> list[str]:
    """Does a configuration fit? The steps, in order, the last one worked
    for LLaMA-2-7B with :data:`FIT` on :data:`GPU`."""
    tr = _tr(tr)
    gpu = GPUS[GPU]
    result = training_memory(LLAMA2, **FIT, gpu_memory=GPU)
    worst = result.most_loaded
    return [
        tr("Capacity: what the driver reports, {gpu} = {mib} MiB = {gib}").format(
            gpu=gpu.name, mib=gpu.memory // MiB, gib=format_bytes(gpu.memory, "GiB")),
        tr("Model states: bytes per parameter x the stage's parameters, / d where sharded"),
        tr("Activations: L/p layers x M x peak_in_flight (the micro-batches a stage holds at "
           "once, not m); the logits on the last stage"),
        tr("Peak: the largest moment of each stage's step, on the most loaded stage (first "
           "or last)"),
        tr("Keep a reserve for what a GPU needs beyond the peak (what the driver keeps, CUDA "
           "context, NCCL buffers, the allocator's cached blocks)"),
        tr("LLaMA-2-7B, t={t}, p={p}, d={d}, m={m} on {gpu}: stage {stage} peaks at {peak}, "
           "{margin} to spare").format(**FIT, gpu=gpu.name, stage=worst.stage,
                                       peak=format_bytes(worst.peak, "GiB"),
                                       margin=format_bytes(result.margin, "GiB")),
    ]


class Mistake(NamedTuple):
    """A common mistake: its name, what it costs (bytes misjudged, in the
    mistake's own example) and what the numbers say."""

    name: str
    cost: int
    numbers: str


def mistakes(tr=None) -> list[Mistake]:
    """The common mistakes, costliest first; words translated by ``tr``
    (default: the current language)."""
    tr = _tr(tr)
    m8 = activation_memory(**WORKED, t=8)
    L, p = 32, 4
    whole = model_activation_memory(m8, L)
    one_f_one_b, all_64 = (simulate_schedule(kind, p, 64).stage_activation_memory(0, m8, L)
                           for kind in ("1f1b", "gpipe"))
    flash = activation_memory(**WORKED, t=8, flash_attention=True)
    flash_selective = activation_memory(**WORKED, t=8, flash_attention=True,
                                        recompute="selective")
    llama = dict(s=4096, b=1, h=8192, a=64, t=8, activation="swiglu")
    published = activation_memory(**llama, ffn_hidden_size=28672)
    default = activation_memory(**llama)
    no_dropout = activation_memory(**WORKED, t=8, dropout=False)
    states = model_states(LLAMA2, accounting="megatron")
    d = 8
    zero3 = training_memory(LLAMA2, d=d, accounting="zero", zero_stage=3).stages[0]
    held = zero3.held_between_passes
    loss = _logits()
    gpu, label = GPUS[GPU], parse_size("gpu_memory", f"{GPUS[GPU].label_gb}GB")
    pipeline = training_memory(LLAMA3, **PIPELINE, recompute="full").stages
    first, last = pipeline[0], max(pipeline, key=lambda stage: stage.peak)
    rows = [
        Mistake(tr("counting only the bf16 weights (2 bytes per parameter)"),
                states.total - states.weights,
                tr("LLaMA-2-7B's model states under Megatron-LM: {total}, not the {weights} "
                   "of its bf16 weights").format(total=format_bytes(states.total, "GiB"),
                                                 weights=format_bytes(states.weights, "GiB"))),
        Mistake(tr("micro-batches per step taken as in flight"), all_64 - one_f_one_b,
                tr("with m=64 per step, 1F1B's first stage holds {held} "
                   "(peak_in_flight = p = {p}), not {all} (all 64, as GPipe)").format(
                    held=format_bytes(one_f_one_b, "GiB"), p=p,
                    all=format_bytes(all_64, "GiB"))),
        Mistake(tr("believing ZeRO-3 shards the activations"), held - held // d,
                tr("it shards model states only: LLaMA-2-7B at d={d} keeps {held} of "
                   "activations on every GPU, not {shard}").format(
                    d=d, held=format_bytes(held, "GiB"), shard=format_bytes(held // d, "GiB"))),
        Mistake(tr("forgetting the fp32 logits at a 128k vocabulary"), loss["forward"],
                tr("LLaMA-3-8B (s={s}, V={V}, t=1): the loss keeps {kept} for the backward "
                   "and holds {at_loss} at its peak").format(
                    s=LLAMA3.s, V=LLAMA3.padded_vocab(1), kept=_size(loss["saved"]),
                    at_loss=_size(loss["forward"]))),
        Mistake(tr("reading a GPU's \"{label}GB\" as {label} x 10^9 bytes").format(
                    label=gpu.label_gb), gpu.memory - label,
                tr("{gpu} reports {mib} MiB = {gib}; {label} x 10^9 bytes is only "
                   "{decimal}").format(gpu=gpu.name, mib=gpu.memory // MiB,
                                       gib=format_bytes(gpu.memory, "GiB"),
                                       label=gpu.label_gb,
                                       decimal=format_bytes(label, "GiB"))),
        Mistake(tr("L·M/p as a pipeline stage's peak"), whole - whole // p,
                tr("1F1B's first stage holds L·M = {whole} (worked example, L={L}, p={p}), "
                   "not L·M/p = {naive}").format(whole=format_bytes(whole, "GiB"), L=L, p=p,
                                                 naive=format_bytes(whole // p, "GiB"))),
        Mistake(tr("assuming the first stage is the most loaded"), last.peak - first.peak,
                tr("LLaMA-3-8B, p={p}, m={m}, full recomputation: stage {last} peaks at {peak} "
                   "(output layer and logits), stage 0 at {first}").format(
                    **PIPELINE, last=last.stage, peak=format_bytes(last.peak, "GiB"),
                    first=format_bytes(first.peak, "GiB"))),
        Mistake(tr("forgetting the attention map with FlashAttention off"),
                L * m8.attention_map,
                tr("5as²b/t = {map} per layer in the worked example (t=8): {total} for "
                   "L={L} layers").format(map=format_bytes(m8.attention_map), L=L,
                                         total=format_bytes(L * m8.attention_map, "GiB"))),
        Mistake(tr("forgetting dropout"), m8.total - no_dropout.total,
                tr("three masks and the attention-dropout output: the worked example keeps "
                   "{kept} per layer at t=8, {without} without them").format(
                    kept=format_bytes(m8.total), without=format_bytes(no_dropout.total))),
        Mistake(tr("SwiGLU at the wrong width"), published.total - default.total,
                tr("LLaMA-2-70B's f=28672 keeps {published} per layer; the default width {f} "
                   "gives {default}").format(published=format_bytes(published.total),
                                             f=default.config.f,
                                             default=format_bytes(default.total))),
        Mistake(tr("selective recomputation on top of FlashAttention"),
                flash.total - flash_selective.total,
                tr("saves only the log-sum-exp: {saved} of {total} (worked example, t=8)").format(
                    saved=format_bytes(flash.total - flash_selective.total, "KiB"),
                    total=format_bytes(flash.total))),
    ]
    return sorted(rows, key=lambda row: -row.cost)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def formulas_markdown(tr=None) -> str:
    """:func:`formulas` and :func:`states_and_peak` as a Markdown table."""
    tr = _tr(tr)
    lines = [f"| {tr('formula')} | {tr('when it holds')} | {tr('one number')} |",
             "|---|---|---|"]
    lines += [f"| `{formula}` | {_cell(holds)} | {_cell(number)} |"
              for formula, holds, number in formulas(tr) + states_and_peak(tr)]
    return "\n".join(lines)


def mistakes_markdown(tr=None) -> str:
    """:func:`mistakes` as a Markdown table, costliest first."""
    tr = _tr(tr)
    lines = [f"| {tr('cost')} | {tr('mistake')} | {tr('what the numbers say')} |",
             "|--:|---|---|"]
    lines += [f"| {_size(row.cost)} | **{_cell(row.name)}** | {_cell(row.numbers)} |"
              for row in mistakes(tr)]
    return "\n".join(lines)


def checklist_markdown(tr=None) -> str:
    """:func:`checklist` as a numbered Markdown list."""
    tr = _tr(tr)
    steps = checklist(tr)
    return "\n".join([f"**{tr('Does it fit? A checklist')}**", ""]
                     + [f"{i}. {step}" for i, step in enumerate(steps[:-1], 1)]
                     + ["", steps[-1]])


# ---- the page ----------------------------------------------------------------

PAGE = (11.69, 8.27)
"""A4 landscape, inches."""
INK, ACCENT, MUTED = "#1a1a1a", "#0b4f8a", "#8a1c1c"
_TOKEN = re.compile(r"[\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]|[^\s\u2e80-\u9fff"
                    r"\u3000-\u303f\uff00-\uffef]+\s*|\s+")
_NO_LINE_START = "，。；：、！？）」』”"
_NO_LINE_END = "（「『“"


def _wrap(text: str, width: float, size: float, renderer, fig: Figure) -> list[str]:
    """``text`` broken into lines no wider than ``width`` (a fraction of the
    page's width) at font ``size``: between words, or between any two Han
    characters."""
    from matplotlib.font_manager import FontProperties

    prop = FontProperties(size=size)
    limit = width * fig.bbox.width

    def wide(s: str) -> float:
        return renderer.get_text_width_height_descent(s.rstrip(), prop, ismath=False)[0]

    tokens = []
    for token in _TOKEN.findall(text):
        if tokens and token[0] in _NO_LINE_START:   # no line starts with "，" or "）"
            tokens[-1] += token
        elif tokens and tokens[-1][-1] in _NO_LINE_END:   # nor ends with "（"
            tokens[-1] += token
        else:
            tokens.append(token)
    lines, line = [], ""
    for token in tokens:
        if line and wide(line + token) > limit:
            lines.append(line.rstrip())
            line = token.lstrip()
        else:
            line += token
    return [*lines, line.rstrip()] if line.strip() else lines


class _Page:
    """Places wrapped text in columns, top down, and remembers how far down
    each column has gone."""

    LINE = 1.32  # line height in font sizes

    def __init__(self, fig: Figure):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        self.fig = fig
        self.renderer = FigureCanvasAgg(fig).get_renderer()
        self.height_pt = fig.get_figheight() * 72

    def lines(self, n: int, size: float) -> float:
        """The height of ``n`` lines at ``size``, as a fraction of the page."""
        return n * size * self.LINE / self.height_pt

    def text(self, x: float, y: float, text: str, width: float, size: float,
             **style) -> float:
        """Draw ``text`` wrapped to ``width`` at (x, y) (top left); return its
        height (a fraction of the page)."""
        wrapped = _wrap(text, width, size, self.renderer, self.fig)
        self.fig.text(x, y, "\n".join(wrapped), fontsize=size, va="top", ha="left",
                      linespacing=self.LINE * 0.83, color=style.pop("color", INK), **style)
        return self.lines(len(wrapped), size)


def cheat_sheet_figure() -> Figure:
    """The cheat sheet on one landscape A4 page, in the current language
    (:mod:`actmem.language`): the formulas on the left, the mistakes and
    the fit checklist on the right. The page has one axes, turned off, so that
    IPython displays it."""
    tr = translator()
    fig = Figure(figsize=PAGE)
    fig.add_axes((0, 0, 1, 1)).set_axis_off()
    page = _Page(fig)
    size, head = 7.6, 10.5
    gap = page.lines(1, size) * 0.45
    page.text(0.025, 0.975, tr("Training memory cheat sheet (activations: Korthikanti et al. "
                               "2022, arXiv 2205.05198; numbers from actmem)"),
              0.95, 13, color=ACCENT)

    def section(x, y, title, width):
        return y - page.text(x, y, title, width, head, color=ACCENT) - gap

    # left column: the formulas
    x, y = 0.025, 0.925
    columns = ((0.0, 0.13), (0.135, 0.185), (0.325, 0.145))
    for title, rows in ((tr("Activations: bytes per layer, micro-batch, GPU"), formulas(tr)),
                        (tr("Model states, logits and the peak"), states_and_peak(tr))):
        y = section(x, y, title, 0.47)
        for cells in rows:
            y -= max(page.text(x + dx, y, cell, width, size, color=color)
                     for (dx, width), cell, color in zip(columns, cells,
                                                         (ACCENT, INK, INK))) + gap
        y -= gap

    # right column: the mistakes, costliest first, then the checklist
    x, y = 0.52, 0.925
    y = section(x, y, tr("Common mistakes, costliest first (cost: bytes misjudged)"), 0.46)
    for row in mistakes(tr):
        page.text(x, y, _size(row.cost), 0.065, size, color=MUTED)
        y -= page.text(x + 0.07, y, row.name, 0.385, size, color=ACCENT)
        y -= page.text(x + 0.07, y, row.numbers, 0.385, size) + gap * 1.2
    steps = checklist(tr)
    y = section(x, y - gap, tr("Does it fit? A checklist"), 0.46)
    for i, step in enumerate(steps[:-1], 1):
        page.text(x, y, f"{i}.", 0.02, size)
        y -= page.text(x + 0.02, y, step, 0.435, size) + gap * 0.6
    page.text(x + 0.02, y - gap * 0.4, steps[-1], 0.435, size, color=MUTED)
    return fig

"""A one-page cheat sheet: the formulas of notebooks 01-06 and 08, and the
common mistakes, each with one number computed by actmem.

Nothing here is typed-in arithmetic: every number comes from the ledger,
the schedule simulation or the model-state count, so the sheet changes
when they do. :func:`cheat_sheet_figure` lays it out on one landscape A4
page (``python -m actmem cheatsheet FILE`` writes it as PDF or PNG).
"""

from __future__ import annotations

from matplotlib.figure import Figure

from ..layer.memory import activation_memory, table2
from ..run.model import parameter_count
from ..run.pipeline_formulas import bubble_fraction_formula, interleaved_first_stage_memory
from ..run.presets import PRESETS
from ..run.schedules import simulate_schedule
from ..run.states import model_states
from ..run.training import model_activation_memory
from ..units import format_bytes, parse_size

WORKED = dict(s=2048, b=1, h=4096, a=32)
"""The worked example's layer (notebook 04)."""
GPT3 = {**{k: getattr(PRESETS["gpt3-175b"], k) for k in ("s", "b", "h", "a")}, "t": 8}
"""GPT-3 175B's layer at t = 8 (the paper's Table 2, notebook 06)."""


def formulas() -> list[tuple[str, str, str]]:
    """``(formula, when it holds, one worked number)`` rows."""
    m8 = activation_memory(**WORKED, t=8)
    gpt3 = table2(**GPT3)
    flash = activation_memory(**WORKED, t=8, flash_attention=True)
    L, p, m, v = 32, 4, 8, 2
    gpipe = simulate_schedule("gpipe", p, m).stage_activation_memory(0, m8, L)
    states = model_states(PRESETS["llama2-7b"])
    return [
        ("sbh(10 + 24/t + 5as/(ht))", "per layer, micro-batch, GPU; 16-bit, masks 1 B, "
         "map stored",
         f"worked example, t=8: {format_bytes(m8.total)}"),
        ("10sbh  (does not shrink with t)", "the fixed term: a floor for tensor parallelism",
         f"worked example: {format_bytes(m8.fixed)} at every t"),
        ("sbh/t (34 + 5as/h)", "+ sequence parallelism (t divides s)",
         f"GPT-3 175B, t=8: {format_bytes(gpt3['tensor + sequence parallel'].total)}"),
        ("34sbh/t", "+ sequence parallelism + selective recomputation",
         f"GPT-3 175B, t=8: "
         f"{format_bytes(gpt3['tensor + sequence parallel + selective recompute'].total)}"),
        ("2sbh", "full recomputation: only the layer input is kept",
         f"GPT-3 175B: {format_bytes(gpt3['full recompute'].total)}"),
        ("5as²b/t  ->  4bas/t", "FlashAttention: fp32 log-sum-exp instead of the map",
         f"worked example, t=8: {format_bytes(m8.attention_map)} -> "
         f"{format_bytes(flash.attention_map, 'KiB')}"),
        ("L · M", "whole model; also the 1F1B first stage when m >= p (p cancels)",
         f"worked example, L={L}, t=8: {format_bytes(model_activation_memory(m8, L), 'GiB')}"),
        ("m · (L/p) · M", "GPipe: every stage holds all m micro-batches",
         f"p={p}, m={m}: {format_bytes(gpipe, 'GiB')}"),
        ("L · M · (1 + (p-1)/(pv))", "interleaved 1F1B first stage (m >= 2p)",
         f"p={p}, v={v}: {format_bytes(interleaved_first_stage_memory(m8, L, p, v), 'GiB')}"),
        ("(p-1)/m,  (p-1)/(vm)", "bubble: GPipe and 1F1B; interleaved",
         f"p={p}, m={m}: {float(bubble_fraction_formula('1f1b', p, m)):.1%}, "
         f"v={v}: {float(bubble_fraction_formula('interleaved', p, m, v)):.2%}"),
        ("16 bytes per parameter", "mixed-precision Adam: 2 weights + 2 gradients + "
         "12 optimizer, before ZeRO",
         f"LLaMA-2 7B ({parameter_count(PRESETS['llama2-7b']) / 1e9:.2f} B): "
         f"{format_bytes(states.total, 'GiB')}"),
    ]


def mistakes() -> list[tuple[str, str]]:
    """``(mistake, what the numbers say)`` rows."""
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
    no_masks = activation_memory(**WORKED, t=8, dropout=False)
    return [
        ("GB for GiB", f"an 80 GB GPU holds {format_bytes(parse_size('gpu', '80GB'), 'GiB')}, "
         "not 80 GiB"),
        ("L·M/p as a pipeline stage's peak",
         f"1F1B's first stage holds L·M = {format_bytes(whole, 'GiB')} "
         f"(worked example, L={L}, p={p}), not L·M/p = "
         f"{format_bytes(whole // p, 'GiB')}"),
        ("micro-batches per step taken as in flight",
         f"with m=64 per step, 1F1B's first stage holds {format_bytes(one_f_one_b, 'GiB')} "
         f"(p={p} in flight), not {format_bytes(all_64, 'GiB')} (all 64, as GPipe)"),
        ("selective recomputation on top of FlashAttention",
         f"saves only the log-sum-exp: "
         f"{format_bytes(flash.total - flash_selective.total, 'KiB')} of "
         f"{format_bytes(flash.total)} (worked example, t=8)"),
        ("SwiGLU at the wrong width",
         f"LLaMA-2 70B's f=28672 keeps {format_bytes(published.total)} per layer; "
         f"the default width {default.config.f} gives {format_bytes(default.total)}"),
        ("forgetting the dropout masks",
         f"with dropout the worked example keeps {format_bytes(m8.total)} at t=8; "
         f"without its four rows, {format_bytes(no_masks.total)}"),
    ]


def cheat_sheet_figure() -> Figure:
    """The formulas and the mistakes on one landscape A4 page (text only)."""
    fig = Figure(figsize=(11.69, 8.27))
    fig.text(0.03, 0.96, "Activation memory cheat sheet (Korthikanti et al. 2022, "
             "arXiv 2205.05198; numbers from actmem)", fontsize=13, fontweight="bold",
             va="top")
    y = 0.91
    for formula, holds, number in formulas():
        fig.text(0.03, y, formula, fontsize=9.5, family="monospace", va="top")
        fig.text(0.27, y, holds, fontsize=8.5, va="top", wrap=True)
        fig.text(0.68, y, number, fontsize=8.5, va="top")
        y -= 0.048
    fig.text(0.03, y - 0.01, "Common mistakes", fontsize=12, fontweight="bold", va="top")
    y -= 0.055
    for mistake, numbers in mistakes():
        fig.text(0.03, y, mistake, fontsize=8.5, fontweight="bold", va="top")
        fig.text(0.31, y, numbers, fontsize=8.5, va="top")
        y -= 0.042
    return fig

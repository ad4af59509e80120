"""A one-page cheat sheet: the formulas of notebooks 01-06 and 08, and the
common mistakes, each with one number computed by actmem.

Nothing here is typed-in arithmetic: every number comes from the ledger,
the schedule simulation or the model-state count, so the sheet changes
when they do. :func:`cheat_sheet_figure` lays it out on one landscape A4
page (``python -m actmem cheatsheet FILE`` writes it as PDF or PNG).
"""

from __future__ import annotations

from matplotlib.figure import Figure

from ..language import english, translator
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


def formulas(tr=english) -> list[tuple[str, str, str]]:
    """``(formula, when it holds, one worked number)`` rows; words
    translated by ``tr`` (:mod:`actmem.language`; default English)."""
    m8 = activation_memory(**WORKED, t=8)
    gpt3 = table2(**GPT3)
    flash = activation_memory(**WORKED, t=8, flash_attention=True)
    L, p, m, v = 32, 4, 8, 2
    gpipe = simulate_schedule("gpipe", p, m).stage_activation_memory(0, m8, L)
    states = model_states(PRESETS["llama2-7b"])
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
         f"p={p}, m={m}: {format_bytes(gpipe, 'GiB')}"),
        ("L · M · (1 + (p-1)/(pv))", tr("interleaved 1F1B first stage (m >= 2p)"),
         f"p={p}, v={v}: {format_bytes(interleaved_first_stage_memory(m8, L, p, v), 'GiB')}"),
        ("(p-1)/m,  (p-1)/(vm)", tr("bubble: GPipe and 1F1B; interleaved"),
         f"p={p}, m={m}: {float(bubble_fraction_formula('1f1b', p, m)):.1%}, "
         f"v={v}: {float(bubble_fraction_formula('interleaved', p, m, v)):.2%}"),
        (tr("16 bytes per parameter"),
         tr("mixed-precision Adam: 2 weights + 2 gradients + 12 optimizer, before ZeRO"),
         f"LLaMA-2 7B ({parameter_count(PRESETS['llama2-7b']) / 1e9:.2f} B): "
         f"{format_bytes(states.total, 'GiB')}"),
    ]


def mistakes(tr=english) -> list[tuple[str, str]]:
    """``(mistake, what the numbers say)`` rows; words translated by ``tr``
    (:mod:`actmem.language`; default English)."""
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
        (tr("GB for GiB"), tr("an 80 GB GPU holds {gib}, not 80 GiB").format(
            gib=format_bytes(parse_size("gpu", "80GB"), "GiB"))),
        (tr("L·M/p as a pipeline stage's peak"),
         tr("1F1B's first stage holds L·M = {whole} (worked example, L={L}, p={p}), "
            "not L·M/p = {naive}").format(whole=format_bytes(whole, "GiB"), L=L, p=p,
                                          naive=format_bytes(whole // p, "GiB"))),
        (tr("micro-batches per step taken as in flight"),
         tr("with m=64 per step, 1F1B's first stage holds {held} (p={p} in flight), "
            "not {all} (all 64, as GPipe)").format(
             held=format_bytes(one_f_one_b, "GiB"), p=p, all=format_bytes(all_64, "GiB"))),
        (tr("selective recomputation on top of FlashAttention"),
         tr("saves only the log-sum-exp: {saved} of {total} (worked example, t=8)").format(
             saved=format_bytes(flash.total - flash_selective.total, "KiB"),
             total=format_bytes(flash.total))),
        (tr("SwiGLU at the wrong width"),
         tr("LLaMA-2 70B's f=28672 keeps {published} per layer; the default width {f} "
            "gives {default}").format(published=format_bytes(published.total),
                                      f=default.config.f, default=format_bytes(default.total))),
        (tr("forgetting the dropout masks"),
         tr("with dropout the worked example keeps {kept} at t=8; without its four rows, "
            "{without}").format(kept=format_bytes(m8.total),
                                without=format_bytes(no_masks.total))),
    ]


def cheat_sheet_figure() -> Figure:
    """The formulas and the mistakes on one landscape A4 page (text only),
    in the current language (:mod:`actmem.language`)."""
    tr = translator()
    fig = Figure(figsize=(11.69, 8.27))
    fig.text(0.03, 0.96, tr("Activation memory cheat sheet (Korthikanti et al. 2022, "
                            "arXiv 2205.05198; numbers from actmem)"), fontsize=13,
             fontweight="bold", va="top")
    y = 0.91
    for formula, holds, number in formulas(tr):
        fig.text(0.03, y, formula, fontsize=9.5, va="top")
        fig.text(0.27, y, holds, fontsize=8.5, va="top", wrap=True)
        fig.text(0.68, y, number, fontsize=8.5, va="top")
        y -= 0.048
    fig.text(0.03, y - 0.01, tr("Common mistakes"), fontsize=12, fontweight="bold", va="top")
    y -= 0.055
    for mistake, numbers in mistakes(tr):
        fig.text(0.03, y, mistake, fontsize=8.5, fontweight="bold", va="top")
        fig.text(0.31, y, numbers, fontsize=8.5, va="top")
        y -= 0.042
    return fig

"""The cheat sheet's second page: today's levers (issue 23), each with its
byte rule and one number that actmem computes.

Context parallelism, expert parallelism, FP8, LoRA, activation offloading,
multi-latent attention and named-module recomputation: for each, the
Megatron-LM flag (snake_case option in actmem), what it does to the bytes,
and a worked number from the ledger (:func:`actmem.ledger_rows`), the model
states (:func:`actmem.model_states`), the step's peak
(:func:`actmem.training_memory`) or the attention's exchange buffers
(:mod:`actmem.run.moments.cp_timeline`); nothing is typed in. :func:`levers`
gives the rows, :func:`levers_markdown` a Markdown table for notebook 11,
:func:`levers_figure` the A4 page, and :func:`write_sheet` both pages of the
sheet into one file (``python -m actmem cheatsheet FILE``).
"""

from __future__ import annotations

import io
import re

from matplotlib.figure import Figure

from ..layer.ledger import ledger_rows
from ..layer.recompute_modules import working_set
from ..run.moments.cp_timeline import exchange_buffers
from ..run.moments.offload import OFFLOAD_MIN_ELEMENTS
from ..run.peak import training_memory
from ..run.job.presets import MOE_PRESETS, PRESETS
from ..run.model_states.states import BYTES_PER_PARAMETER, model_states
from ..units import format_bytes
from .cheatsheet import ACCENT, INK, PAGE, _Page, _tr, cheat_sheet_figure

__all__ = ["levers", "levers_markdown", "levers_figure", "write_sheet"]

LONG = PRESETS["llama3-8b"].with_(s=131072)
"""The long-context case (notebook 12): LLaMA-3-8B at s = 131072."""
LLAMA2, MIXTRAL = PRESETS["llama2-7b"], MOE_PRESETS["mixtral-8x7b"]
DEEPSEEK = MOE_PRESETS["deepseek-v3"].with_(s=4096)
"""DeepSeek-V3 (multi-latent attention) at s = 4096."""
MEGATRON = dict(accounting="megatron")
MODULES = ("core_attn", "layernorm", "mlp")
"""The named-module recomputation of the worked number."""
LORA = dict(lora_rank=8, lora_targets=("q_proj", "v_proj"))
"""PEFT's LLaMA example: rank 8 on the query and value projections."""
OFFLOADED = 16
"""Layers offloaded in the worked number."""


def _gib(n: int) -> str:
    return format_bytes(n, "GiB")


def _mib(n: int) -> str:
    return format_bytes(n, "MiB")


def _layer(model, **options) -> int:
    """Bytes one layer of ``model`` keeps (t = 1, dense layer)."""
    recompute = "selective" if "recompute_modules" in options else "none"
    return sum(r.bytes for r in ledger_rows(model.layer(1, False, recompute, moe=False,
                                                        **options)))


def _cp(tr) -> tuple[str, str, str]:
    ring = exchange_buffers(LONG.layer(1, False, "none", moe=False, cp=8))
    one, eight = (model_states(LONG, **MEGATRON, distributed_optimizer=True, cp=cp).optimizer
                  for cp in (1, 8))
    return ("cp  (--context-parallel-size)",
            tr("every activation row at s/cp tokens per GPU; weights and gradients whole; the "
               "distributed optimizer shards over d·cp; the attention exchanges K and V "
               "(p2p: cp ring buffers and per-step outputs, alive inside it)"),
            tr("LLaMA-3-8B, s={s}: a layer keeps {one} at cp=1, {eight} at cp=8, plus {ring} "
               "inside its attention; optimizer {o1} -> {o8}").format(
                s=LONG.s, one=_gib(_layer(LONG)), eight=_gib(_layer(LONG, cp=8)),
                ring=_gib(sum(ring.values())), o1=_gib(one), o8=_gib(eight)))


def _ep(tr) -> tuple[str, str, str]:
    d = 8
    states = [model_states(MIXTRAL, **MEGATRON, distributed_optimizer=True, d=d, ep=ep, etp=1)
              for ep in (1, d)]
    return ("ep, etp  (--expert-model-parallel-size, --expert-tensor-parallel-size)",
            tr("the experts' weights and gradients over ep·etp GPUs, their optimizer over the "
               "expert data-parallel group; router and norms whole; token dispatch buffers "
               "inside each MoE layer"),
            tr("Mixtral 8x7B, d={d}: weights {w1} at ep=1, {w8} at ep={d}; gradients {g1} -> "
               "{g8}").format(d=d, w1=_gib(states[0].weights), w8=_gib(states[1].weights),
                              g1=_gib(states[0].gradients), g8=_gib(states[1].gradients)))


def _fp8(tr) -> tuple[str, str, str]:
    plain, fp8 = (training_memory(LLAMA2, **MEGATRON, fp8=f).most_loaded for f in (None, "e4m3"))
    return ("FP8  (--fp8-format)",
            tr("the linear layers' saved inputs in 1 byte plus a 4-byte scale; FlashAttention's "
               "output stays 16-bit; the model states gain FP8 weight copies (and their "
               "transposes on Hopper)"),
            tr("LLaMA-2-7B: a layer keeps {a} -> {b}; weights {w} -> {wf}").format(
                a=_mib(_layer(LLAMA2)), b=_mib(_layer(LLAMA2, fp8="e4m3")),
                w=_gib(plain.weights), wf=_gib(fp8.weights)))


def _lora(tr) -> tuple[str, str, str]:
    w, g, o = BYTES_PER_PARAMETER["megatron"]
    full, lora = (training_memory(m, **MEGATRON).most_loaded
                  for m in (LLAMA2, LLAMA2.with_(**LORA)))
    return ("LoRA  (lora_rank, lora_targets)",
            tr("frozen weights: {w} bytes, no gradient, no optimizer state; adapters: "
               "{w} + {g} + {o} bytes per parameter; each adapter keeps its input").format(
                w=w, g=g, o=o),
            tr("LLaMA-2-7B, rank {r} on {targets}: peak {a} -> {b}").format(
                r=LORA["lora_rank"], targets=_listing(LORA["lora_targets"], tr),
                a=_gib(full.peak), b=_gib(lora.peak)))


def _offload(tr) -> tuple[str, str, str]:
    plain, off = (training_memory(LLAMA2, **MEGATRON, cpu_offloading_num_layers=n).most_loaded
                  for n in (0, OFFLOADED))
    return (tr("offloading  (--cpu-offloading-num-layers)"),
            tr("the first n layers' saved tensors of at least {n} elements go to pinned host "
               "memory while the pass waits; the newest layer stays").format(
                n=f"{OFFLOAD_MIN_ELEMENTS:,}"),
            tr("LLaMA-2-7B, {n} layers: peak {a} -> {b}, {host} on the host").format(
                n=OFFLOADED, a=_gib(plain.peak), b=_gib(off.peak), host=_gib(off.host_memory)))


def _mla(tr) -> tuple[str, str, str]:
    m = DEEPSEEK
    return ("MLA  (--multi-latent-attention)",
            tr("saves the latent projections' inputs (q_lora_rank, kv_lora_rank) and still "
               "every head's Q, K, V at qk_head_dim + qk_pos_emb_head_dim"),
            tr("DeepSeek-V3, a dense layer at s={s} ({a} heads of {d}): {value}").format(
                s=m.s, a=m.a, d=m.qk_head_dim + m.qk_pos_emb_head_dim,
                value=_mib(_layer(m))))


def _modules(tr) -> tuple[str, str, str]:
    c = LLAMA2.layer(1, False, "selective", moe=False, recompute_modules=MODULES)
    return ("recompute_modules  (--recompute-modules)",
            tr("each named module drops the rows its checkpoint covers; the backward rebuilds "
               "one module at a time"),
            tr("LLaMA-2-7B, {names}: a layer keeps {kept} instead of {full}, rebuilds {ws} at "
               "once").format(names=" + ".join(MODULES), kept=_mib(_layer(
                   LLAMA2, recompute_modules=MODULES)), full=_mib(_layer(LLAMA2)),
                   ws=_mib(working_set(c))))


def _listing(names, tr) -> str:
    """Names as a list: ``'q_proj, v_proj'``; in Chinese with the enumeration
    comma, ``'q_proj、v_proj'``."""
    return ("、" if tr(", ") == "，" else ", ").join(names)


def _code(lever: str) -> str:
    """A lever's name in Markdown: code as code (```cp  (--context-parallel-size)```);
    a translated name as text with its flag as code (``激活卸载（`--cpu-offloading-num-layers`）``)."""
    if lever.isascii():
        return f"`{lever}`"
    return re.sub(r"（(--[\w-]+)）", r"（`\1`）", lever)


def levers(tr=None) -> list[tuple[str, str, str]]:
    """``(lever and its flag, byte rule, one number)`` per lever; words
    translated by ``tr`` (default: the current language)."""
    tr = _tr(tr)
    return [row(tr) for row in (_cp, _ep, _fp8, _lora, _offload, _mla, _modules)]


def levers_markdown(tr=None) -> str:
    """:func:`levers` as a Markdown table."""
    tr = _tr(tr)
    lines = [f"| {tr('lever')} | {tr('what it does to the bytes')} | {tr('one number')} |",
             "|---|---|---|"]
    lines += [f"| {_code(lever)} | {rule} | {number} |" for lever, rule, number in levers(tr)]
    return "\n".join(lines)


def levers_figure() -> Figure:
    """The sheet's second A4 landscape page, in the current language: one
    block per lever, its byte rule beside its number."""
    tr = _tr(None)
    fig = Figure(figsize=PAGE)
    fig.add_axes((0, 0, 1, 1)).set_axis_off()
    page = _Page(fig)
    size = 10
    gap = page.lines(1, size) * 0.6
    y = 0.975 - page.text(0.025, 0.975, tr("Today's levers: what each does to the bytes "
                                           "(numbers from actmem)"), 0.95, 13,
                          color=ACCENT) - 2 * gap
    for lever, rule, number in levers(tr):
        y -= page.text(0.025, y, lever, 0.95, size + 1, color=ACCENT)
        y -= max(page.text(0.025, y, rule, 0.55, size, color=INK),
                 page.text(0.6, y, number, 0.375, size, color=INK)) + gap
    return fig


def write_sheet(file, extension: str) -> None:
    """Both pages of the sheet (:func:`actmem.views.cheatsheet.cheat_sheet_figure`,
    then :func:`levers_figure`) into ``file``, an open binary file:
    ``"pdf"`` two A4 pages, ``"png"`` the two pages one above the other."""
    pages = [cheat_sheet_figure(), levers_figure()]
    if extension == "pdf":
        from matplotlib.backends.backend_pdf import PdfPages
        with PdfPages(file) as pdf:
            for fig in pages:
                pdf.savefig(fig)
        return
    from PIL import Image
    images = []
    for fig in pages:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        images.append(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))
    sheet = Image.new("RGB", (images[0].width, sum(i.height for i in images)), "white")
    for i, image in enumerate(images):
        sheet.paste(image, (0, i * images[0].height))
    sheet.save(file, format="png")

"""``python -m actmem train``: a GPU's peak training memory, stage by stage.

Prints, for every pipeline stage, each part of :func:`actmem.training_memory`
in MiB, their sum, and the peak: the most bytes alive at one moment of the
step (the timeline, :mod:`actmem.timeline`). The verdict line names the most
loaded stage's peak event; with ``--gpu-memory`` (a GPU name such as
``"A100 80GB"``, or a size) it gives the margin and fits / does not fit.
``--timeline`` prints every stage's events, one line each, in MiB
(2^20 bytes). ``--json`` prints bytes, the events included.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re

from ..language import translator
from ..layer.config import RECOMPUTE
from ..layer.context_parallel import CP_COMM_TYPES
from ..layer.fp8 import FP8_FORMATS, FP8_RECIPES
from ..layer.moe_options import DISPATCHERS, FLEX_BACKENDS
from ..layer.lora import LORA_TARGETS
from ..layer.recompute_modules import MODULES
from ..run.moments.framework import GRADIENT_BUFFERS
from ..run.moments.loss import LOSSES
from ..run.job.gpus import GPUS, find_gpu
from ..run.peak import PARTS, StageMemory, TrainingMemory, training_memory
from ..run.moments.timeline import CATEGORIES
from ..run.job.model import ModelConfig
from ..run.job.presets import MOE_PRESETS, PRESETS
from ..run.schedule.schedules import ORDERS, SCHEDULES
from ..run.model_states.states import ACCOUNTINGS, OPTIMIZERS
from ..units import format_bytes, format_change, format_value, parse_size
from .job_cli import add_sources, job_json, launch_job, name, source_model


DESCRIPTION = ("A GPU's peak training memory, stage by stage: each part in MiB, their sum, "
               "and the peak, the most bytes alive at one moment of the step; with "
               "--gpu-memory, the margin and whether it fits. The model is a preset "
               "(--preset NAME), a Megatron-LM launch (--megatron-args FILE --world-size N) "
               "or a Hugging Face config.json (--hf-config FILE --s N).")
"""``--help``'s text: plain text (the module docstring's markup would show)."""

MAX_INT_DIGITS = 30
"""Most digits an integer option takes (larger sizes describe no real model,
and Python cannot print integers of more than 4,300 digits)."""


def count(text: str) -> int:
    """argparse type of the integer options: decimal digits (any script's,
    as :func:`int` reads them), an optional sign, at most
    :data:`MAX_INT_DIGITS` digits; the model's own checks judge the value."""
    digits = text.strip().removeprefix("-").removeprefix("+")
    if not digits.isdecimal() or len(digits) > MAX_INT_DIGITS:
        shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"
        raise argparse.ArgumentTypeError(
            f"{shown!r} is not an integer of at most {MAX_INT_DIGITS} digits")
    return int(text)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``train`` subcommand on an argparse subparsers object."""
    p = subparsers.add_parser("train", help="peak training memory per GPU, per stage",
                              prog="actmem train", description=DESCRIPTION)
    source = p.add_mutually_exclusive_group()   # one is needed: job_cli.check
    source.add_argument("--preset", choices=[*PRESETS, *MOE_PRESETS],
                        help="published model shape (actmem.PRESETS, actmem.MOE_PRESETS); "
                             "or give --megatron-args or --hf-config")
    add_sources(p, source)
    p.add_argument("-s", "--s", type=count, help="sequence length (the preset's)")
    p.add_argument("-b", "--b", type=count, help="micro-batch size (the preset's: 1)")
    for name, help_ in (("t", "tensor-parallel size"), ("p", "pipeline stages"),
                        ("d", "data-parallel size"), ("m", "micro-batches per step")):
        p.add_argument(f"-{name}", f"--{name}", type=count, default=1, help=f"{help_} (1)")
    add_moe_options(p)
    add_levers(p)
    p.add_argument("--schedule", choices=SCHEDULES, default="1f1b", help="(1f1b)")
    p.add_argument("--v", type=count, default=1, help="model chunks per GPU, interleaved (1)")
    p.add_argument("--order", choices=ORDERS, default="megatron", help="(megatron)")
    p.add_argument("--sequence-parallel", action="store_true")
    p.add_argument("--flash-attention", action=argparse.BooleanOptionalAction,
                   help="fused attention, no s x s map kept (default: the preset's; "
                        "the LLaMA presets use it)")
    p.add_argument("--recompute", choices=RECOMPUTE, default="none", help="(none)")
    p.add_argument("--recompute-num-layers", type=count, default=1,
                   help="layers per checkpointed group, full recomputation (1)")
    p.add_argument("--recompute-modules", nargs="+", choices=MODULES, metavar="MODULE",
                   help="with --recompute selective, the modules recomputed (Megatron-LM's; "
                        "default core_attn): " + ", ".join(MODULES))
    p.add_argument("--accounting", choices=ACCOUNTINGS, default="megatron",
                   help="model-state bytes per parameter (megatron: 18)")
    p.add_argument("--zero-stage", type=count, default=0, help="ZeRO stage, accounting zero (0)")
    p.add_argument("--distributed-optimizer", action="store_true",
                   help="Megatron-LM's distributed optimizer (6 + 12/d bytes)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adam",
                   help="adam (12 bytes of states per parameter, default) or Megatron-LM's "
                        "muon (8 per matrix parameter; t=1, no distributed optimizer)")
    p.add_argument("--logits-bytes", type=count, default=4,
                   help="4 (fp32, default) or 2 (16-bit, with --loss torch)")
    p.add_argument("--loss", choices=LOSSES, default="vocab_parallel",
                   help="cross-entropy: Megatron-LM's vocab-parallel (default), PyTorch's "
                        "F.cross_entropy, or a fused loss that keeps no logits")
    p.add_argument("--gradient-buffer", choices=GRADIENT_BUFFERS, default="persistent",
                   help="gradients exist from the start (Megatron-LM, default) or from the "
                        "first backward pass (PyTorch, zero_grad(set_to_none=True))")
    p.add_argument("--no-attention-mask", dest="attention_mask", action="store_false",
                   help="the data loader sends no b*s*s attention mask (Megatron-LM's "
                        "--no-create-attention-mask-in-dataloader)")
    p.add_argument("--reserve", type=reserve, default="default",
                   help="'default' (with a GPU named: an estimate of the CUDA context, NCCL's "
                        "buffers and the allocator's gap; else 0), bytes or a size ('4GiB') "
                        "or a fraction of --gpu-memory ('0.05'); 0: the bare peak")
    p.add_argument("--gpu-memory", help="a GPU (" + ", ".join(repr(g) for g in GPUS) +
                   "; as its driver reports it), or a size: '80GiB' (2^30 B), '80GB' "
                   "(10^9 B, less than an 80GB GPU has)")
    p.add_argument("--timeline", action="store_true",
                   help="print every stage's events: what is alive when, in MiB")
    p.add_argument("--json", action="store_true", help="print bytes as JSON")
    return p


def add_moe_options(p: argparse.ArgumentParser) -> None:
    """An MoE preset's expert groups and token dispatcher, under
    Megatron-LM's flag names (``--ep`` and ``--etp`` are short for
    ``--expert-model-parallel-size`` and ``--expert-tensor-parallel-size``)."""
    p.add_argument("--ep", type=count, default=1,
                   help="expert-parallel size of an MoE preset (1; Megatron-LM's "
                        "--expert-model-parallel-size)")
    p.add_argument("--etp", type=count,
                   help="expert tensor-parallel size of an MoE preset (default t; "
                        "--expert-tensor-parallel-size)")
    p.add_argument("--moe-token-dispatcher-type", choices=DISPATCHERS,
                   help="an MoE preset's token dispatcher (the preset's: alltoall); flex is "
                        "DeepEP within one node, etp*ep = 2, 4 or 8")
    p.add_argument("--moe-flex-dispatcher-backend", choices=FLEX_BACKENDS,
                   help="the flex dispatcher's library (deepep; hybridep: etp*ep <= 8)")


def add_levers(p: argparse.ArgumentParser) -> None:
    """Context parallelism, FP8, activation offloading and LoRA options,
    under Megatron-LM's flag names (``--cp`` and ``--fp8`` are short for ``--context-parallel-size``
    and ``--fp8-format``); :func:`actmem.training_memory` judges how they
    combine."""
    p.add_argument("--cp", "--context-parallel-size", dest="cp", type=count, default=1,
                   help="context-parallel size (1): each rank runs s/cp tokens")
    p.add_argument("--cp-comm-type", choices=CP_COMM_TYPES, default="p2p",
                   help="context-parallel attention: p2p (ring, default), allgather, a2a "
                        "(Ulysses) or a2a+p2p (with --hierarchical-context-parallel-sizes)")
    p.add_argument("--hierarchical-context-parallel-sizes", nargs=2, type=count,
                   metavar=("A2A", "P2P"),
                   help="a2a+p2p: the all-to-all group's and the ring's sizes (product cp)")
    p.add_argument("--fp8", "--fp8-format", dest="fp8", choices=FP8_FORMATS,
                   help="Transformer Engine's FP8 linear layers (default off; no "
                        "multi-latent attention; cp 1 under delayed scaling)")
    p.add_argument("--fp8-recipe", choices=FP8_RECIPES, default="delayed",
                   help="FP8's scaling: delayed (default), tensorwise, blockwise or mxfp8 "
                        "(with --fp8)")
    p.add_argument("--cpu-offloading-num-layers", type=count, default=0,
                   help="the first n layers' saved tensors go to host memory (0; p 1, "
                        "no recomputation, 1f1b, dense presets)")
    p.add_argument("--lora-rank", type=count,
                   help="LoRA adapters of this rank on --lora-targets; the base is frozen")
    p.add_argument("--lora-targets", nargs="+", choices=LORA_TARGETS, metavar="MODULE",
                   help="modules given adapters (PEFT's or Megatron-Bridge's names): "
                        + ", ".join(LORA_TARGETS))


def reserve(text: str) -> int | float | str:
    """argparse type of ``--reserve``: ``'default'`` (the estimate,
    :mod:`actmem.run.reserve`), bytes (``'5'``), a fraction of the GPU
    (``'0.05'``) or a size (``'4GiB'``, :func:`actmem.parse_size`)."""
    plain = text.strip()
    if plain == "default":
        return plain
    if plain.isdecimal() and len(plain) <= MAX_INT_DIGITS:
        return int(plain)
    if re.fullmatch(r"\d{0,20}\.\d{1,20}", plain):
        return float(plain)
    try:
        return parse_size("--reserve", plain)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def model(args) -> ModelConfig:
    """The preset (or ``--hf-config``'s model, or ``--megatron-args``'s:
    :func:`actmem.views.job_cli.source_model`) with the options ``--s``,
    ``--b``, ``--flash-attention``,
    ``--lora-rank`` and ``--lora-targets`` applied; a learned position
    table keeps its rows whatever ``--s`` (as the planner's,
    :func:`actmem.views.fit_levers.job_model`), so a longer s than it has
    is refused."""
    from .fit_levers import job_model

    base = source_model(args)   # --megatron-args or --hf-config; None for a preset
    if base is None:
        preset = {**PRESETS, **MOE_PRESETS}[args.preset]
        s, b = (getattr(args, k, None) for k in ("s", "b"))
        base = job_model(preset, preset.s if s is None else s, preset.b if b is None else b)
    return base.with_(
        **{k: getattr(args, k) for k in ("flash_attention", "lora_rank",
                                          "moe_token_dispatcher_type",
                                          "moe_flex_dispatcher_backend")
           if getattr(args, k, None) is not None},
        **({"lora_targets": tuple(args.lora_targets)} if getattr(args, "lora_targets", None)
           else {}))


def compute(args) -> TrainingMemory:
    """:func:`training_memory` for the parsed ``args`` (a launch's job as it is)."""
    job = launch_job(args)
    if job is not None:
        return training_memory(job)
    return training_memory(
        model(args), t=args.t, p=args.p, d=args.d, ep=args.ep, etp=args.etp, m=args.m,
        schedule=args.schedule,
        v=args.v, order=args.order, sequence_parallel=args.sequence_parallel,
        recompute=args.recompute, recompute_num_layers=args.recompute_num_layers,
        accounting=args.accounting, zero_stage=args.zero_stage,
        distributed_optimizer=args.distributed_optimizer, optimizer=args.optimizer,
        logits_bytes=args.logits_bytes,
        reserve=args.reserve, gpu_memory=args.gpu_memory, loss=args.loss,
        gradient_buffer=args.gradient_buffer,
        create_attention_mask_in_dataloader=args.attention_mask, cp=args.cp,
        cp_comm_type=args.cp_comm_type,
        hierarchical_context_parallel_sizes=(None if args.hierarchical_context_parallel_sizes
                                             is None else
                                             tuple(args.hierarchical_context_parallel_sizes)),
        recompute_modules=args.recompute_modules, fp8=args.fp8, fp8_recipe=args.fp8_recipe,
        cpu_offloading_num_layers=args.cpu_offloading_num_layers)


def gpu_text(result: TrainingMemory, gpu=None, tr=None) -> str:
    """The GPU's capacity in GiB, with its name when ``gpu`` (the
    ``gpu_memory`` given to :func:`actmem.training_memory`) names a preset:
    ``'80 GiB (A100 80GB)'``; ``tr``: as in :func:`verdict`."""
    tr = translator() if tr is None else tr
    size = format_bytes(result.gpu_memory, "GiB")
    preset = find_gpu(gpu) if isinstance(gpu, str) else None
    return size if preset is None else tr("{size} ({gpu})").format(size=size, gpu=preset.name)


def verdict(result: TrainingMemory, tr=None, gpu=None) -> str:
    """One line: the most loaded stage's peak, the event that sets it, and
    (with a GPU) the margin and whether it fits; words translated by ``tr``
    (:mod:`actmem.language`; default: the current language, so a Chinese
    notebook prints it in Chinese, with the same numbers). ``gpu``: the
    ``gpu_memory`` argument, to name the GPU when it is a preset.

    The margin is the capacity less the peak and the reserve
    (:attr:`actmem.StageMemory.needed`); the default reserve is shown with
    its parts (:mod:`actmem.run.reserve`)."""
    from .printed import event_label

    tr = translator() if tr is None else tr
    top = result.most_loaded
    line = tr("most loaded: stage {stage}, peak {size} at '{event}'").format(
        stage=top.stage, size=format_bytes(top.peak, "GiB"),
        event=event_label(top.timeline.peak.label, tr))
    if top.reserve_parts is not None:
        parts = top.reserve_parts
        if parts.deepep:   # the flex dispatcher's buffers
            template = tr(" + reserve {size} (driver {driver}, CUDA context {context}, "
                          "NCCL {nccl}, DeepEP {deepep}, allocator {allocator} GiB)")
        else:
            template = tr(" + reserve {size} (driver {driver}, CUDA context {context}, "
                          "NCCL {nccl}, allocator {allocator} GiB)")
        line += template.format(
            size=format_bytes(top.reserve, "GiB"), driver=format_value(parts.driver, "GiB"),
            context=format_value(parts.cuda_context, "GiB"),
            nccl=format_value(parts.nccl, "GiB"), deepep=format_value(parts.deepep, "GiB"),
            allocator=format_value(parts.allocator, "GiB"))
    elif top.reserve:
        line += tr(" + reserve {size}").format(size=format_bytes(top.reserve, "GiB"))
    if result.gpu_memory is None:
        return line + tr(" (give --gpu-memory for a verdict)")
    word = tr("fits") if result.fits else tr("DOES NOT FIT")
    return tr("{line}, of {gpu}: margin {margin} GiB, {verdict}").format(
        line=line, gpu=gpu_text(result, gpu, tr),
        margin=margin_gib(result.margin).lstrip("+"), verdict=word)


def margin_gib(margin: int) -> str:
    """The signed margin in GiB with as many decimals (2 to 20) as it takes
    for a non-zero margin not to read ``'0'``: ``'-0.0000000009'`` for one
    byte short."""
    for digits in range(2, 21):
        text = format_change(margin, "GiB", digits)
        if text != "0":
            return text
    return text


def table(result: TrainingMemory, gpu=None, tr=None) -> str:
    """Parts (rows) by stage (columns) in MiB (the default reserve's parts,
    :class:`actmem.run.reserve.ReserveParts`, under it), their sum, the peak, the
    host memory of offloaded layers (when there is any), then the verdict
    (``gpu`` and ``tr``: as in :func:`verdict`; labels are padded by display
    width, so that Chinese ones line up too)."""
    from .printed import pad

    tr = translator() if tr is None else tr
    lines = [pad(tr("part (MiB per GPU)"), 24) + "".join(
        pad(tr("stage {i}").format(i=s.stage), 12, ">") for s in result.stages)]
    for part in PARTS:
        lines.append(pad(tr(part.replace("_", " ")), 24) + "".join(
            f"{format_value(s.parts[part]):>12}" for s in result.stages))
    if all(s.reserve_parts is not None for s in result.stages):  # the default's parts
        deepep = any(s.reserve_parts.deepep for s in result.stages)
        for label, key in ((tr("  driver-reserved"), "driver"), (tr("  CUDA context"), "cuda_context"),
                           (tr("  NCCL buffers"), "nccl"),
                           *[(tr("  DeepEP buffers"), "deepep")] * deepep,
                           (tr("  allocator gap"), "allocator")):
            lines.append(pad(label, 24) + "".join(
                f"{format_value(getattr(s.reserve_parts, key)):>12}" for s in result.stages))
    rows = (("sum of the parts", lambda s: s.total - s.reserve),   # the reserve apart, as
            ("peak (one moment)", lambda s: s.peak))                  # the peak leaves it out
    if any(s.host_memory for s in result.stages):  # pinned host buffers of offloaded layers
        rows += (("host memory (offload)", lambda s: s.host_memory),)
    for name, value in rows:
        lines.append(pad(tr(name), 24) + "".join(
            f"{format_value(value(s)):>12}" for s in result.stages))
    return "\n".join(lines + [verdict(result, tr, gpu)])


def communicators_text(stage: StageMemory, tr=None) -> str:
    """The NCCL communicators whose buffers the default reserve counted on
    ``stage`` (:func:`actmem.run.reserve.communicators`), named in the
    language of ``tr`` (default the current one); empty without them."""
    tr = translator() if tr is None else tr
    names = {"tensor": tr("tensor-parallel group"), "data": tr("data-parallel group"),
             "gradient norm": tr("gradient-norm group"), "pipeline": tr("pipeline neighbours"),
             "embedding": tr("embedding group"), "context": tr("context-parallel group"),
             "expert": tr("expert-parallel group"), "expert tensor": tr("expert tensor group"),
             "expert data": tr("expert data group"),
             "expert gradient norm": tr("expert gradient-norm group"),
             "fp8 amax": tr("FP8 amax group")}
    used = stage.reserve_parts.communicators if stage.reserve_parts else ()
    comma = "、" if tr("tensor-parallel group") != "tensor-parallel group" else ", "
    return tr("NCCL communicators counted: {names}").format(
        names=comma.join(names[n] for n in used)) if used else ""


def timeline_text(stage: StageMemory, tr=None) -> str:
    """One stage's events, one line each: the operation (``F3``, ``B0``;
    blank before the step and for the optimizer), the total and each
    category (:data:`actmem.CATEGORIES`) in MiB, and the event's label;
    ``*`` marks the peak event. Words translated by ``tr`` (default: the
    current language)."""
    from .printed import event_label, pad

    tr = translator() if tr is None else tr
    peak = stage.timeline.peak
    head = (f"  {'op':<6}" + pad(tr("total"), 11, ">")
            + "".join(pad(tr(c), 13, ">") for c in CATEGORIES) + "  " + tr("event"))
    lines = [tr("stage {stage}: {events} events, MiB per GPU (* peak: {peak})").format(
        stage=stage.stage, events=len(stage.timeline.events),
        peak=format_bytes(stage.peak, "GiB")), head]
    for event in stage.timeline.events:
        mark = "*" if event is peak else " "
        lines.append(f"{mark} {event.op:<6}{format_value(event.total):>11}" + "".join(
            f"{format_value(b):>13}" for b in event.bytes) + f"  {event_label(event.label, tr)}")
    return "\n".join(lines)


def render(args, result: TrainingMemory) -> str:
    """The run in one line, then :func:`table`; with ``--timeline`` every
    stage's :func:`timeline_text` before the verdict's table. Words in the
    current language (``--lang``)."""
    timelines = ([timeline_text(s) for s in result.stages]
                 if getattr(args, "timeline", False) else [])
    return "\n".join([f"{name(args)}: t={args.t} p={args.p} d={args.d} m={args.m} "
                      f"{args.schedule} v={args.v}" + levers_text(args), *timelines,
                      table(result, args.gpu_memory)])


def levers_text(args) -> str:
    """The levers set away from their defaults, as the run line shows them:
    ``' cp=4 a2a fp8=hybrid'`` (empty when none is)."""
    cp = getattr(args, "cp", 1)
    parts = [f"cp={cp} {args.cp_comm_type}" if cp != 1 else "",
             f"fp8={args.fp8}" if getattr(args, "fp8", None) else "",
             f"fp8_recipe={args.fp8_recipe}" if getattr(args, "fp8_recipe", "delayed")
             != "delayed" else "",
             f"dispatcher={args.moe_token_dispatcher_type}"
             if getattr(args, "moe_token_dispatcher_type", None) else "",
             f"backend={args.moe_flex_dispatcher_backend}"
             if getattr(args, "moe_flex_dispatcher_backend", None) else "",
             "recompute_modules=" + ",".join(args.recompute_modules)
             if getattr(args, "recompute_modules", None) else "",
             f"lora_rank={args.lora_rank}" if getattr(args, "lora_rank", None) else ""]
    return "".join(" " + x for x in parts if x)


def _option_names() -> list[str]:
    """The ``train`` subcommand's own options (``args`` also carries the table's)."""
    sub = argparse.ArgumentParser().add_subparsers()
    return [a.dest for a in add_parser(sub)._actions if a.dest != "help"]


def _events(stage: StageMemory) -> list[dict]:
    return [{"label": e.label, "op": e.op, "moment": e.moment, "total": e.total,
             "bytes": e.by_category} for e in stage.timeline.events]


def as_json(args, result: TrainingMemory) -> str:
    """Bytes per part and stage with each stage's peak, its event and every
    event (label, op, moment, total and bytes by category), the most loaded
    stage and the verdict."""
    gpu = find_gpu(args.gpu_memory) if args.gpu_memory else None
    shape = dataclasses.asdict(model(args))
    options = {k: getattr(args, k) for k in _option_names() if k not in ("json", "timeline")}
    return json.dumps({
        "unit": "bytes", "config": {**options, **{k: shape[k] for k in ("s", "b",
                                                                          "flash_attention")}},
        "model": shape,
        "stages": [{**s.parts, "total": s.total, "peak": s.peak, "needed": s.needed,
                    "host_memory": s.host_memory,
                    "peak_event": s.timeline.peak.label, "events": _events(s)}
                   for s in result.stages],
        "most_loaded": result.most_loaded.stage, "gpu_memory": result.gpu_memory,
        "gpu": gpu and gpu.name, "margin": result.margin, "fits": result.fits,
        **job_json(args)}, indent=2)

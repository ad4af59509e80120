"""``python -m actmem train``: a GPU's peak training memory, stage by stage.

Prints, for every pipeline stage, each part of :func:`actmem.training_memory`
in MiB and the total; with ``--gpu-memory`` the margin of the most loaded
stage and a fits / does-not-fit verdict. ``--json`` prints bytes.
"""

from __future__ import annotations

import argparse
import json

from ..language import english
from ..layer.config import RECOMPUTE
from ..run.peak import PARTS, TrainingMemory, training_memory
from ..run.presets import PRESETS, preset
from ..run.schedules import ORDERS, SCHEDULES
from ..run.states import ACCOUNTINGS
from ..units import format_bytes, format_change, format_value, parse_size


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``train`` subcommand on an argparse subparsers object."""
    p = subparsers.add_parser("train", help="peak training memory per GPU, per stage",
                              description=__doc__.splitlines()[0])
    p.add_argument("--preset", required=True, choices=list(PRESETS),
                   help="published model shape (actmem.PRESETS)")
    p.add_argument("-s", "--s", type=int, help="sequence length (the preset's)")
    p.add_argument("-b", "--b", type=int, help="micro-batch size (the preset's: 1)")
    for name, help_ in (("t", "tensor-parallel size"), ("p", "pipeline stages"),
                        ("d", "data-parallel size"), ("m", "micro-batches per step")):
        p.add_argument(f"-{name}", f"--{name}", type=int, default=1, help=f"{help_} (1)")
    p.add_argument("--schedule", choices=SCHEDULES, default="1f1b", help="(1f1b)")
    p.add_argument("--v", type=int, default=1, help="model chunks per GPU, interleaved (1)")
    p.add_argument("--order", choices=ORDERS, default="megatron", help="(megatron)")
    p.add_argument("--sequence-parallel", action="store_true")
    p.add_argument("--flash-attention", action="store_true")
    p.add_argument("--recompute", choices=RECOMPUTE, default="none", help="(none)")
    p.add_argument("--recompute-num-layers", type=int, default=1,
                   help="layers per checkpointed group, full recomputation (1)")
    p.add_argument("--accounting", choices=ACCOUNTINGS, default="megatron",
                   help="model-state bytes per parameter (megatron: 18)")
    p.add_argument("--zero-stage", type=int, default=0, help="ZeRO stage, accounting zero (0)")
    p.add_argument("--distributed-optimizer", action="store_true",
                   help="Megatron-LM's distributed optimizer (6 + 12/d bytes)")
    p.add_argument("--logits-bytes", type=int, default=4, help="4 (fp32, default) or 2")
    p.add_argument("--reserve", default="0",
                   help="bytes or a size ('4GiB') or a fraction of --gpu-memory ('0.05')")
    p.add_argument("--gpu-memory", help="capacity: '80GB' (10^9 B) or '80GiB' (2^30 B)")
    p.add_argument("--json", action="store_true", help="print bytes as JSON")
    return p


def _reserve(text: str) -> int | float:
    if "." in text and text.replace(".", "", 1).isdigit():
        return float(text)
    return 0 if text == "0" else parse_size("reserve", text)


def compute(args) -> TrainingMemory:
    """:func:`training_memory` for the parsed ``args``."""
    model = preset(args.preset).with_(
        **{k: getattr(args, k) for k in ("s", "b") if getattr(args, k) is not None},
        flash_attention=args.flash_attention)
    return training_memory(
        model, t=args.t, p=args.p, d=args.d, m=args.m, schedule=args.schedule, v=args.v,
        order=args.order, sequence_parallel=args.sequence_parallel,
        recompute=args.recompute, recompute_num_layers=args.recompute_num_layers,
        accounting=args.accounting, zero_stage=args.zero_stage,
        distributed_optimizer=args.distributed_optimizer, logits_bytes=args.logits_bytes,
        reserve=_reserve(args.reserve), gpu_memory=args.gpu_memory)


def verdict(result: TrainingMemory, tr=english) -> str:
    """One line: the most loaded stage against the GPU's capacity; words
    translated by ``tr`` (:mod:`actmem.language`; default English)."""
    top = result.most_loaded
    line = tr("most loaded: stage {stage}, {size}").format(
        stage=top.stage, size=format_bytes(top.total, "GiB"))
    if result.gpu_memory is None:
        return line + tr(" (give --gpu-memory for a verdict)")
    word = tr("fits") if result.fits else tr("DOES NOT FIT")
    return tr("{line} of {gpu}: margin {margin} GiB, {verdict}").format(
        line=line, gpu=format_bytes(result.gpu_memory, "GiB"),
        margin=format_change(result.margin, "GiB").lstrip("+"), verdict=word)


def table(result: TrainingMemory) -> str:
    """Parts (rows) by stage (columns) in MiB, the totals, then the verdict."""
    lines = [f"{'part (MiB per GPU)':<24}" + "".join(
        f"{'stage ' + str(s.stage):>12}" for s in result.stages)]
    for part in PARTS:
        lines.append(f"{part.replace('_', ' '):<24}" + "".join(
            f"{format_value(s.parts[part]):>12}" for s in result.stages))
    lines.append(f"{'total':<24}" + "".join(
        f"{format_value(s.total):>12}" for s in result.stages))
    return "\n".join(lines + [verdict(result)])


def render(args, result: TrainingMemory) -> str:
    """The run in one line, then :func:`table`."""
    return (f"{args.preset}: t={args.t} p={args.p} d={args.d} m={args.m} "
            f"{args.schedule} v={args.v}\n{table(result)}")


def as_json(args, result: TrainingMemory) -> str:
    """Bytes per part and stage, the most loaded stage and the verdict."""
    return json.dumps({
        "unit": "bytes", "config": {k: v for k, v in vars(args).items()
                                    if k not in ("json", "command")},
        "stages": [{**s.parts, "total": s.total} for s in result.stages],
        "most_loaded": result.most_loaded.stage, "gpu_memory": result.gpu_memory,
        "margin": result.margin, "fits": result.fits}, indent=2)

"""``python -m actmem.measure``: ledger bytes against measured bytes.

Measures the reference layer (and, with ``--variant``, ledger variants) at
each tensor-parallel size (default t = 1 and, on two real gloo ranks,
t = 2) and prints, per ledger row, the ledger's and the measured bytes on
every rank, then the extras. ``--json`` prints the same as JSON.

``python -m actmem.measure pipeline`` runs GPipe, 1F1B, interleaved 1F1B and
PyTorch's newer schedules (interleaved zero-bubble, ZBV, DualPipeV, looped
BFS) on PyTorch's pipeline engine (p = 2 and 4 gloo processes) and prints, per
stage, the peak saved bytes, one micro-batch's bytes, their ratio and the
simulated peak in flight (:mod:`.pipeline`); ``--json`` as JSON.

``python -m actmem.measure step [--config NAME ...]`` trains one step of a
small GPT per configuration (:mod:`.step`) and prints the peak measured by
PyTorch's MemTracker and by actmem's live-storage counter beside
``training_memory``'s timeline peak, the event that sets each, and their
relative difference; ``--json`` prints the bytes (the stored copy is
``actmem/data/step_measured.json``). ``--device cuda`` runs them on a CUDA GPU
and compares with ``torch.cuda.max_memory_allocated()`` (:mod:`.step_device`).

``python -m actmem.measure fsdp`` trains one step of a small untied GPT under
PyTorch's FSDP2 (``fully_shard``) on 2 gloo processes and prints
FSDPMemTracker's peak beside ``training_memory(use_torch_fsdp2=True)``'s
(:mod:`.fsdp`); ``--json`` as JSON.
"""

from __future__ import annotations

import argparse
import json

from .report import as_dict, extras_table, table
from .variants import SMALL, VARIANTS, measure_variants


SIZE_MAX = {"s": 4096, "b": 64, "h": 4096, "a": 64}
"""Largest value of each size ``--s``, ``--b``, ``--h``, ``--a`` takes (the
layer then still has to fit :data:`LAYER_BYTES_MAX`)."""

T_MAX = 8
"""Most tensor-parallel ranks ``--t`` takes: each is a CPU process (:mod:`.launch`)."""

LAYER_BYTES_MAX = 2**30
"""Most bytes the measured layer may hold (:func:`layer_bytes`), 1 GiB: one
process runs it in CPU memory, and the variants hold a few times more."""


def layer_bytes(s: int, b: int, h: int, a: int) -> int:
    """Bytes the paper's layer holds at t = 1 (every rank holds at most
    these): its saved activations ``sbh(34 + 5as/h)`` (Korthikanti et al.
    2022, sec. 4.1, eq. 1) and its 12h^2 weights, made in fp32 (4 bytes).

    >>> layer_bytes(32, 2, 64, 4)   # SMALL
    376832
    """
    return 34 * s * b * h + 5 * a * s * s * b + 4 * 12 * h * h


def whole_number(largest: int):
    """An argparse ``type``: an integer from 1 to ``largest``; anything else
    is argparse's error naming the option (``argument --s: ...``)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if not 1 <= value <= largest:
            raise argparse.ArgumentTypeError(f"must be an integer from 1 to {largest}, "
                                             f"got {text!r}")
        return value
    return parse


def check_layer_size(parser: argparse.ArgumentParser, args) -> None:
    """Refuse, with argparse's error (exit status 2), sizes whose layer
    holds more than :data:`LAYER_BYTES_MAX` (:func:`layer_bytes`)."""
    held = layer_bytes(args.s, args.b, args.h, args.a)
    if held > LAYER_BYTES_MAX:
        parser.error(f"argument --s/--b/--h/--a: the layer at s={args.s}, b={args.b}, "
                     f"h={args.h}, a={args.a} holds {held / 2**30:.1f} GiB (sbh(34 + "
                     f"5as/h) activations and 12h^2 fp32 weights), more than the "
                     f"{LAYER_BYTES_MAX // 2**30} GiB this measurement allows; lower s "
                     f"(the attention maps grow as s^2), b, h or a")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m actmem.measure",
                                description=__doc__.splitlines()[0])
    for sym, help_ in (("s", "sequence length"), ("b", "micro-batch size"),
                       ("h", "hidden size"), ("a", "attention heads")):
        p.add_argument(f"--{sym}", type=whole_number(SIZE_MAX[sym]), default=SMALL[sym],
                       help=f"{help_} ({SMALL[sym]}; at most {SIZE_MAX[sym]}, and the "
                       f"layer at most {LAYER_BYTES_MAX // 2**30} GiB)")
    p.add_argument("--t", type=whole_number(T_MAX), nargs="+", default=[1, 2],
                   help=f"tensor-parallel sizes, one process per rank (1 2; at most {T_MAX})")
    p.add_argument("--variant", nargs="+", default=["paper"],
                   choices=list(VARIANTS), help="layers to measure (paper)")
    p.add_argument("--json", action="store_true", help="print bytes as JSON")
    sub = p.add_subparsers(dest="command")  # argparse lists every subcommand
    pipe = sub.add_parser("pipeline", help="pipeline schedules on PyTorch's engine",
                          description="Per pipeline stage: peak saved bytes over one "
                          "micro-batch's bytes, against actmem.simulate_schedule.")
    pipe.add_argument("--json", action="store_true", help="print bytes as JSON")
    step = sub.add_parser("step", help="one training step against the timeline",
                          description="One training step (forward, backward, Adam) "
                          "per configuration: measured peaks against "
                          "training_memory's stage-0 timeline.")
    step.add_argument("--json", action="store_true", help="print bytes as JSON")
    step.add_argument("--config", nargs="+", default=None, metavar="NAME",
                      help="configurations to measure (default: all that run on the device)")
    step.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                      help="where to run: cpu (MemTracker), or cuda (also "
                      "torch.cuda.max_memory_allocated(), with the GPU's workspaces)")
    fsdp = sub.add_parser("fsdp", help="FSDP2 (fully_shard) on 2 gloo ranks",
                          description="One FSDP2 training step on 2 gloo CPU ranks: "
                          "FSDPMemTracker's peak against training_memory(use_torch_fsdp2=True).")
    fsdp.add_argument("--json", action="store_true", help="print bytes as JSON")
    return p


def step_main(args) -> int:
    """``python -m actmem.measure step [--json] [--config NAME ...] [--device D]``."""
    from .step import CONFIGS, measurement, step_table

    unknown = [n for n in args.config or () if n not in CONFIGS]
    if unknown:
        raise SystemExit(f"python -m actmem.measure step: error: unknown configuration "
                         f"{unknown[0]!r}; choose from {', '.join(CONFIGS)}")
    try:
        data = measurement(args.config, args.device)
    except ValueError as err:
        raise SystemExit(f"python -m actmem.measure step: error: {err}") from None
    print(json.dumps(data, indent=1) if args.json else step_table(data))
    return 0


def pipeline_main(args) -> int:
    """``python -m actmem.measure pipeline [--json]``."""
    from ..views.pipeline_measured import measurement_table
    from .pipeline import measurement

    data = measurement()
    print(json.dumps(data, indent=1) if args.json else measurement_table(data))
    return 0 if all(stage["agrees"] for stage in data["stages"]) else 1


def fsdp_main(args) -> int:
    """``python -m actmem.measure fsdp [--json]``: exit 1 if a run with the
    in-place reduce-scatter differs from the timeline by 1 % or more."""
    from .fsdp import fsdp_table, measurement

    data = measurement()
    print(json.dumps(data, indent=1) if args.json else fsdp_table(data))
    return 0 if all(abs(r["relative_difference"]) < 0.01 for r in data["runs"]
                    if r["reduce_scatter"] == "in place") else 1


def collect(args) -> dict:
    """``{variant: {t: [comparison per rank]}}`` for the parsed ``args``."""
    sizes = {k: getattr(args, k) for k in SMALL}
    by_t = {t: measure_variants(args.variant, t, **sizes) for t in args.t}
    return {v: {t: by_t[t][v] for t in args.t} for v in args.variant}


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_layer_size(parser, args)
    if args.command == "pipeline":
        return pipeline_main(args)
    if args.command == "step":
        return step_main(args)
    if args.command == "fsdp":
        return fsdp_main(args)
    try:
        results = collect(args)
    except (TypeError, ValueError) as err:
        raise SystemExit(f"python -m actmem.measure: error: {err}") from None
    if args.json:
        print(json.dumps({
            "config": {k: getattr(args, k) for k in SMALL},
            "variants": {v: {f"t={t}": [as_dict(c) for c in ranks]
                             for t, ranks in per_t.items()}
                         for v, per_t in results.items()},
        }, indent=1))
        return 0
    for v, per_t in results.items():
        print(f"{v}: {VARIANTS[v].title} (bytes)\n{table(per_t)}\n")
        print(f"extras on rank 0 at t={max(per_t)}:\n"
              f"{extras_table(per_t[max(per_t)][0])}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

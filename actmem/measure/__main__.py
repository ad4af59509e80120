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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m actmem.measure",
                                description=__doc__.splitlines()[0])
    for sym, help_ in (("s", "sequence length"), ("b", "micro-batch size"),
                       ("h", "hidden size"), ("a", "attention heads")):
        p.add_argument(f"--{sym}", type=int, default=SMALL[sym],
                       help=f"{help_} ({SMALL[sym]})")
    p.add_argument("--t", type=int, nargs="+", default=[1, 2],
                   help="tensor-parallel sizes, one process per rank (1 2)")
    p.add_argument("--variant", nargs="+", default=["paper"],
                   choices=list(VARIANTS), help="layers to measure (paper)")
    p.add_argument("--json", action="store_true", help="print bytes as JSON")
    sub = p.add_subparsers(dest="command", metavar="{pipeline,step}")
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
    args = build_parser().parse_args(argv)
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

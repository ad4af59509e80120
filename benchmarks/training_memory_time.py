"""How long one training_memory call takes, for every preset (issue 43's goal:
within 50 ms), each in a fresh process so that no result is kept from before.

For each dense and MoE preset it times ``actmem.training_memory`` of the
preset's default job (one GPU, Megatron-LM's defaults), after a warm-up call on
another model (GPT-2 large at s=128) so that imports are not counted. Prints
the median of ``--repeats`` cold calls per preset.

    .venv/bin/python benchmarks/training_memory_time.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
import actmem
name, moe = sys.argv[1], sys.argv[2] == "moe"
presets = actmem.MOE_PRESETS if moe else actmem.PRESETS
actmem.training_memory(actmem.PRESETS["gpt2-large"].with_(s=128))   # warm-up: another model
model = presets[name]
start = time.perf_counter()
result = actmem.training_memory(model)
print(json.dumps({"ms": 1e3 * (time.perf_counter() - start),
                  "peak": result.stages[-1].peak}))
"""


def one(name: str, kind: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, name, kind], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import actmem
    rows = [(n, "dense") for n in actmem.PRESETS] + [(n, "moe") for n in actmem.MOE_PRESETS]
    worst = 0.0
    for name, kind in rows:
        times = [one(name, kind)["ms"] for _ in range(args.repeats)]
        median = statistics.median(times)
        worst = max(worst, median)
        runs = ", ".join(f"{t:.1f}" for t in times)
        print(f"{kind:5} {name:24} median {median:7.1f} ms  ({runs})")
    print(f"slowest preset: {worst:.1f} ms (goal: 50 ms) -> {'ok' if worst <= 50 else 'MISSED'}")


if __name__ == "__main__":
    main()

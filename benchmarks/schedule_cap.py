"""What the timing simulation costs past its cap (issue 21, item 11).

``simulate_schedule`` refuses ``3*p*m*v`` above
:data:`actmem.run.schedule.schedule_rules.MAX_OPERATIONS`. This script lifts the cap
in its own process, builds a GPipe schedule of the given size and times the
simulation and ``bubble_fraction()`` (wall and CPU seconds, and the peak
resident memory), so that the cap can be judged on numbers.

Run: ``.venv/bin/python benchmarks/schedule_cap.py 1500000 10000000``.
"""

import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from actmem.run.schedule import schedule_rules, schedules  # noqa: E402


def measure(operations: int, p: int = 100) -> dict:
    """Seconds and memory for GPipe at ``p`` stages and ``m`` micro-batches
    such that ``3*p*m = operations`` (the cap's measure; ``2*p*m`` are run)."""
    m = operations // (3 * p)
    schedule_rules.MAX_OPERATIONS = 3 * p * m
    wall, cpu = time.perf_counter(), time.process_time()
    schedule = schedules.simulate_schedule("gpipe", p, m)
    built = time.perf_counter() - wall, time.process_time() - cpu
    wall, cpu = time.perf_counter(), time.process_time()
    bubble = schedule.bubble_fraction()
    timed = time.perf_counter() - wall, time.process_time() - cpu
    return {"p": p, "m": m, "cap measure": 3 * p * m, "operations run": 2 * p * m,
            "simulate wall/cpu s": [round(x, 1) for x in built],
            "bubble wall/cpu s": [round(x, 1) for x in timed], "bubble": str(bubble),
            "max RSS MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


if __name__ == "__main__":
    for size in map(int, sys.argv[1:]):
        print(measure(size), flush=True)

"""Widget latency in a real browser: control change -> readout / figure in the DOM.

Starts one ``jupyter lab`` (127.0.0.1, temporary copy of notebooks/) and one
headless Debian Chromium, like tests/browser/. For every widget output of
every notebook it changes each kind of control (dropdown, checkbox, toggle
buttons, ...) ``--changes`` times as a person would, and measures inside the
page (performance.now()):

* readout: from the user's input event on the control to the last change of
  a readout's text (Label/HTML) -- the moment every readout shows its new
  value;
* figure: from the same event to the last change of an <img> src inside the
  output (the new PNG is in the DOM).

Kernel websockets run with Nagle's algorithm off (tests/browser/nodelay.py:
stock Jupyter Server leaves it on, and a readout written a few milliseconds
after the kernel's "busy" status can then wait about 40 ms for the
browser's delayed ACK); ``--stock-server`` measures them as shipped.

In the same run it measures the floor: one control of each kind observed
by a no-op that only echoes the value into a Label. Each widget output is
set against a floor of its own: the no-op, shown first by the output's own
cell (the floor's code put before the cell's), changed alternately with the
output's controls, a floor change of the same kind before each change (the
round trip drifts by 10 ms and more over a run on a shared machine, and a
long notebook makes every round trip slower). In the same cell, so that a
click on either does not make another cell the active one, which costs
JupyterLab about 55 ms of the page's time (a checkbox floor of 71 ms
against 16 ms in the same cell, notebook 09). A notebook of its own
measures the floor before and after the notebooks too (drift check, and the
summary over all notebooks). readout/floor says how much of the latency is
actmem's work (compute, draw, PNG) rather than the round trip.

Inside each kernel ``kernel_clock.py`` (an IPython startup script) times
actmem's own part: from the kernel's handling of the widget message to the
readouts' write (``kernel_readout``, per explorer and kind), and the
kernel's CPU time over that span (``kernel_readout_cpu``).

A change that brings back control settings the output has shown before is a
revisit: the explorer may send the image it kept (``IMAGES_KEPT``) without
drawing, so figure medians are also given over first visits only.

Writes JSON (default artifacts/latency.json) and prints a summary. Every
readout reached after a change is also checked against actmem's pure
functions (tests/browser/oracles.py); mismatches are counted in the JSON.

    .venv/bin/python benchmarks/widget_latency.py [--changes 20] [--out PATH]
        [--notebooks 04_worked_example.ipynb ...] [--stock-server]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "browser"))

import oracles  # noqa: E402
from jlab import (ARTIFACTS, CHROMIUM, UNSUPPORTED, Browser, LabServer,  # noqa: E402
                  NotebookPage, change_control, copy_notebooks, notebook_paths,
                  percentile, probe_explorers, widget_model_ids)

FLOOR_NOTEBOOK = "_latency_floor.ipynb"
FLOOR_CODE = '''def _latency_floor():  # a function: the notebook's own names stay untouched
    import ipywidgets as w
    from IPython.display import display

    echo = w.Label()
    controls = [w.Dropdown(options=list(range(20)), value=0, description="dropdown"),
                w.Checkbox(value=False, description="checkbox"),
                w.ToggleButtons(options=["x", "y", "z"], value="x", description="toggle"),
                w.IntSlider(value=0, min=0, max=100, description="slider")]

    def noop(change):  # the floor: nothing computed, the value echoed back
        echo.value = f"{change['owner'].description} = {change['new']}"

    for c in controls:
        c.observe(noop, names="value")
    display(w.VBox([*controls, echo]))


_latency_floor()
'''
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def write_floor_notebook(folder: Path) -> str:
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(FLOOR_CODE)]
    nbformat.write(nb, str(folder / FLOOR_NOTEBOOK))
    return FLOOR_NOTEBOOK


def add_floors(path: Path) -> set[int]:
    """Make each cell of the notebook at ``path`` whose stored outputs show
    widgets show the floor's controls first (its first output); returns the
    indices of those cells."""
    import nbformat
    nb = nbformat.read(str(path), as_version=4)
    floors = set()
    for i, cell in enumerate(nb.cells):
        if any(WIDGET_VIEW in o.get("data", {}) for o in cell.get("outputs", [])):
            if cell.source.startswith("%%"):
                raise ValueError(f"{path.name} cell {i}: a cell magic must stay first")
            cell.source = FLOOR_CODE + "\n" + cell.source
            floors.add(i)
    nbformat.write(nb, str(path))
    return floors


class KernelClock:
    """The kernels' own times (``kernel_clock.py``), read as they are written."""

    def __init__(self, path: Path):
        self.path, self.offset = path, 0
        path.write_text("")
        os.environ["ACTMEM_KERNEL_CLOCK"] = str(path)  # the server's kernels inherit it

    def install(self, server: LabServer) -> None:
        """Put the startup script in ``server``'s IPython profile (before it starts)."""
        startup = server.home / "ipython" / "profile_default" / "startup"
        startup.mkdir(parents=True, exist_ok=True)
        shutil.copy(HERE / "kernel_clock.py", startup / "00-kernel-clock.py")

    def readouts_ms(self) -> tuple[float | None, float | None]:
        """The longest time to the readouts' write among the messages handled
        since the last call, and the kernel's CPU time in that one (None: no
        readout written)."""
        with open(self.path) as f:
            f.seek(self.offset)
            lines = f.readlines()
            self.offset = f.tell()
        times = [json.loads(line) for line in lines]
        written = [(t["readouts_ms"], t["readouts_cpu_ms"]) for t in times
                   if t["readouts_ms"] is not None]
        return max(written, default=(None, None))


def settle(nb: NotebookPage, timeout_s=20.0, quiet_ms=400.0) -> dict:
    """Wait until the probe saw a readout change and, in an output with an
    image, an image change, and nothing in the output changed for
    ``quiet_ms``; a change may leave every readout or the image as it was:
    then stop after 2 s of quiet. (Waiting for the readout only let a figure
    slower than ``quiet_ms`` land in the next change's window, before its
    input event.) The page waits (``__actmem.settle``): polling it from here
    every 50 ms took about 5 ms of CPU per poll (Python, Playwright's
    driver, Chromium) from the machine the kernel and the page share."""
    return nb.page.evaluate("([q, u, t]) => window.__actmem.settle(q, u, t)",
                            [quiet_ms, 2000, timeout_s * 1000])


def measure_change(nb, root, index, step, clock: KernelClock) -> dict:
    nb.page.evaluate("([c, o]) => window.__actmem.arm(c, o)", [root.cell, root.output])
    clock.readouts_ms()  # skip what came before the change
    change_control(nb, root, index, step=step)
    p = settle(nb)
    kernel_ms, kernel_cpu_ms = clock.readouts_ms()
    out = {"readout_ms": None, "figure_ms": None, "kernel_ms": kernel_ms,
           "kernel_cpu_ms": kernel_cpu_ms}
    if p["t0"] is None:
        return out
    # a change seen before the input event is the previous change's, late
    rs = [t for t in p["readout"] if t is not None and t >= p["t0"]]
    im = [t for t in p["image"] if t is not None and t >= p["t0"]]
    if rs:
        out["readout_ms"] = max(rs) - p["t0"]
    if im:
        out["figure_ms"] = max(im) - p["t0"]
    return out


def summary(values) -> dict | None:
    xs = [v for v in values if v is not None]
    if not xs:
        return None
    return {"n": len(xs), "median_ms": round(statistics.median(xs), 1),
            "p95_ms": round(percentile(xs, 95), 1), "min_ms": round(min(xs), 1),
            "max_ms": round(max(xs), 1)}


def control_kinds(root) -> dict[str, list[int]]:
    """Kind of control -> the indices of ``root``'s controls of that kind."""
    kinds: dict[str, list[int]] = {}
    for i, c in enumerate(root.controls):
        if c["kind"] not in UNSUPPORTED:
            kinds.setdefault(c["kind"], []).append(i)
    return kinds


def run_root(nb, root, info, changes: int, log, clock: KernelClock, floor=None) -> dict:
    """``changes`` changes per kind of control in one widget output, each
    after a change of the same kind in the ``floor`` output (if it has one)."""
    floor_kinds = control_kinds(floor) if floor is not None else {}
    result, seen = {}, set()  # control settings this output has shown
    for kind, indices in control_kinds(root).items():
        samples, floors, mismatched = [], [], 0
        for n in range(changes):
            if kind in floor_kinds:
                floors.append(measure_change(nb, floor, floor_kinds[kind][0], 1, clock))
            index = indices[n % len(indices)]
            s = measure_change(nb, root, index, step=1, clock=clock)
            s["control"] = root.controls[index]["description"]
            state = nb.state(root)
            setting = json.dumps(state["controls"], sort_keys=True, default=str)
            s["revisit"] = setting in seen  # the explorer may send a kept image
            seen.add(setting)
            if info and info["cls"] in oracles.ORACLES:
                try:
                    exp = oracles.expected(info, state["controls"])
                    if oracles.mismatches(info, exp, state["named"]):
                        mismatched += 1
                except (ValueError, TypeError, LookupError):
                    mismatched += 1
            samples.append(s)
        result[kind] = {
            "controls": sorted({s["control"] for s in samples}),
            "readout": summary(s["readout_ms"] for s in samples),
            "floor": summary(s["readout_ms"] for s in floors),
            "kernel_readout": summary(s["kernel_ms"] for s in samples),
            "kernel_readout_cpu": summary(s["kernel_cpu_ms"] for s in samples),
            "figure": summary(s["figure_ms"] for s in samples),
            "figure_first_visit": summary(s["figure_ms"] for s in samples if not s["revisit"]),
            "changes": len(samples),
            "no_readout_change": sum(s["readout_ms"] is None for s in samples),
            "oracle_mismatches": mismatched if info else None,
            "samples_ms": [[None if s["readout_ms"] is None else round(s["readout_ms"], 1),
                            None if s["figure_ms"] is None else round(s["figure_ms"], 1),
                            s["revisit"]] for s in samples],
            "kernel_samples_ms": [s["kernel_ms"] for s in samples],
            "kernel_cpu_samples_ms": [s["kernel_cpu_ms"] for s in samples],
            "floor_samples_ms": [None if s["readout_ms"] is None else round(s["readout_ms"], 1)
                                 for s in floors],
        }
        r, f = result[kind]["readout"], result[kind]["figure"]
        first, kernel = result[kind]["figure_first_visit"], result[kind]["kernel_readout"]
        log(f"    {kind:15s} readout {fmt(r)}  figure {fmt(f)}  first visits {fmt(first)}"
            f"  kernel to readouts {fmt(kernel)}  floor {fmt(result[kind]['floor'])}")
    return result


def fmt(s) -> str:
    return "-" if not s else f"median {s['median_ms']:7.1f} ms  p95 {s['p95_ms']:7.1f} ms (n={s['n']})"


READOUT_OVER_FLOOR = 1.5
"""Goal: each explorer's median readout latency, per kind of control, at
most this multiple of the floor's median for that kind (issue 10 item 18)."""
FIGURE_MS = 150.0
"""Goal: each explorer's median figure latency, per kind, in milliseconds."""


def goals(report: dict, floor: dict[str, list]) -> dict:
    """Every explorer and kind of control against the two goals; the floor
    is the output's own, measured alternately with it (the floor
    notebook's for a kind the floor cell lacks)."""
    rows, lines = [], ["\ngoals (median per explorer and kind of control, "
                       "against its own floor, measured alternately with it):"]
    for name, entry in report["notebooks"].items():
        for out in entry.values():
            for kind, k in out["kinds"].items():
                fl = k["floor"] or summary(floor.get(kind, []))
                r, f = k["readout"], k["figure"]
                ratio = round(r["median_ms"] / fl["median_ms"], 2) if r and fl else None
                row = {"notebook": name, "explorer": out["explorer"], "kind": kind,
                       "readout_over_floor": ratio,
                       "readout_ok": ratio is not None and ratio <= READOUT_OVER_FLOOR,
                       "kernel_readout_ms": (k["kernel_readout"] or {}).get("median_ms"),
                       "kernel_readout_cpu_ms": (k["kernel_readout_cpu"] or {}).get("median_ms"),
                       "figure_ms": f["median_ms"] if f else None,
                       "figure_first_visit_ms": (k["figure_first_visit"] or {}).get("median_ms"),
                       "figure_ok": f is None or f["median_ms"] <= FIGURE_MS}
                rows.append(row)
                lines.append(f"  {out['explorer'] or '?':18s} {kind:15s} readout/floor "
                             f"{ratio} ({'ok' if row['readout_ok'] else 'MISSED'}; kernel "
                             f"{row['kernel_readout_ms']} ms)  figure "
                             f"{row['figure_ms']} ms ({'ok' if row['figure_ok'] else 'MISSED'})")
    met = all(r["readout_ok"] and r["figure_ok"] for r in rows)
    lines.append(f"  all goals met: {met}")
    return {"readout_over_floor_max": READOUT_OVER_FLOOR, "figure_ms_max": FIGURE_MS,
            "all_met": met, "rows": rows, "lines": lines}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--changes", type=int, default=20,
                    help="changes per kind of control per widget output (>= 20)")
    ap.add_argument("--out", type=Path, default=ARTIFACTS / "latency.json")
    ap.add_argument("--notebooks", nargs="*", help="names in notebooks/ (default all)")
    ap.add_argument("--stock-server", action="store_true",
                    help="kernel websockets as stock Jupyter Server has them, Nagle's "
                         "algorithm on (default: off, tests/browser/nodelay.py)")
    args = ap.parse_args(argv)
    if not os.path.exists(CHROMIUM):
        print(f"no browser at {CHROMIUM}", file=sys.stderr)
        return 2
    log = lambda *a: print(*a, flush=True)  # noqa: E731

    root_dir = Path(tempfile.mkdtemp(prefix="actmem-latency-"))
    copy_notebooks(root_dir)
    floor_name = write_floor_notebook(root_dir)
    names = args.notebooks or [p.name for p in notebook_paths() if p.parent.name == "notebooks"]
    floor_cells = {name: add_floors(root_dir / name) for name in names}
    report = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "python": platform.python_version()},
              "changes_per_kind": args.changes,
              "kernel_websocket": ("stock Jupyter Server (Nagle's algorithm on)"
                                   if args.stock_server else
                                   "TCP_NODELAY (tests/browser/nodelay.py)"),
              "method": ("in-page performance.now(): user input event on the control -> "
                         "last text change of a Label/HTML readout (readout) and last "
                         "src change of an <img> (figure) in the same output"),
              "floor": {}, "notebooks": {}}
    server = LabServer(root_dir, tcp_nodelay=not args.stock_server)
    clock = KernelClock(root_dir / "kernel_clock.jsonl")
    clock.install(server)
    server.start()
    browser = None
    try:
        browser = Browser()
        # floor first, then the notebooks, then the floor again (drift check)
        for label in ("floor", *names, "floor_again"):
            name = floor_name if label.startswith("floor") else label
            log(f"{label}: {name}")
            nb = NotebookPage.open(server, browser, name)
            try:
                nb.run_all()
                saved = nb.save()
                ids = widget_model_ids(saved)
                explorers = probe_explorers(server, name)
                entry, roots = {}, nb.roots()
                floors = {r.cell: r for r in roots
                          if r.cell in floor_cells.get(name, ()) and r.output == 0}
                for root in roots:
                    if (floors.get(root.cell) is root or
                            not any(c["kind"] not in UNSUPPORTED for c in root.controls)):
                        continue
                    info = explorers.get(ids.get((root.cell, root.output)))
                    log(f"  {root.name} {info['cls'] if info else ''}")
                    entry[root.name] = {
                        "explorer": info["cls"] if info else None,
                        "kinds": run_root(nb, root, info, args.changes, log, clock,
                                          floors.get(root.cell))}
                if label.startswith("floor"):
                    report[label] = entry
                else:
                    report["notebooks"][name] = entry
            finally:
                nb.close()
    finally:
        if browser is not None:
            browser.close()
        server.stop()

    # aggregate per kind of control over every notebook, and against the floor
    agg: dict[str, dict[str, list]] = {}
    for entry in report["notebooks"].values():
        for out in entry.values():
            for kind, k in out["kinds"].items():
                a = agg.setdefault(kind, {"readout": [], "figure": [], "first": []})
                for r, f, revisit in k["samples_ms"]:
                    a["readout"].append(r)
                    a["figure"].append(f)
                    a["first"].append(None if revisit else f)
    floor = {}
    for key in ("floor", "floor_again"):
        for out in report.get(key, {}).values():
            for kind, k in out["kinds"].items():
                floor.setdefault(kind, []).extend(r for r, *_ in k["samples_ms"])
    report["summary"] = {}
    log("\nsummary (all notebooks):")
    for kind, a in sorted(agg.items()):
        r, f = summary(a["readout"]), summary(a["figure"])
        fl = summary(floor.get(kind, []))
        ratio = round(r["median_ms"] / fl["median_ms"], 2) if r and fl else None
        report["summary"][kind] = {"readout": r, "figure": f, "floor": fl,
                                   "readout_over_floor_median": ratio}
        log(f"  {kind:15s} readout {fmt(r)}\n  {'':15s} figure  {fmt(f)}\n"
            f"  {'':15s} floor   {fmt(fl)}   readout/floor {ratio}")
    all_r = [x for a in agg.values() for x in a["readout"]]
    all_f = [x for a in agg.values() for x in a["figure"]]
    all_floor = [x for xs in floor.values() for x in xs]
    overall = {"readout": summary(all_r), "figure": summary(all_f), "floor": summary(all_floor),
               "figure_first_visit": summary(x for a in agg.values() for x in a["first"])}
    if overall["readout"] and overall["floor"]:
        overall["readout_over_floor_median"] = round(
            overall["readout"]["median_ms"] / overall["floor"]["median_ms"], 2)
    report["summary"]["all"] = overall
    log(f"  {'all':15s} readout {fmt(overall['readout'])}\n  {'':15s} figure  "
        f"{fmt(overall['figure'])}\n  {'':15s} first visits {fmt(overall['figure_first_visit'])}"
        f"\n  {'':15s} floor   {fmt(overall['floor'])}   "
        f"readout/floor {overall.get('readout_over_floor_median')}")
    report["goals"] = goals(report, floor)
    for line in report["goals"]["lines"]:
        log(line)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    log(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

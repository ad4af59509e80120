"""The golden file of :func:`actmem.training_memory`: the guard of a refactor.

``python tools/golden.py`` records every call of ``training_memory`` that
the course and its explorers make, computes each, and writes
``tests/golden/training_memory.json.gz``; ``tests/test_golden.py``
recomputes every case and compares it to the byte. nbval compares neither
images nor widget readouts, so this file is what shows that a change of the
code (issue 43: the ``Job`` record, ``training_memory`` as a composition)
changed no number. Rewrite it only where a change is meant to move a
number, and say which in the commit.

The calls, deduplicated by their text:

* every call the English notebooks make, their explorers' first drawing
  included (each code cell run in one in-process IPython shell; notebook
  07, the PyTorch measurement, makes none);
* each planner of the notebooks (notebooks 09 and 12 build them) walked
  control by control: every offered value of each control, from the
  planner's own settings;
* every preset (dense and MoE) under every schedule, m = 8 and the first
  p and v the schedule takes with the model's layers;
* the Megatron-LM runs of ``actmem/data/megatron_runs.json``.

A case is kept as the call's text (``repr`` of the model and the options
that differ from their defaults: :class:`actmem.ModelConfig` prints as it
is built; :func:`job_of` builds its :class:`actmem.Job`) and, per stage, its parts
(:data:`actmem.PARTS`), its peak, the peak event's label and its bytes by
category.
"""

from __future__ import annotations

import contextlib
import gzip
import itertools
import json
import os
import sys
import warnings
from importlib import resources
from pathlib import Path

import nbformat

import actmem
from actmem.run import peak as peak_module

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "training_memory.json.gz"


@contextlib.contextmanager
def recording(calls: dict):
    """Record each job ``training_memory`` computes into ``calls`` (text ->
    None): its step after the checks, ``step_setup``, is wrapped."""
    setup = peak_module.step_setup

    def recorded(job, *args, **kwargs):
        calls.setdefault(call_text(job))
        return setup(job, *args, **kwargs)
    peak_module.step_setup = recorded
    try:
        yield calls
    finally:
        peak_module.step_setup = setup


def call_text(job) -> str:
    """The call as text: the model, then every option that differs from
    its default, by name."""
    return repr((job.model, job.changed()))


def job_of(text: str):
    """The :class:`actmem.Job` of the call ``text``."""
    model, options = eval(text, {"ModelConfig": actmem.ModelConfig})  # noqa: S307, our own text
    return actmem.Job(model, **options)


def run(text: str):
    """The result of the call ``text`` (its warnings, such as sequence
    parallelism at t = 1, are the course's to show, not the guard's)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return actmem.training_memory(job_of(text))


def summary(result) -> list:
    """Per stage: [parts by name, peak, the peak event's label, its bytes
    by category]."""
    return [[{part: getattr(stage, part) for part in actmem.PARTS}, stage.peak,
             stage.timeline.peak.label, list(stage.timeline.peak.bytes)]
            for stage in result.stages]


def notebook_calls(calls: dict) -> list:
    """Run the English notebooks' code cells in one IPython shell, recording;
    return the planners they build."""
    from IPython.core.interactiveshell import InteractiveShell
    from actmem.views.fit_views import FitPlanner
    planners = []
    built = FitPlanner.__init__

    def keep(self, *args, **kwargs):
        built(self, *args, **kwargs)
        planners.append(self)
    shell = InteractiveShell.instance()
    shell.enable_gui = lambda gui=None: None   # %matplotlib inline: figures go nowhere
    here = os.getcwd()
    os.chdir(ROOT / "notebooks")
    FitPlanner.__init__ = keep
    try:
        for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
            if path.name.startswith("07_"):
                continue
            for cell in nbformat.read(path, as_version=4).cells:
                if cell.cell_type == "code":
                    with recording(calls):
                        result = shell.run_cell(cell.source, silent=True)
                    if not result.success:
                        raise RuntimeError(f"{path.name}: a cell failed: {result.error_in_exec!r}")
    finally:
        FitPlanner.__init__ = built
        os.chdir(here)
    return planners


def walk_planner(planner, calls: dict) -> None:
    """Every offered value of each control, one control at a time, from
    the planner's settings (each change back before the next control)."""
    start = planner.values()
    for name, control in planner.controls.items():
        for value in list(getattr(control, "options", None) or ()):
            value = value[1] if isinstance(value, tuple) else value
            with recording(calls):
                control.value = value
        with recording(calls):
            for other, value in start.items():
                planner.controls[other].value = value


def preset_calls(calls: dict) -> None:
    """Every preset under every schedule, Megatron-LM's and PyTorch's
    (m = 8): the first of p = 4, 2, 3 and v = 1, 2, 3 the schedule takes
    with the model's layers."""
    from actmem.run.schedule.schedule_rules import ALL_SCHEDULES
    models = {**actmem.PRESETS, **actmem.MOE_PRESETS}
    for model in models.values():
        for schedule in ALL_SCHEDULES:
            for p, v in itertools.product((4, 2, 3), (1, 2, 3)):
                attempt: dict = {}
                with recording(attempt), contextlib.suppress(ValueError):
                    actmem.training_memory(model, p=p, m=8, schedule=schedule, v=v)
                    calls.update(attempt)   # taken, not refused
                    break


def megatron_calls(calls: dict) -> None:
    """The Megatron-LM runs actmem holds (``actmem/data/megatron_runs.json``)."""
    data = json.loads(resources.files("actmem").joinpath("data/megatron_runs.json")
                      .read_text())
    for run_ in data["runs"].values():
        with recording(calls):
            actmem.training_memory(actmem.ModelConfig(**run_["model"]), gpu_memory=run_["gpu"],
                                   **run_["run"])


def main() -> int:
    import matplotlib
    matplotlib.use("Agg")
    warnings.simplefilter("ignore")   # the course's own warnings (sp at t = 1 ...), shown there
    calls: dict = {}
    print("running the English notebooks ...", flush=True)
    planners = notebook_calls(calls)
    print(f"walking {len(planners)} planners ...", flush=True)
    for planner in planners:
        walk_planner(planner, calls)
    preset_calls(calls)
    megatron_calls(calls)
    print(f"computing {len(calls)} cases ...", flush=True)
    cases = []
    for text in sorted(calls):
        with contextlib.suppress(TypeError, ValueError):   # a refused call: no numbers
            cases.append({"call": text, "stages": summary(run(text))})
    GOLDEN.parent.mkdir(exist_ok=True)
    text = json.dumps({"about": __doc__.split("\n\n")[0], "cases": cases}, indent=0)
    with gzip.GzipFile(GOLDEN, "wb", mtime=0) as out:   # the same bytes for the same cases
        out.write(text.encode("utf-8"))
    print(f"wrote {len(cases)} cases to {GOLDEN.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

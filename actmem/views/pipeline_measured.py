"""PyTorch's pipeline engine against the simulation, as a table (notebook 06).

Measuring needs torch (:mod:`actmem.measure.pipeline`, the ``measure``
extra); this module does not. :func:`load_measurement` measures now when
torch is installed and otherwise reads the result stored in
``actmem/data/pipeline_measured.json`` (written by ``python -m
actmem.measure pipeline --json``; a test checks it against a fresh run),
and says which of the two it returns. Where the environment variable
:data:`CACHE_ENV` names a folder, the measurement is kept there and the
processes that load it after the first read it instead of measuring again
(the test suite sets it: notebook 06 runs four times, under nbval and in
the browser, in both languages).
"""

from __future__ import annotations

import importlib.util
import json
import os
from fractions import Fraction
from importlib.resources import files
from pathlib import Path

from ..language import tr, translator

STORED = "data/pipeline_measured.json"
"""Where the stored measurement lives inside the package."""
CACHE_ENV = "ACTMEM_MEASURE_CACHE"
"""Environment variable: a folder where :func:`load_measurement` keeps the
measurement it made, for the processes that load it later (one file, taken
under a lock so that two processes never measure at once)."""


def stored_measurement() -> dict:
    """The stored measurement: ``{"config": ..., "stages": [...]}``."""
    return json.loads(files("actmem").joinpath(STORED).read_text(encoding="utf-8"))


def load_measurement() -> tuple[str, dict]:
    """``(source, data)``: measured on this machine if torch is importable
    (about 40 s on 2 cores: p = 2 and 4 gloo processes; kept in the folder
    :data:`CACHE_ENV` names, if set), else the stored result; ``source`` says
    which, with the torch version that measured it, in the current language."""
    if importlib.util.find_spec("torch") is None:
        data = stored_measurement()
        return (tr("STORED result (torch {version}); torch is not installed here, so nothing "
                   "was measured now").format(version=data["config"]["torch"]), data)
    data = _measured()
    return tr("measured on this machine with torch {version}").format(
        version=data["config"]["torch"]), data


def _measured() -> dict:
    """A fresh measurement, or the one kept in the :data:`CACHE_ENV` folder."""
    from ..measure.pipeline import measurement

    folder = os.environ.get(CACHE_ENV)
    if not folder:
        return measurement()
    from filelock import FileLock  # a dependency of torch

    path = Path(folder) / "pipeline_measured.json"
    with FileLock(f"{path}.lock"):
        if not path.exists():
            path.write_text(json.dumps(measurement()), encoding="utf-8")
        return json.loads(path.read_text(encoding="utf-8"))


def _cases(data: dict) -> dict[tuple, list[dict]]:
    cases: dict[tuple, list[dict]] = {}
    for stage in data["stages"]:
        cases.setdefault((stage["schedule"], stage["p"], stage["m"], stage["v"]),
                         []).append(stage)
    return cases


def _ratio(text: str) -> str:
    """A measured ratio: an int as it is, a fraction to two decimals."""
    ratio = Fraction(text)
    return str(ratio) if ratio.denominator == 1 else f"{float(ratio):.2f}"


def _peaks(stages: list[dict], key: str) -> str:
    """Each stage's largest value of ``key`` (bytes after each operation)
    over its bytes per pass, first stage to last (:func:`_ratio`)."""
    return " ".join(_ratio(str(Fraction(max(s[key]), s["microbatch_bytes"]))) for s in stages)


def measurement_table(data: dict, tr=None) -> str:
    """One line per measured schedule, each stage first to last in a column.

    Columns: ``pass bytes``, the bytes one micro-batch's pass through one
    chunk saves (what the first forward added); ``measured peak / pass``,
    the most bytes alive after any operation over ``pass bytes``;
    ``simulated peak / pass``, the same for the simulation's bytes
    (PyTorch's order, each pass whole until its ``B`` or ``I``, then what
    PyTorch keeps after ``I`` and after ``W``:
    :mod:`actmem.measure.pipeline_result`); ``passes held``, the
    simulation's peak count of passes in flight (a pass counted until its
    ``B`` or ``W``, :meth:`actmem.PipelineSchedule.peak_in_flight`), which
    is the simulated peak without a split backward and may lie below it
    with one (PyTorch keeps most of a pass after ``I`` and some bytes after
    ``W``); ``bytes agree``, whether on every stage the operations are the
    simulation's and the measured bytes after every operation equal the
    simulated ones. Words translated by ``tr`` (default: the current
    language).

    >>> table = measurement_table(stored_measurement()).splitlines()
    >>> print(table[0])
    schedule        p  m  v  pass bytes  measured peak / pass  simulated peak / pass  passes held  bytes agree
    >>> print(table[28])
    zbv             4  8  2      180736  8.73 9.09 9.27 9.45   8.73 9.09 9.27 9.45    8 8 8 8      yes
    """
    from .printed import pad, width

    tr = translator() if tr is None else tr
    cases = _cases(data)
    first = max(14, *(width(tr(schedule)) for schedule, *_ in cases))   # Chinese names are wider
    lines = [pad(tr("schedule"), first) + "  " + tr(
        "p  m  v  pass bytes  measured peak / pass  simulated peak / pass  passes held  bytes agree")]
    for (schedule, p, m, v), stages in cases.items():
        held = " ".join(str(s["simulated_peak_in_flight"]) for s in stages)
        agrees = tr("yes") if all(s["agrees"] for s in stages) else tr("NO")
        lines.append(f"{pad(tr(schedule), first)} {p:>2} {m:>2} {v:>2}  {stages[0]['microbatch_bytes']:>10}"
                     f"  {_peaks(stages, 'alive_bytes'):<20}  {_peaks(stages, 'modelled_bytes'):<21}"
                     f"  {held:<11}  {agrees}")
    return "\n".join(lines)

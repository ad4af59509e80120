"""How the README's test command shares the work between cores (issue 21).

pyproject.toml's ``addopts`` run pytest-xdist workers (``-n auto``: one per
core and one more, at most 4; :func:`pytest_xdist_auto_num_workers`)
with ``--dist loadfile``: each file runs whole on one worker, so a notebook's
nbval cells share their kernel. Two changes to loadfile, here:

* ``tests/browser/`` is two units, not two files: its tests of the English
  notebooks (with the slideshow's) and those of the Chinese ones. Each
  worker that runs one starts its own JupyterLab and Chromium (session
  fixtures in ``tests/browser/conftest.py``); on two cores the two halves
  (about 8 minutes each) run side by side instead of one after the other.
* Units start longest first (``--no-loadscope-reorder`` keeps this order):
  the browser suite's halves, then the notebooks, then the costliest
  unit-test files (:data:`HEAVY`), then the rest, so that the short files
  fill the workers at the end and the workers end together.

With ``-n 0`` (or ``-o addopts=...``, which drops the options above) every
test runs in one process, in this order.

One measurement of PyTorch's pipelines per run: notebook 06 measures them
(about 40 s) under nbval and in the browser suite, in both languages; the
controller names a new folder in ``ACTMEM_MEASURE_CACHE``
(:data:`actmem.views.pipeline_measured.CACHE_ENV`), which the workers, their
kernels and JupyterLab inherit, so the first to load the measurement makes
it and keeps it there for the others (tests/test_measure_pipeline.py checks
that one). Removed at the end.

Hypothesis: no test may depend on the machine's speed (issue 21: examples
over the default 200 ms deadline failed on a loaded machine), so the profile
loaded here has no deadline and no "too slow" health check; a test's own
``@settings`` inherit both.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import warnings
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import HealthCheck, settings

from actmem.views.pipeline_measured import CACHE_ENV

BROWSER = "tests/browser"
"""The browser suite's folder, relative to the repository root (node ids)."""
HEAVY = ("tests/test_colab_kernel.py", "tests/test_measure_pipeline.py",
         "tests/test_schedule_views.py", "tests/test_language.py", "tests/test_lite_kernel.py",
         "tests/test_schedules.py", "tests/test_measure.py", "tests/test_pytorch_orders.py",
         "tests/test_planner_levers.py", "tests/test_measure_step.py",
         "tests/test_notebook_edits.py")
"""Unit-test files that took 20-90 s each in the README's command on 2
cores (``--durations``, 2026-12-02), costliest first: started before the
others, none is left to run alone at the end."""


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # known only with pytest-xdist
def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker per core and one more (``--maxprocesses``
    still caps them), unless ``PYTEST_XDIST_AUTO_NUM_WORKERS`` says how many:
    the browser suite's halves wait on Chromium and the kernel for about a
    third of their time, which the extra worker fills with unit tests."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) + 1


def pytest_report_header(config):
    """Before the first dot: what the run holds and about how long it takes
    (issue 41: the README's test command said nothing for minutes)."""
    root = Path(str(config.rootpath))
    notebooks = len([*root.glob("notebooks/*.ipynb"), *root.glob("notebooks/zh/*.ipynb")])
    torch = importlib.util.find_spec("torch") is not None
    chromium = os.environ.get("ACTMEM_CHROMIUM", "/usr/bin/chromium")
    browser = (f"the browser suite in {chromium}" if os.access(chromium, os.X_OK) else
               f"no browser suite (no Chromium at {chromium}: skipped)")
    return [f"actmem: unit tests, {notebooks} notebooks under nbval (English and Chinese), "
            f"{browser}; torch {'found' if torch else 'not installed: its tests are skipped'}",
            "actmem: about 9 minutes on a quiet 2-core machine with torch and Chromium "
            "(CONTRIBUTING.md); a dot per test passed, reasons for skips at the end"]


def pytest_configure(config):
    """In the controller (not an xdist worker), unless already set: a new
    folder for the run's pipeline measurement."""
    if not hasattr(config, "workerinput") and CACHE_ENV not in os.environ:
        os.environ[CACHE_ENV] = config._actmem_cache = tempfile.mkdtemp(prefix="actmem-measure-")


def pytest_unconfigure(config):
    folder = getattr(config, "_actmem_cache", None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
        del os.environ[CACHE_ENV]


settings.register_profile("any-speed", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("any-speed")


def unit(nodeid: str) -> str:
    """The work unit of a test: its file, or the browser suite's half for
    the language of its notebook (``tests/browser[zh]``, ``tests/browser[en]``).

    >>> unit("tests/browser/test_browser_notebooks.py::test_run_all[zh/05_training_run.ipynb]")
    'tests/browser[zh]'
    """
    path = nodeid.split("::", 1)[0]
    if not PurePosixPath(path).is_relative_to(BROWSER):
        return path
    return f"{BROWSER}[{'zh' if '[zh/' in nodeid else 'en'}]"


def rank(nodeid: str) -> tuple[int, int]:
    """(0, 0) for the browser suite, (1, 0) for a notebook, (2, i) for the
    i-th of :data:`HEAVY`, (3, 0) for the rest."""
    path = unit(nodeid)
    if path.startswith(BROWSER):
        return 0, 0
    if path.endswith(".ipynb"):
        return 1, 0
    return (2, HEAVY.index(path)) if path in HEAVY else (3, 0)


@pytest.fixture(autouse=True)
def english_labels(request):
    """Every test starts with English labels. ``actmem.set_language`` is
    process-wide: a test that left Chinese set would change what the later
    tests on its worker read (a torch-less run failed three readout tests
    so). A test that leaves it so is named in a warning."""
    from actmem.language import get_language, set_language
    if get_language() != "en":
        set_language("en")
    yield
    left = get_language()
    if left != "en":
        set_language("en")
        warnings.warn(f"{request.node.nodeid} left the labels in {left!r}; set back to English")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """Longest units first; each unit's own order is kept (stable sort)."""
    items.sort(key=lambda item: rank(item.nodeid))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """loadfile's scheduler with the browser suite's halves as units."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class BrowserSuiteByLanguage(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit(nodeid)

    return BrowserSuiteByLanguage(config, log)

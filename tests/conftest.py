"""How the README's test command shares the work between cores (issue 21).

pyproject.toml's ``addopts`` run pytest-xdist workers (``-n auto``, at most 4)
with ``--dist loadfile``: each file runs whole on one worker, so a notebook's
nbval cells share their kernel. Two changes to loadfile, here:

* ``tests/browser/`` is one unit, not two files: its files share one
  JupyterLab, one Chromium and one screenshots folder (session fixtures in
  ``tests/browser/conftest.py``), which each of two workers would start, and
  empty, again.
* Units start longest first (``--no-loadscope-reorder`` keeps this order):
  the browser suite, then the notebooks, then the costliest unit-test files
  (:data:`HEAVY`), then the rest, so that the short files fill the other
  workers while the browser suite runs and the two workers end together.

With ``-n 0`` (or ``-o addopts=...``, which drops the options above) every
test runs in one process, in this order.

Hypothesis: no test may depend on the machine's speed (issue 21: examples
over the default 200 ms deadline failed on a loaded machine), so the profile
loaded here has no deadline and no "too slow" health check; a test's own
``@settings`` inherit both.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest
from hypothesis import HealthCheck, settings

BROWSER = "tests/browser"
"""The browser suite's folder, relative to the repository root (node ids)."""
HEAVY = ("tests/test_measure.py", "tests/test_schedules.py", "tests/test_measure_step.py",
         "tests/test_notebook_edits.py", "tests/test_fuzz_api.py", "tests/test_workshop.py",
         "tests/test_fuzz.py", "tests/test_pipeline_measured.py")
"""Unit-test files that cost 9-55 s of CPU each (``-n 0``, measured on
2026-12-02), costliest first: started before the others, none is left to
run alone at the end."""

settings.register_profile("any-speed", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("any-speed")


def unit(nodeid: str) -> str:
    """The work unit of a test: its file, or the whole browser suite."""
    path = nodeid.split("::", 1)[0]
    return BROWSER if PurePosixPath(path).is_relative_to(BROWSER) else path


def rank(nodeid: str) -> tuple[int, int]:
    """(0, 0) for the browser suite, (1, 0) for a notebook, (2, i) for the
    i-th of :data:`HEAVY`, (3, 0) for the rest."""
    path = unit(nodeid)
    if path == BROWSER:
        return 0, 0
    if path.endswith(".ipynb"):
        return 1, 0
    return (2, HEAVY.index(path)) if path in HEAVY else (3, 0)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """Longest units first; each unit's own order is kept (stable sort)."""
    items.sort(key=lambda item: rank(item.nodeid))


def pytest_xdist_make_scheduler(config, log):
    """loadfile's scheduler with the browser suite as one unit."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class BrowserSuiteTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit(nodeid)

    return BrowserSuiteTogether(config, log)

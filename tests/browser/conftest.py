"""Fixtures for the browser suite: one JupyterLab server and one Chromium
per session, on a temporary copy of notebooks/.

Skip logic: without /usr/bin/chromium (or ACTMEM_CHROMIUM) or without the
``playwright`` package the suite is skipped with the reason -- unless the
environment variable ``CI`` is set, where a missing browser is a failure.
"""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path

import pytest

from jlab import (ARTIFACTS, CHROMIUM, NOTEBOOKS, Browser, LabServer, NotebookPage, file_stem,
                  copy_notebooks, error_outputs, missing_requirements,
                  probe_explorers, widget_model_ids)

SCREENSHOTS = ARTIFACTS / "screenshots"
STARTED = time.time()
"""When this process loaded the suite: screenshots older than that are an
earlier run's (another worker may be writing this run's beside ours)."""
_written = []  # set once this session has written screenshots


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "browser: drives JupyterLab in Chromium (tests/browser/)")


def pytest_collection_modifyitems(config, items):
    """Mark the browser tests and run each notebook's tests back to back
    (Run All once, then its controls), keeping other tests in place."""
    here = Path(__file__).parent
    mine = [i for i, item in enumerate(items) if here in Path(str(item.fspath)).parents]
    def key(item):
        spec = getattr(item, "callspec", None)
        return spec.params.get("notebook", "") if spec else ""

    for i in mine:
        items[i].add_marker(pytest.mark.browser)
        missing = key(items[i]) and missing_requirements(NOTEBOOKS / key(items[i]))
        if missing and not _ci():
            items[i].add_marker(pytest.mark.skip(
                reason=f"{', '.join(missing)} not installed: pip install torch==2.13.0 "
                "--index-url https://download.pytorch.org/whl/cpu to run this notebook"))
    ordered = sorted((items[i] for i in mine), key=key)  # stable: run_all first
    for i, item in zip(mine, ordered):
        items[i] = item


def _ci() -> bool:
    return os.environ.get("CI", "") not in ("", "0", "false", "False")


def _missing() -> str | None:
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        return (f"Chromium not found at {CHROMIUM} (apt-get install chromium, "
                "or set ACTMEM_CHROMIUM)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as e:
        return f"the playwright package is not importable ({e}); pip install -e '.[test]'"
    return None


@pytest.fixture(scope="session")
def browser_available():
    reason = _missing()
    if reason:
        if _ci():
            pytest.fail(f"CI is set and the browser suite cannot run: {reason}",
                        pytrace=False)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def screenshot_dir(browser_available) -> Path:
    """artifacts/screenshots/, without an earlier run's screenshots (the
    test command runs the suite's two halves in two workers, each with this
    fixture: neither may delete what the other writes)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for old in SCREENSHOTS.glob("*.png"):
        if old.stat().st_mtime < STARTED:
            old.unlink(missing_ok=True)
    _written.append(SCREENSHOTS)
    return SCREENSHOTS


@pytest.fixture(scope="session")
def lab_server(browser_available, tmp_path_factory):
    root = copy_notebooks(tmp_path_factory.mktemp("notebooks"))
    server = LabServer(root).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def browser(browser_available):
    b = Browser()
    try:
        yield b
    finally:
        b.close()


class Runs:
    """Each notebook opened and Run-All'ed once per session; only one is
    open at a time (its tab and kernel are closed when the next opens)."""

    def __init__(self, server, browser, shots):
        self.server, self.browser, self.shots = server, browser, shots
        self.current = None  # (name, NotebookPage, record)

    def get(self, name: str):
        if self.current and self.current[0] == name:
            return self.current[1], self.current[2]
        self.close()
        nb = NotebookPage.open(self.server, self.browser, name)
        record = {"run_s": None, "error": None}
        try:
            record["run_s"] = nb.run_all()
            record["saved"] = nb.save()
            record["errors"] = error_outputs(record["saved"])
            record["model_ids"] = widget_model_ids(record["saved"])
            record["explorers"] = probe_explorers(self.server, name)
            record["screenshot"] = nb.screenshot(
                self.shots / f"{file_stem(name)}__run-all.png")
        except Exception as e:  # reported by the test that asked
            record["error"] = e
            record["traceback"] = traceback.format_exc()
            try:
                nb.screenshot(self.shots / f"{file_stem(name)}__FAILED-run-all.png")
            except Exception:
                pass
        self.current = (name, nb, record)
        return nb, record

    def close(self):
        if self.current:
            try:
                self.current[1].close()
            finally:
                self.current = None


@pytest.fixture(scope="session")
def runs(lab_server, browser, screenshot_dir):
    r = Runs(lab_server, browser, screenshot_dir)
    try:
        yield r
    finally:
        r.close()


def pytest_terminal_summary(terminalreporter):
    if _written:
        terminalreporter.write_sep("-", "browser screenshots")
        terminalreporter.write_line(f"screenshots written to {SCREENSHOTS}")

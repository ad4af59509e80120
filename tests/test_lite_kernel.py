"""The JupyterLite site's kernel starts offline in Chromium (issue 24).

The site is built by tools/build_lite.py with Pyodide and the pure wheels of
``ACTMEM_LITE_FETCHED`` (a folder written by ``tools/build_lite.py fetch``,
which ``.ci/run`` runs: PyPI and npm are reached at that step only), served
on 127.0.0.1, and opened in Chromium with every request that leaves
127.0.0.1 refused and recorded. A notebook (beside the course's) imports
actmem, prints a Table 2 value and shows an ipywidgets toggle whose readout
is that value at the t clicked. Pyodide's compiled wheels (numpy,
matplotlib, contourpy, kiwisolver, pillow) are not on PyPI, so without
``ACTMEM_PYODIDE`` (Pyodide 314.0.6's full distribution, unpacked: its
compiled wheels are taken from there) the
site has no figures: the course's notebooks cannot run, only actmem's core
and the widgets; with it, every notebook but 07 (PyTorch) runs whole too,
and zh/01.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import sys
import threading
import tomllib
from pathlib import Path

import nbformat
import pytest

from actmem import format_bytes, paper_formula

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import build_lite  # noqa: E402

CHROMIUM = os.environ.get("ACTMEM_CHROMIUM", "/usr/bin/chromium")
FETCHED = os.environ.get("ACTMEM_LITE_FETCHED")
COMPILED = os.environ.get("ACTMEM_PYODIDE")
SHAPE = dict(s=2048, b=1, h=4096, a=32)
CHECK = f"""import actmem, ipywidgets
t = ipywidgets.ToggleButtons(options=[1, 2, 4, 8], value=1, description='t')
out = ipywidgets.HTML()
def show(change=None):
    out.value = 'READOUT ' + actmem.format_bytes(actmem.paper_formula(**{SHAPE!r}, t=t.value))
t.observe(show, names='value')
show()
print('CO' + 'RE', actmem.format_bytes(actmem.paper_formula(**{SHAPE!r}, t=1)))
ipywidgets.VBox([t, out])"""

pytestmark = [
    pytest.mark.skipif(not FETCHED, reason="ACTMEM_LITE_FETCHED not set: no Pyodide and pure "
                       "wheels fetched for the site (`python tools/build_lite.py fetch DIR`, "
                       "then ACTMEM_LITE_FETCHED=DIR; .ci/run does both)"),
    pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                       reason=f"Chromium not found at {CHROMIUM} (ACTMEM_CHROMIUM)"),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The site's folder."""
    extra = tmp_path_factory.mktemp("extra") / "lite_check.ipynb"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CHECK)])
    notebook.metadata["kernelspec"] = {"name": "python", "display_name": "Python (Pyodide)"}
    nbformat.write(notebook, extra)
    wheels = [Path(FETCHED) / "wheels", *([Path(COMPILED)] if COMPILED else [])]
    return build_lite.build(tmp_path_factory.mktemp("lite") / "site",
                            Path(FETCHED) / "pyodide", wheels, contents=[extra])


@pytest.fixture(scope="module")
def site(built):
    """The site, served on 127.0.0.1: yields its base URL."""
    handler = functools.partial(Quiet, directory=str(built))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def page(site):
    """A Chromium page that refuses (and records in ``page.left``) every
    request not to the site."""
    sys.path.insert(0, str(ROOT / "tests" / "browser"))
    import jlab  # the process's one Playwright, shared with the browser suite
    browser = jlab.playwright().chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
    try:
        context = browser.new_context(service_workers="block")
        page = context.new_page()
        page.left = []

        def route(request_route):
            if request_route.request.url.startswith(site):
                request_route.continue_()
            else:
                page.left.append(request_route.request.url)
                request_route.abort()
        context.route("**/*", route)
        yield page
    finally:
        browser.close()


def test_every_preloaded_wheel_is_served_as_its_lock_says(built):
    config = json.loads((built / "jupyter-lite.json").read_text())["jupyter-config-data"]
    settings = config["litePluginSettings"][build_lite.PLUGIN]
    assert settings["pyodideUrl"] == "./static/pyodide/pyodide.mjs"
    assert settings["disablePyPIFallback"] is True
    preload = settings["loadPyodideOptions"]["packages"]
    assert {"micropip", "comm", "ipython", "jedi", "ipywidgets", "actmem"} <= set(preload)
    static = built / "static" / "pyodide"
    packages = json.loads((static / "pyodide-lock.json").read_text())["packages"]
    for name in build_lite.needed(packages, preload):
        wheel = static / packages[name]["file_name"]
        assert build_lite.sha256(wheel) == packages[name]["sha256"], name
    assert packages["actmem"]["version"] == actmem_version()


def actmem_version() -> str:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["version"]


def run_notebook(page, site: str, path: str) -> None:
    """Open ``path`` in JupyterLab and run every cell, from the menu."""
    page.goto(f"{site}lab/index.html?path={path}")
    page.wait_for_selector(".jp-Notebook .jp-Cell .cm-content", timeout=120_000)
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")


def test_kernel_starts_offline_computes_and_a_clicked_widget_updates(page, site):
    run_notebook(page, site, "lite_check.ipynb")
    output = page.wait_for_selector(".jp-OutputArea-output >> text=/CORE \\d/", timeout=300_000)
    assert output.inner_text().strip() == "CORE " + format_bytes(paper_formula(**SHAPE, t=1))
    readout = page.wait_for_selector("text=/READOUT \\d/", timeout=60_000)
    assert readout.inner_text() == "READOUT " + format_bytes(paper_formula(**SHAPE, t=1))
    page.click(".widget-toggle-button >> text='8'")  # the mouse, on the rendered widget
    page.wait_for_selector(f"text='READOUT {format_bytes(paper_formula(**SHAPE, t=8))}'",
                           timeout=30_000)
    assert page.left == []


COURSE = [*sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")
                  if not p.name.startswith("07_")), "zh/01_variables.ipynb"]


@pytest.mark.skipif(not COMPILED, reason="ACTMEM_PYODIDE not set: Pyodide 314.0.6's compiled "
                    "wheels (numpy, matplotlib, contourpy, kiwisolver, pillow) come only with "
                    "its full distribution (jsDelivr, GitHub releases), not reachable here")
def test_the_course_runs_whole(page, site):
    """Every notebook but 07 (it needs PyTorch, which Pyodide lacks), and zh/01."""
    for name in COURSE:
        notebook = nbformat.read(ROOT / "learner" / name, as_version=4)  # what the site serves
        cells = sum(cell.cell_type == "code" for cell in notebook.cells)
        run_notebook(page, site, name)
        page.wait_for_function(  # every code cell has run: its prompt shows a count
            "n => { const p = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];"
            " return p.length >= n && p.every(e => /\\[\\d+\\]/.test(e.textContent)); }",
            arg=cells, timeout=600_000)
        errors = page.locator(".jp-OutputArea-output[data-mime-type*='stderr'] >> "
                              "text=Traceback")
        assert errors.count() == 0, (name, errors.first.inner_text())
    assert page.left == []

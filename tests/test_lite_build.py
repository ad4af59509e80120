"""tools/build_lite.py builds the zero-install JupyterLite site offline.

The site must hold every notebook (English and zh/), actmem's wheel indexed
for the in-browser ``%pip`` (piplite), the Pyodide kernel and the ipywidgets
manager. With ``ACTMEM_PYODIDE`` naming an unpacked Pyodide distribution (the
npm package ``pyodide`` at the version the kernel pins, docs/jupyterlite.md)
the site carries it and the kernel is pointed at it instead of the CDN.
Whether the kernel then starts in a browser is not checked here.
"""

import importlib.util
import json
import os
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import build_lite  # noqa: E402

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("jupyterlite_core", "jupyterlite_pyodide_kernel")),
    reason="jupyterlite-core / jupyterlite-pyodide-kernel not installed: pip install -e '.[lite]'")


def version() -> str:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["version"]


def config(site: Path) -> dict:
    return json.loads((site / "jupyter-lite.json").read_text())["jupyter-config-data"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return build_lite.build(tmp_path_factory.mktemp("lite") / "site")


def test_every_notebook_is_in_the_site(site):
    notebooks = sorted(p.relative_to(ROOT / "notebooks")
                       for p in (ROOT / "notebooks").rglob("*.ipynb"))
    assert len(notebooks) >= 18
    for name in notebooks:
        assert json.loads((site / "files" / name).read_text(encoding="utf-8")) == json.loads(
            (ROOT / "notebooks" / name).read_text(encoding="utf-8")), name


def test_actmem_wheel_is_offered_to_piplite(site):
    index = json.loads((site / "pypi" / "all.json").read_text())
    assert list(index["actmem"]["releases"]) == [version()]
    wheel = f"actmem-{version()}-py3-none-any.whl"
    assert (site / "pypi" / wheel).is_file()


def test_kernel_and_widget_manager_are_in_the_site(site):
    names = {e["name"] for e in config(site)["federated_extensions"]}
    assert {"@jupyterlite/pyodide-kernel-extension", "@jupyter-widgets/jupyterlab-manager"} <= names
    assert "pyodideUrl" not in json.dumps(config(site))  # no local Pyodide given: its CDN


def test_a_folder_without_pyodide_is_refused(tmp_path):
    (tmp_path / "pyodide.mjs").write_text("")
    with pytest.raises(ValueError, match=r"--pyodide=.* lacks pyodide\.asm\.wasm, python_stdlib"):
        build_lite.build(tmp_path / "site", pyodide=tmp_path)


def test_a_given_pyodide_is_served_from_the_site(tmp_path):
    folder = os.environ.get("ACTMEM_PYODIDE")
    if not folder:
        pytest.skip("ACTMEM_PYODIDE not set: no Pyodide distribution here to put in the site "
                    "(npm pack pyodide@314.0.6 and unpack it, docs/jupyterlite.md)")
    site = build_lite.build(tmp_path / "site", pyodide=Path(folder))
    for name in build_lite.PYODIDE_FILES:
        assert (site / "static" / "pyodide" / name).is_file(), name
    settings = json.dumps(config(site))
    assert '"pyodideUrl": "./static/pyodide/pyodide.mjs"' in settings

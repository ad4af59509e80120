"""tools/build_lite.py builds the zero-install JupyterLite site offline.

The site must hold every notebook (English and zh/, in the learner version
of learner/), actmem's wheel indexed
for the in-browser ``%pip`` (piplite), the Pyodide kernel and the ipywidgets
manager. The site that carries Pyodide itself (``--pyodide``) is built and
checked by tests/test_lite_kernel.py. The wheels of Pyodide's lock are checked here on small made-up wheels: a
compiled one must match the lock's sha256, a pure one from PyPI rewrites its
entry. Whether the kernel then starts in a browser: tests/test_lite_kernel.py.
"""

import hashlib
import importlib.util
import json
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


def test_every_notebook_is_in_the_site_in_its_learner_version(site):
    """The site serves learner/ (issue 41: what Colab and Binder open too),
    one file for each notebook of notebooks/."""
    assert build_lite.CONTENTS == ROOT / "learner"
    notebooks = sorted(p.relative_to(ROOT / "notebooks")
                       for p in (ROOT / "notebooks").rglob("*.ipynb"))
    assert len(notebooks) >= 18
    for name in notebooks:
        assert json.loads((site / "files" / name).read_text(encoding="utf-8")) == json.loads(
            (ROOT / "learner" / name).read_text(encoding="utf-8")), name


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


NUMPY = "numpy-2.4.6-cp314-cp314-pyemscripten_2026_0_wasm32.whl"


def made_up_lock(numpy_bytes: bytes) -> dict:
    """A two-package lock: micropip (pure, Pyodide's own build) and numpy."""
    return {"micropip": build_lite.entry("micropip", "0.11.1", [],
                                         "micropip-0.11.1-py3-none-any.whl", "0" * 64),
            "numpy": build_lite.entry("numpy", "2.4.6", [], NUMPY,
                                      hashlib.sha256(numpy_bytes).hexdigest())}


def test_a_pure_wheel_from_pypi_rewrites_its_lock_entry(tmp_path):
    (tmp_path / "in").mkdir(), (tmp_path / "out").mkdir()
    (tmp_path / "in" / "micropip-0.11.1-py3-none-any.whl").write_bytes(b"from PyPI")
    packages = made_up_lock(b"numpy")
    missing = build_lite.take_wheels(packages, ["micropip", "numpy"], [tmp_path / "in"],
                                     tmp_path / "out")
    assert missing == ["numpy"]
    assert packages["micropip"]["sha256"] == hashlib.sha256(b"from PyPI").hexdigest()
    assert (tmp_path / "out" / "micropip-0.11.1-py3-none-any.whl").read_bytes() == b"from PyPI"


def test_a_compiled_wheel_must_match_the_lock(tmp_path):
    (tmp_path / "in").mkdir(), (tmp_path / "out").mkdir()
    (tmp_path / "in" / NUMPY).write_bytes(b"numpy, rebuilt")
    with pytest.raises(ValueError, match=r"--wheels: .*numpy-2\.4\.6.* has sha256 .*the lock"):
        build_lite.take_wheels(made_up_lock(b"numpy"), ["numpy"], [tmp_path / "in"],
                               tmp_path / "out")
    assert build_lite.take_wheels(made_up_lock(b"numpy, rebuilt"), ["numpy"],
                                  [tmp_path / "in"], tmp_path / "out") == []
    assert (tmp_path / "out" / NUMPY).is_file()


def test_a_missing_pure_wheel_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match=r"no micropip 0\.11\.1 wheel .*build_lite\.py fetch"):
        build_lite.take_wheels(made_up_lock(b""), ["micropip"], [tmp_path], tmp_path)


def test_the_lock_closure_follows_depends_by_normalized_name():
    packages = {"ipython": {"depends": ["prompt_toolkit"]}, "prompt-toolkit": {"depends": []}}
    assert build_lite.needed(packages, ["IPython"]) == ["ipython", "prompt-toolkit"]


def test_wheels_without_pyodide_are_refused(tmp_path):
    with pytest.raises(ValueError, match="--wheels needs --pyodide"):
        build_lite.build(tmp_path / "site", wheels=[tmp_path])


def test_the_pages_workflow_builds_with_this_tool_and_deploys(monkeypatch):
    import shlex

    import yaml
    from jupyterlite_pyodide_kernel.constants import PYODIDE_VERSION
    workflow = yaml.safe_load((ROOT / ".github/workflows/pages.yml").read_text())
    assert workflow["env"]["PYODIDE"] == build_lite.PYODIDE_VERSION == PYODIDE_VERSION
    steps = workflow["jobs"]["build"]["steps"]
    runs = [shlex.split(s["run"].replace("\n", " ")) for s in steps if "build_lite.py" in
            s.get("run", "")]
    assert [run[2] for run in runs] == ["fetch", "build"]
    parser_calls = []
    for name in ("fetch", "build"):
        monkeypatch.setattr(build_lite, name, lambda *args: parser_calls.append(args))
    for run in runs:
        build_lite.main(run[2:])  # the arguments the tool's parser takes
    assert len(parser_calls[1][2]) == 2  # pure wheels, then Pyodide's distribution
    uses = [s.get("uses", "").split("@")[0] for job in workflow["jobs"].values()
            for s in job["steps"]]
    assert {"actions/upload-pages-artifact", "actions/deploy-pages"} <= set(uses)

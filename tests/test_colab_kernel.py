"""The explorers work kernel-side with Colab's widget stack (issue 24).

Colab (Python 3.13 since 2026-08-19) still runs ipywidgets 7.7.1 and
IPython 7.34. A virtual environment here gets exactly those (with the other
packages of that stack: widgetsnbextension 3.6.10, jupyterlab_widgets 1.1.11,
ipython_genutils 0.2.0, backcall, pickleshare, decorator 4.4.2 and ipykernel
6.17.1, as on Colab) on the Python that runs the tests (3.11 here: no 3.13 on
this machine), and sees the project's venv *after* its own site-packages (a ``.pth`` file), so
numpy, matplotlib and actmem are not installed again. tests/colab_moves.py
then moves every offered value of every control of every notebook explorer
there and, at the same time, in the project's venv (ipywidgets 8); nothing
may raise or warn, and every readout after every move must be the same in
both. (MeasureExplorer, notebook 08, needs measured results: not moved.)
"""

import json
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COLAB = {"ipywidgets": "7.7.1", "IPython": "7.34.0"}
PINS = ["ipywidgets==7.7.1", "ipython==7.34.0", "widgetsnbextension==3.6.10",
        "jupyterlab_widgets==1.1.11", "ipython_genutils==0.2.0", "backcall==0.2.0",
        "pickleshare==0.7.5", "decorator==4.4.2", "ipykernel==6.17.1"]


@pytest.fixture(scope="module")
def colab_python(tmp_path_factory) -> Path:
    """A venv with Colab's ipywidgets and IPython, then the project's packages."""
    folder = tmp_path_factory.mktemp("colab") / "venv"
    venv.create(folder, with_pip=False)
    python = folder / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig."
                                "get_paths()['purelib'])"], capture_output=True, text=True,
                               check=True).stdout.strip())
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                              "--target", str(site), *PINS], capture_output=True, text=True)
    if install.returncode:
        pytest.skip(f"pip cannot install Colab's widget stack here ({' '.join(PINS)}): "
                    f"{install.stderr.strip()[-300:]}")
    project = sysconfig.get_paths()["purelib"]  # addsitedir also reads its .pth (actmem)
    (site / "zz_project_venv.pth").write_text(f"import site; site.addsitedir({project!r})\n")
    return python


def run_moves(python) -> subprocess.Popen:
    return subprocess.Popen([str(python), str(ROOT / "tests" / "colab_moves.py")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)


def finished(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err[-3000:]
    return json.loads(out)


@pytest.fixture(scope="module")
def runs(colab_python):
    """(Colab's run, the project's run), run side by side."""
    colab, project = run_moves(colab_python), run_moves(sys.executable)
    return finished(colab), finished(project)


def test_the_venv_has_colab_widgets_and_ipython(runs):
    colab, project = runs
    assert {k: colab[k] for k in COLAB} == COLAB
    assert project["ipywidgets"].startswith("8.")


def test_every_control_of_every_explorer_was_moved(runs):
    colab, _ = runs
    from colab_moves import EXPLORERS
    for name, make in EXPLORERS.items():
        moved = {control for control, _, _ in colab["moves"][name]}
        assert moved == set(make().controls), name
    assert sum(map(len, colab["moves"].values())) > 250


def test_readouts_follow_every_move_as_with_ipywidgets_8(runs):
    colab, project = runs
    assert colab["moves"] == project["moves"]
    for name, records in colab["moves"].items():
        shown = {json.dumps(readouts, sort_keys=True) for _, _, readouts in records}
        assert len(shown) > 2, f"{name}'s readouts never changed"

"""tools/refresh_notebooks.py (issue 41): the documented refresh checks for
torch before it writes anything, writes nothing when a notebook fails, and
rewrites learner/ from notebooks/."""

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "refresh_notebooks.py"
sys.path.insert(0, str(ROOT / "tools"))
import refresh_notebooks  # noqa: E402
from actmem.learner import NOTEBOOKS, learner_build  # noqa: E402

HIDE_TORCH = ("import runpy, sys; sys.modules['torch'] = None; sys.argv = sys.argv[1:]; "
              "runpy.run_path(sys.argv[0], run_name='__main__')")
"""Run the tool in a Python where ``import torch`` fails (a None in
sys.modules stops the import as if torch were not installed)."""


def snapshot(*folders: Path) -> dict:
    return {p: p.read_bytes() for f in folders for p in sorted(f.rglob("*")) if p.is_file()}


def test_without_torch_it_refuses_before_writing_anything(tmp_path):
    notebook = tmp_path / "01_variables.ipynb"
    shutil.copy(ROOT / "notebooks" / "01_variables.ipynb", notebook)
    before = snapshot(tmp_path, ROOT / "learner", ROOT / "notebooks")
    result = subprocess.run([sys.executable, "-c", HIDE_TORCH, str(TOOL), str(notebook)],
                            capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 2, result.stderr
    assert "nothing was written" in result.stderr
    assert "torch is not importable" in result.stderr
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" \
        in result.stderr
    assert "running" not in result.stdout  # no notebook was started
    assert snapshot(tmp_path, ROOT / "learner", ROOT / "notebooks") == before


def test_a_failing_notebook_leaves_every_file_as_it_was(tmp_path, monkeypatch, capsys):
    paths = []
    for name in ("01_variables.ipynb", "02_term_decomposition.ipynb"):
        shutil.copy(ROOT / "notebooks" / name, tmp_path / name)
        paths.append(tmp_path / name)
    before = snapshot(tmp_path)
    monkeypatch.setattr(refresh_notebooks, "missing", lambda: [])

    def execute(path):
        if path.name.startswith("02"):
            raise RuntimeError("a cell failed")
        nb = nbformat.read(path, as_version=4)
        nb.cells[0].source += "\nran"
        return nb

    monkeypatch.setattr(refresh_notebooks, "execute", execute)
    monkeypatch.setattr(refresh_notebooks, "write_learner_build",
                        lambda *a: pytest.fail("learner/ written after a failure"))
    assert refresh_notebooks.main([str(p) for p in paths]) == 1
    captured = capsys.readouterr()
    assert "[1/2] running" in captured.out and "[2/2] running" in captured.out
    assert "nothing was written: RuntimeError: a cell failed" in captured.err
    assert snapshot(tmp_path) == before


def test_learner_only_rewrites_the_learner_version_and_runs_nothing(tmp_path, monkeypatch,
                                                                    capsys):
    monkeypatch.setattr(refresh_notebooks, "LEARNER", tmp_path / "learner")
    monkeypatch.setattr(refresh_notebooks, "missing",
                        lambda: pytest.fail("--learner-only needs nothing"))
    monkeypatch.setattr(refresh_notebooks, "execute",
                        lambda path: pytest.fail("--learner-only runs nothing"))
    assert refresh_notebooks.main(["--learner-only"]) == 0
    build = learner_build(NOTEBOOKS)
    assert f"learner/: {len(build)} notebooks rewritten" in capsys.readouterr().out
    assert {p: (tmp_path / "learner" / p).read_text(encoding="utf-8") for p in build} == build
    assert refresh_notebooks.main(["--learner-only"]) == 0
    assert "learner/: up to date" in capsys.readouterr().out


def test_the_readme_and_contributing_show_this_tool():
    for doc in ("README.md", "CONTRIBUTING.md"):
        text = (ROOT / doc).read_text(encoding="utf-8")
        assert "tools/refresh_notebooks.py" in text, doc
        assert "nbconvert --to notebook --execute" not in text, doc

"""A learner's own copy (issue 41): the learner version of the course
(actmem.learner, tracked in learner/ for Colab, Binder and JupyterLite) and
the README's Learn command that copies it into my-notebooks/ (actmem.learn).

The learner version has no speaker notes, no test checks and no outputs,
and keeps every answer folded; learner/ is the current learner version of
notebooks/. The Learn command writes the copy once, into a folder git
ignores, never overwrites it on a later run, and ``--refresh`` replaces only
the notebooks the learner did not change, writing the new version of the
others beside them."""

import ast
import json
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager
from nbclient import NotebookClient

from actmem import learn
from actmem.learner import (LEARNER, NOTEBOOKS, ROOT, TEST_CHECK, cells_digest,
                            course_notebooks, is_notes, is_test_check, learner_build,
                            learner_version, write_learner_build)

PATHS = course_notebooks(NOTEBOOKS)
NOTES = re.compile(r"Speaker notes|讲师提示")
CHECK_PROSE = re.compile(r"for the (?:automated )?tests|automated tests|供测试用|给自动测试用|"
                         r"drives the controls as a person would|模拟读者")
"""Prose that introduces a test check (it must leave with the check)."""


def name(path: Path) -> str:
    return path.as_posix()


def read(folder: Path, path: Path):
    return nbformat.read(folder / path, as_version=4)


def test_the_course_has_both_languages():
    assert len(PATHS) >= 20 and any(p.parts[0] == "zh" for p in PATHS)


def test_learner_folder_is_the_current_learner_version_of_notebooks():
    """learner/ (what Colab, Binder and JupyterLite open) is generated from
    notebooks/; rewrite it with ``python tools/refresh_notebooks.py
    --learner-only`` after editing a notebook."""
    build = learner_build(NOTEBOOKS)
    stale = [name(p) for p, text in build.items()
             if not (LEARNER / p).is_file() or (LEARNER / p).read_text(encoding="utf-8") != text]
    extra = sorted(set(map(name, course_notebooks(LEARNER))) - set(map(name, build)))
    assert not stale and not extra, (f"learner/ lags behind notebooks/ ({stale}, extra "
                                     f"{extra}): run python tools/refresh_notebooks.py "
                                     "--learner-only")


def test_learner_folder_is_tracked_and_the_copy_is_ignored():
    """git ignores my-notebooks/ (the learner's own copy: Run All and autosave
    change only it) and not learner/ (Colab and Binder need it in the repository)."""
    def ignored(path: str) -> bool:
        result = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", path])
        if result.returncode == 128:
            pytest.skip("not a git checkout: git check-ignore cannot answer")
        return result.returncode == 0

    assert learn.COPY == ROOT / "my-notebooks"
    assert ignored("my-notebooks/01_variables.ipynb")
    assert ignored("my-notebooks/zh/01_variables.ipynb")
    assert ignored(f"my-notebooks/{learn.MANIFEST}")
    assert not ignored("learner/01_variables.ipynb")
    assert not ignored("learner/zh/01_variables.ipynb")


@pytest.mark.parametrize("path", PATHS, ids=name)
def test_learner_version_has_no_notes_checks_or_outputs(path):
    original, learner = read(NOTEBOOKS, path), read(LEARNER, path)
    assert any(is_notes(c) for c in original.cells)
    assert not any(is_notes(c) or is_test_check(c) for c in learner.cells)
    text = "\n".join(c.source for c in learner.cells)
    assert not NOTES.search(text), NOTES.search(text)
    assert not CHECK_PROSE.search(text), CHECK_PROSE.search(text)
    code = [c for c in learner.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code)
    assert not [t for c in learner.cells for t in c.metadata.get("tags", [])
                if t.startswith("nbval") or t == TEST_CHECK]
    assert "widgets" not in learner.metadata
    assert learner.metadata.kernelspec == original.metadata.kernelspec


@pytest.mark.parametrize("path", PATHS, ids=name)
def test_learner_version_keeps_the_answers_folded(path):
    """Answers are present but closed: every <details> answer of the
    markdown, the answers' cell (code collapsed, printing inside
    hidden_answers) and every "predict first" cell (its result closed)."""
    original, learner = read(NOTEBOOKS, path), read(LEARNER, path)

    def details(nb):
        return [m for c in nb.cells if c.cell_type == "markdown"
                for m in re.findall(r"<details[^>]*>", c.source)]

    assert details(learner) == details(original) and details(learner)
    assert all(d == "<details>" for d in details(learner))  # none opened
    answers = [c for c in learner.cells if c.cell_type == "code"][-1]
    assert answers.source.startswith("with actmem.hidden_answers():\n")
    assert answers.metadata.get("jupyter", {}).get("source_hidden") is True
    closed = [c.source for c in original.cells if c.cell_type == "code"
              and re.search(r"hidden_answers\(|hidden_figure\(", c.source)]
    assert closed == [c.source for c in learner.cells if c.cell_type == "code"
                      and re.search(r"hidden_answers\(|hidden_figure\(", c.source)]


def bound_and_used(source: str) -> tuple[set, set]:
    tree = ast.parse(TransformerManager().transform_cell(source))
    names = [n for n in ast.walk(tree) if isinstance(n, ast.Name)]
    return ({n.id for n in names if isinstance(n.ctx, ast.Store)},
            {n.id for n in names if isinstance(n.ctx, ast.Load)})


@pytest.mark.parametrize("path", PATHS, ids=name)
def test_no_kept_cell_needs_a_removed_check(path):
    """The learner version runs what nbval runs, less the test checks: no
    kept cell reads a name a check binds, so each runs as it does under
    nbval (and the checks set their widgets back to where they started)."""
    code = [c for c in read(NOTEBOOKS, path).cells if c.cell_type == "code"]
    for i, cell in enumerate(code):
        if is_test_check(cell):
            bound = bound_and_used(cell.source)[0]
            for later in code[i + 1:]:
                if not is_test_check(later):
                    assert not bound & bound_and_used(later.source)[1], later.source[:80]
    kept = [c.source for c in read(LEARNER, path).cells if c.cell_type == "code"]
    assert kept == [c.source for c in code if not is_test_check(c)]


def test_a_learner_version_runs_and_its_answers_stay_closed(tmp_path):
    """One real Run All of a learner version with a predict-first cell and a
    removed check (01): no error, and every answer it prints is closed."""
    shutil.copy(LEARNER / "01_variables.ipynb", tmp_path)
    nb = nbformat.read(tmp_path / "01_variables.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = [o.data["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert len(html) == 2 and all(h.startswith("<details><summary>") for h in html)
    assert not any("<details open" in h for h in html)


# ------------------------------------------------------------ the Learn command

@pytest.fixture
def course(tmp_path):
    """A small course of two notebooks (01 and zh/01), to change at will."""
    source = tmp_path / "notebooks"
    (source / "zh").mkdir(parents=True)
    shutil.copy(NOTEBOOKS / "01_variables.ipynb", source)
    shutil.copy(NOTEBOOKS / "zh" / "01_variables.ipynb", source / "zh")
    return source


def edit_source(path: Path, text: str) -> None:
    """Append ``text`` to the first markdown cell of the notebook at ``path``."""
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source += text
    nbformat.write(nb, path)


def run_cells(path: Path) -> None:
    """What Run All and autosave do to a notebook: outputs, counts, metadata."""
    nb = nbformat.read(path, as_version=4)
    for k, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        cell.execution_count = k + 1
        cell.outputs = [nbformat.v4.new_output("stream", text="ran\n")]
    nb.metadata["language_info"] = {"name": "python", "version": "3.99"}
    nbformat.write(nb, path)


def test_the_copy_is_the_learner_version(course, tmp_path):
    copy = tmp_path / "mine"
    written = learn.make_copy(copy, course)
    assert sorted(written) == [copy / "01_variables.ipynb", copy / "zh" / "01_variables.ipynb"]
    for path, text in learner_build(course).items():
        assert (copy / path).read_text(encoding="utf-8") == text
    assert learn.read_manifest(copy) == {
        name(p): cells_digest(learner_version(read(course, p))) for p in learner_build(course)}


def test_an_existing_copy_is_not_overwritten(course, tmp_path, capsys):
    copy = tmp_path / "mine"
    assert learn.main(["--no-open", "--folder", str(copy)]) == 0
    assert "made your own copy" in capsys.readouterr().out
    edit_source(copy / "01_variables.ipynb", "\nmy notes")
    run_cells(copy / "zh" / "01_variables.ipynb")
    before = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    assert learn.make_copy(copy, course) == []
    assert learn.main(["--no-open", "--folder", str(copy)]) == 0
    assert "is kept as it is" in capsys.readouterr().out
    assert {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()} == before


def test_the_learn_command_says_when_the_course_changed(course, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(learn, "NOTEBOOKS", course)
    copy = tmp_path / "mine"
    learn.main(["--no-open", "--folder", str(copy)])
    edit_source(course / "01_variables.ipynb", "\nA new paragraph.")
    capsys.readouterr()
    learn.main(["--no-open", "--folder", str(copy)])
    assert "the course changed since your copy was made or refreshed (1 of its notebooks)" \
        in capsys.readouterr().out
    assert "A new paragraph." not in (copy / "01_variables.ipynb").read_text(encoding="utf-8")


def test_refresh_updates_untouched_notebooks_and_keeps_changed_ones(course, tmp_path):
    copy = tmp_path / "mine"
    learn.make_copy(copy, course)
    run_cells(copy / "01_variables.ipynb")                 # run, not changed
    edit_source(copy / "zh" / "01_variables.ipynb", "\n我的笔记")  # changed by the learner
    mine = (copy / "zh" / "01_variables.ipynb").read_bytes()
    for path in course_notebooks(course):
        edit_source(course / path, "\nNew in the course.")
    shutil.copy(NOTEBOOKS / "02_term_decomposition.ipynb", course)  # a new notebook

    report = dict(learn.refresh_copy(copy, course))
    assert report == {Path("01_variables.ipynb"): "updated",
                      Path("02_term_decomposition.ipynb"): "added",
                      Path("zh/01_variables.ipynb"):
                          "yours kept, new version beside it (01_variables.new.ipynb)"}
    build = learner_build(course)
    for path in (Path("01_variables.ipynb"), Path("02_term_decomposition.ipynb")):
        assert (copy / path).read_text(encoding="utf-8") == build[path]
    assert (copy / "zh" / "01_variables.ipynb").read_bytes() == mine
    assert (copy / "zh" / "01_variables.new.ipynb").read_text(encoding="utf-8") == \
        build[Path("zh/01_variables.ipynb")]

    # again: nothing to do; the learner's own file and the new one stay
    report = dict(learn.refresh_copy(copy, course))
    assert report[Path("01_variables.ipynb")] == "up to date"
    assert (copy / "zh" / "01_variables.ipynb").read_bytes() == mine

    # the learner edits the .new file too; the course changes again: nothing of theirs moves
    edit_source(copy / "zh" / "01_variables.new.ipynb", "\n也改了")
    theirs = (copy / "zh" / "01_variables.new.ipynb").read_bytes()
    edit_source(course / "zh" / "01_variables.ipynb", "\nAgain.")
    report = dict(learn.refresh_copy(copy, course))
    assert report[Path("zh/01_variables.ipynb")].endswith("nothing written; rename "
                                                          "01_variables.new.ipynb and refresh again")
    assert (copy / "zh" / "01_variables.ipynb").read_bytes() == mine
    assert (copy / "zh" / "01_variables.new.ipynb").read_bytes() == theirs


def test_refresh_deletes_nothing(course, tmp_path):
    copy = tmp_path / "mine"
    learn.make_copy(copy, course)
    (copy / "scratch.ipynb").write_text("{}")
    (course / "zh" / "01_variables.ipynb").unlink()  # gone from the course
    learn.refresh_copy(copy, course)
    assert (copy / "scratch.ipynb").is_file() and (copy / "zh" / "01_variables.ipynb").is_file()


def test_refresh_of_a_copy_without_its_record_keeps_every_notebook(course, tmp_path):
    """A copy made by hand (no record of what was written) counts as the
    learner's own: a new version goes beside each notebook that differs."""
    copy = tmp_path / "mine"
    learn.make_copy(copy, course)
    (copy / learn.MANIFEST).unlink()
    edit_source(course / "01_variables.ipynb", "\nNew.")
    before = (copy / "01_variables.ipynb").read_bytes()
    report = dict(learn.refresh_copy(copy, course))
    assert report[Path("01_variables.ipynb")].startswith("yours kept")
    assert report[Path("zh/01_variables.ipynb")] == "up to date"
    assert (copy / "01_variables.ipynb").read_bytes() == before


def test_the_learn_command_opens_jupyterlab_on_the_copy(course, tmp_path, monkeypatch):
    """Options it does not know go to ``jupyter lab``; it opens the copy, not notebooks/."""
    monkeypatch.setattr(learn, "NOTEBOOKS", course)
    opened = []
    monkeypatch.setattr(learn, "open_lab", lambda folder, options: opened.append(
        (folder, options)) or 0)
    copy = tmp_path / "mine"
    assert learn.main(["--folder", str(copy), "--no-browser", "--allow-root"]) == 0
    assert opened == [(copy, ["--no-browser", "--allow-root"])]
    assert learn.jupyter_command(copy, ["--no-browser"])[1:] == [
        "-m", "jupyter", "lab", str(copy), "--no-browser"]


def test_without_jupyterlab_the_learn_command_says_what_to_install(tmp_path, monkeypatch,
                                                                    capsys):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "jupyterlab" else real(name, *a))
    assert learn.open_lab(tmp_path, []) == 1
    assert 'pip install -e ".[lab]"' in capsys.readouterr().err


def test_without_a_checkout_the_learn_command_fails_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(learn, "NOTEBOOKS", tmp_path / "nowhere")
    with pytest.raises(SystemExit) as exit_info:
        learn.main(["--no-open", "--folder", str(tmp_path / "mine")])
    assert exit_info.value.code == 2
    assert "needs a checkout of the repository" in capsys.readouterr().err
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(SystemExit):
        learn.main(["--no-open", "--folder", str(tmp_path / "a-file")])
    assert "is a file" in capsys.readouterr().err


def test_write_learner_build_removes_what_the_course_dropped(course, tmp_path):
    out = tmp_path / "learner"
    assert len(write_learner_build(out, course)) == 2
    assert write_learner_build(out, course) == []  # unchanged: nothing rewritten
    (course / "zh" / "01_variables.ipynb").unlink()
    assert write_learner_build(out, course) == [out / "zh" / "01_variables.ipynb"]
    assert not (out / "zh" / "01_variables.ipynb").exists()


def test_the_manifest_is_json_a_learner_can_read(course, tmp_path):
    copy = tmp_path / "mine"
    learn.make_copy(copy, course)
    record = json.loads((copy / learn.MANIFEST).read_text(encoding="utf-8"))
    assert "python -m actmem.learn" in record["about"]
    assert set(record["written"]) == {"01_variables.ipynb", "zh/01_variables.ipynb"}

"""``python -m actmem.workshop OUT_DIR`` (issue 12): a learner copy with no
answers and no test checks that still runs top to bottom, an instructor copy
with everything, clear errors, and notebooks/ left untouched."""

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from actmem.learner import is_test_check
from actmem.workshop import ANSWER, is_answer_cell, is_notes, learner_copy, main, write_copies

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PATHS = [*sorted(NOTEBOOKS.glob("*.ipynb")), *sorted(NOTEBOOKS.glob("zh/*.ipynb"))]
EXERCISES = {"en": "## Exercises", "zh": "## 练习"}
FILE_ACCESS = re.compile(r"\bopen\(|\bPath\(|\.read_(?:text|bytes)\(|\bnp\.load|\bjson\.load\("
                         r"|\bglob\(|\blistdir\(|__file__|^\s*%(?:run|load)\b", re.M)
"""Code that reads a file, which a copy in another folder may not find."""


def name(path: Path) -> str:
    return path.relative_to(NOTEBOOKS).as_posix()


def language(path: Path) -> str:
    return "zh" if path.parent.name == "zh" else "en"


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    before = {p: p.read_bytes() for p in PATHS}
    out = tmp_path_factory.mktemp("workshop") / "course"
    write_copies(out)
    assert {p: p.read_bytes() for p in PATHS} == before  # notebooks/ only read
    return out


def answers(nb) -> list[str]:
    """Every answer text of a notebook: its <details> blocks and the
    numbers its answer cell prints."""
    texts = [m.group(0) for c in nb.cells if c.cell_type == "markdown"
             for m in ANSWER.finditer(c.source)]
    printed = nb.cells[-1].outputs[0].data["text/plain"]
    return texts + [line for line in printed.splitlines() if line.strip()]


@pytest.mark.parametrize("path", PATHS, ids=name)
def test_no_answer_reaches_the_learner_copy(copies, path):
    original = nbformat.read(path, as_version=4)
    learner = nbformat.read(copies / "learner" / name(path), as_version=4)
    text = "\n".join(c.source for c in learner.cells)
    assert answers(original) and not any(a.strip() in text for a in answers(original))
    # the answers' cell is gone; a "predict first" cell may keep its own closed result
    # (hidden_answers("Show the result")), which the learner copy has not run
    assert "<details>" not in text and "hidden_answers()" not in text
    assert all(not c.outputs for c in learner.cells if c.cell_type == "code")
    heading = EXERCISES[language(path)]
    assert re.search(f"^{heading}", text, re.M) and "Colab" in text  # kept
    exercises = text.split(heading, 1)[1]
    assert len(re.findall(r"^\d\. ", exercises, re.M)) >= 2
    # no sentence is left pointing at the answers' cell that is gone (review M8: notebook
    # 10's "... numbers used in the answers and checks ...", "……用到的数字，并核对……")
    assert "The cell below computes" not in text and "下面的单元格计算答案" not in text


@pytest.mark.parametrize("path", PATHS, ids=name)
def test_the_instructor_copy_keeps_outputs_and_answers(copies, path):
    original = nbformat.read(path, as_version=4)
    instructor = nbformat.read(copies / "instructor" / name(path), as_version=4)
    notes = [i for i, c in enumerate(original.cells) if is_notes(c)]
    assert notes  # every notebook has speaker notes, shown to the instructor
    for i, (mine, theirs) in enumerate(zip(instructor.cells, original.cells, strict=True)):
        assert mine.source == theirs.source
        assert not is_notes(mine) and (i not in notes or re.match(
            r"\*\*(Speaker notes\.\*\*|讲师提示\*\*：)", mine.source))
    assert instructor.cells[-1].outputs == original.cells[-1].outputs


def code(nb) -> list[str]:
    """The sources of ``nb``'s code cells, in order."""
    return [c.source for c in nb.cells if c.cell_type == "code"]


@pytest.mark.parametrize("path", PATHS, ids=name)
def test_the_learner_copy_runs_what_nbval_runs_less_checks_and_answers(copies, path):
    """The learner copy's code is the original's code cells in order, less the
    test checks (tagged ``test-check``: no kept cell reads what they bind,
    tests/test_learner_copy.py) and the last one (the answers' cell, which no
    cell after it can use). nbval runs the original (README's test command, or
    ``pytest notebooks/NN.ipynb``) and fails on any exception, so every cell of
    the copy runs without error too; the copy runs in another folder, so no
    code cell may read a file beside the notebook. One copy is also run for
    real (below)."""
    original = nbformat.read(path, as_version=4)
    learner = nbformat.read(copies / "learner" / name(path), as_version=4)
    cells = [c for c in original.cells if c.cell_type == "code"]
    assert is_answer_cell(cells[-1]) and not any(is_answer_cell(c) for c in cells[:-1])
    assert code(learner) == [c.source for c in cells[:-1] if not is_test_check(c)]
    assert not [s for s in code(learner) if FILE_ACCESS.search(s)]
    assert not [o for c in original.cells for o in c.get("outputs", [])
                if o.output_type == "error"]  # nbval compares against these


@pytest.mark.parametrize("path", [NOTEBOOKS / "01_variables.ipynb"], ids=name)
def test_a_learner_copy_runs_top_to_bottom(copies, path):
    """A real run of one learner copy (the cheapest), in its own folder: the
    written file opens and runs in a fresh kernel. The others are proved by the
    test above (re-running all took about a tenth of the suite's CPU time)."""
    nb = nbformat.read(copies / "learner" / path.name, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(copies / "learner")}}).execute()
    original = nbformat.read(path, as_version=4)
    assert len([c for c in nb.cells if c.cell_type == "code"]) == len(
        [c for c in original.cells if c.cell_type == "code" and not is_test_check(c)]) - 1
    assert all(o.output_type != "error" for c in nb.cells for o in c.get("outputs", []))


def test_learner_copy_of_a_notebook_drops_speaker_notes():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("## A slide"),
        nbformat.v4.new_markdown_cell("pause here", metadata={"slideshow":
                                                              {"slide_type": "notes"}})])
    assert [c.source for c in learner_copy(nb).cells] == ["## A slide\n"]


def test_a_used_out_dir_is_refused(tmp_path, capsys):
    (tmp_path / "something").write_text("x")
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path)])
    assert exit_info.value.code == 2
    assert "exists and is not an empty folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tmp_path / "new"), "--source", str(tmp_path)])
    assert "no notebooks in" in capsys.readouterr().err

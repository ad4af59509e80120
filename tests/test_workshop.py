"""``python -m actmem.workshop OUT_DIR`` (issue 12): a learner copy with no
answers that still runs top to bottom, an instructor copy with everything,
clear errors, and notebooks/ left untouched."""

import importlib.util
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from actmem.workshop import ANSWER, is_notes, learner_copy, main, write_copies

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PATHS = [*sorted(NOTEBOOKS.glob("*.ipynb")), *sorted(NOTEBOOKS.glob("zh/*.ipynb"))]
EXERCISES = {"en": "## Exercises", "zh": "## 练习"}


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


@pytest.mark.parametrize("path", [p for p in PATHS if language(p) == "en"], ids=name)
def test_the_learner_copy_runs_top_to_bottom(copies, path):
    """English copies only: the Chinese ones run the same code (test_zh_parity)."""
    needs = nbformat.read(path, as_version=4).metadata.get("actmem", {}).get("requires", [])
    missing = [m for m in needs if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: pip install torch==2.13.0 "
                    "--index-url https://download.pytorch.org/whl/cpu")
    nb = nbformat.read(copies / "learner" / path.name, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(copies / "learner")}}).execute()
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

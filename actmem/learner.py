"""The learner version of the course: what a learner reads, nothing an instructor or a test needs.

A course notebook in ``notebooks/`` carries three things a learner has no
use for: speaker notes (slideshow ``notes`` cells), the cells that check the
widgets for the automated tests (tagged :data:`TEST_CHECK`, with the prose
that introduces them) and the outputs of the last refresh. The learner
version, :func:`learner_version`, leaves them out and keeps everything else:
the exercises with their answers folded (``<details>`` in the markdown,
closed until clicked; the answers' cell, whose code stays collapsed and
which prints inside :func:`actmem.hidden_answers`), and every "predict
first" cell, which shows its result closed (:mod:`actmem.views.answers`).

``learner/`` in the repository is this version of every notebook, English
and ``zh/``: what Colab, Binder and the JupyterLite site open, and what the
README's Learn command copies into a learner's own folder
(:mod:`actmem.learn`). It is written by :func:`write_learner_build`
(``python tools/refresh_notebooks.py``, or ``--learner-only``), and
``tests/test_learner_copy.py`` fails when it lags behind ``notebooks/``.
Notebooks are read and written with nbformat; nothing is executed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
"""The course's notebooks in a checkout of the repository (the instructor's)."""
LEARNER = ROOT / "learner"
"""The tracked learner version (Colab, Binder, JupyterLite, the Learn command)."""
TEST_CHECK = "test-check"
"""The cell tag of a cell that only checks the notebook for the tests (a
code cell that drives a widget and asserts what it shows, or the prose that
introduces one)."""


def is_notes(cell) -> bool:
    """A speaker-notes cell (slideshow type ``notes``)."""
    return cell.metadata.get("slideshow", {}).get("slide_type") == "notes"


def is_test_check(cell) -> bool:
    """A cell tagged :data:`TEST_CHECK`."""
    return TEST_CHECK in cell.metadata.get("tags", [])


def learner_version(nb):
    """``nb`` without speaker notes, test checks, outputs or widget state
    (a new notebook); answers and "predict first" cells kept, folded.

    Notebook metadata keeps the kernelspec and the language's name, not the
    Python version of the last refresh, so that the version changes only
    when the course's text or code does.
    """
    nb = nbformat.from_dict(nb)
    nb.cells = [c for c in nb.cells if not is_notes(c) and not is_test_check(c)]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            tags = [t for t in cell.metadata.get("tags", []) if not t.startswith("nbval")]
            if tags:
                cell.metadata["tags"] = tags
            else:
                cell.metadata.pop("tags", None)
    nb.metadata.pop("widgets", None)
    nb.metadata.get("language_info", {}).pop("version", None)
    return nb


def course_notebooks(source: Path = NOTEBOOKS) -> list[Path]:
    """The notebooks of ``source`` and of its language folders (``zh/``),
    as paths relative to ``source``."""
    source = Path(source)
    found = [*sorted(source.glob("*.ipynb")), *sorted(source.glob("*/*.ipynb"))]
    return [p.relative_to(source) for p in found if ".ipynb_checkpoints" not in p.parts]


def learner_build(source: Path = NOTEBOOKS) -> dict[Path, str]:
    """The learner version of every notebook of ``source``, as the text
    :func:`write_learner_build` writes, by relative path.

    Raises:
        FileNotFoundError: ``source`` holds no notebooks.
    """
    paths = course_notebooks(source)
    if not paths:
        raise FileNotFoundError(f"no notebooks in {str(source)!r}; run this from a "
                                "checkout of the repository")
    return {path: nbformat.writes(learner_version(nbformat.read(Path(source) / path,
                                                                as_version=4))) + "\n"
            for path in paths}


def write_learner_build(out: Path = LEARNER, source: Path = NOTEBOOKS) -> list[Path]:
    """Write :func:`learner_build` of ``source`` into ``out``; returns the
    files whose text changed. Notebooks in ``out`` that ``source`` no longer
    has are removed (``out`` is generated, never edited by hand)."""
    out = Path(out)
    build = learner_build(source)
    changed = []
    for path, text in build.items():
        target = out / path
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            changed.append(target)
    for stale in set(course_notebooks(out)) - set(build) if out.is_dir() else ():
        (out / stale).unlink()
        changed.append(out / stale)
    return changed


def cells_digest(nb) -> str:
    """A sha256 of ``nb``'s cells as a reader edits them: each cell's type
    and source. Running a notebook, saving it or opening its kernel changes
    outputs, execution counts and metadata, never this digest; editing or
    adding a cell does."""
    cells = [[c.cell_type, c.source] for c in nb.cells]
    return hashlib.sha256(json.dumps(cells, ensure_ascii=False).encode()).hexdigest()

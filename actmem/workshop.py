"""Copies of the course for a workshop: ``python -m actmem.workshop OUT_DIR``.

Writes two folders under ``OUT_DIR`` (which must not exist, or be empty),
each with the English notebooks and, in ``zh/``, the Chinese ones:

* ``learner/``: the learner version of every notebook
  (:func:`actmem.learner.learner_version`: no speaker notes, no test checks,
  no outputs) with the answers removed too: the answer cells (the last code
  cell, which prints inside :func:`actmem.hidden_answers`) and every
  ``<details>`` answer; the exercises and the set-up cell stay. Attendees
  run it top to bottom. (A learner studying alone uses the README's Learn
  command instead, :mod:`actmem.learn`, which keeps the answers, folded.)
* ``instructor/``: the notebooks as they are, outputs and answers kept,
  with the speaker notes (slideshow ``notes`` cells, which start with
  "Speaker notes" or 讲师提示) shown as ordinary cells.

``notebooks/`` itself is only read. Notebooks are read and written with
nbformat; nothing is executed.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

from .learner import NOTEBOOKS, course_notebooks, is_notes, learner_version

ANSWER = re.compile(r"\n?[ \t]*<details><summary>(?:Answer|答案)</summary>.*?</details>"
                    r"[ \t]*\n?", re.DOTALL)
"""One exercise answer in a markdown cell (with the blank lines around it),
in English or Chinese."""
ANSWER_NOTE = re.compile(r"\n*(?:The cell below computes the numbers used in the answers[. ]"
                         r"|下面的单元格计算答案中用到的数字[。，]).*\Z", re.DOTALL)
"""The closing note that points at the answer cell."""


def is_answer_cell(cell) -> bool:
    """The cell that prints the answers' numbers (inside ``hidden_answers``)."""
    return cell.cell_type == "code" and "actmem.hidden_answers()" in cell.source


def learner_copy(nb):
    """``nb``'s learner version without its answers (a new notebook)."""
    nb = learner_version(nb)
    nb.cells = [c for c in nb.cells if not is_answer_cell(c)]
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = ANSWER_NOTE.sub("\n", ANSWER.sub("\n", cell.source)).rstrip() + "\n"
    return nb


def instructor_copy(nb):
    """``nb`` with its speaker notes shown as ordinary markdown (a new notebook)."""
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        if is_notes(cell):
            cell.metadata["slideshow"]["slide_type"] = "-"
    return nb


def write_copies(out_dir: Path, source: Path = NOTEBOOKS) -> list[Path]:
    """Write ``learner/`` and ``instructor/`` under ``out_dir``; returns the
    files written.

    Raises:
        FileExistsError: ``out_dir`` exists and is not an empty folder.
        FileNotFoundError: ``source`` holds no notebooks.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise FileExistsError(f"OUT_DIR={str(out_dir)!r} exists and is not an empty "
                              "folder; choose a new one")
    paths = course_notebooks(Path(source))
    if not paths:
        raise FileNotFoundError(f"no notebooks in {str(source)!r}; run this from a "
                                "checkout of the repository or pass --source")
    written = []
    for folder, copy in (("learner", learner_copy), ("instructor", instructor_copy)):
        (out_dir / folder).mkdir(parents=True)
        for path in paths:
            target = out_dir / folder / path
            target.parent.mkdir(exist_ok=True)
            nbformat.write(copy(nbformat.read(Path(source) / path, as_version=4)), target)
            written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    """Command line; exits 2 with one line on a bad OUT_DIR or source."""
    parser = argparse.ArgumentParser(
        prog="python -m actmem.workshop",
        description="Write a workshop's learner copy (no outputs, no answers) and an "
                    "instructor copy (everything, speaker notes shown) of the course's "
                    "notebooks.")
    parser.add_argument("out_dir", metavar="OUT_DIR", type=Path,
                        help="a new (or empty) folder to write learner/ and instructor/ into")
    parser.add_argument("--source", type=Path, default=NOTEBOOKS,
                        help="the folder of notebooks to copy (default: the repository's)")
    args = parser.parse_args(argv)
    try:
        written = write_copies(args.out_dir, args.source)
    except OSError as error:  # exists, missing, under a file, name too long, disk full
        parser.error(str(error))
    print(f"wrote {len(written) // 2} notebooks to each of {args.out_dir / 'learner'} and "
          f"{args.out_dir / 'instructor'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

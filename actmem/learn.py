"""The README's Learn command: a learner's own copy of the course, opened in JupyterLab.

    python -m actmem.learn [--refresh] [--no-open] [JupyterLab options]

The first run writes the learner version of every notebook
(:func:`actmem.learner.learner_version`: no speaker notes, no test checks,
no outputs; answers folded) into :data:`COPY`, ``my-notebooks/`` at the
root of the checkout, which git ignores; then it opens JupyterLab on that
folder. Run All and autosave change only the learner's own files, so
``git status`` stays clean and ``git pull`` can update ``notebooks/``.

Later runs keep the copy as it is (never overwritten without asking) and
say how many notebooks of the course changed since it was made.
``--refresh`` (after a ``git pull``) brings the copy up to date, notebook
by notebook:

* a notebook the copy lacks is written;
* a notebook whose cells the learner did not change (running it, which
  changes only outputs, does not count) is replaced by the new version;
* a notebook the learner changed is kept, and the new version is written
  beside it as ``NAME.new.ipynb`` (replacing an earlier ``.new`` file only
  if the learner did not change that one either).

What counts as changed is the cells' types and sources
(:func:`actmem.learner.cells_digest`), compared with what this command last
wrote (recorded in :data:`MANIFEST` inside the copy). Nothing is ever
deleted. Other options (``--no-browser``, ``--allow-root``, ``--port``) go
to ``jupyter lab``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat

from .learner import NOTEBOOKS, ROOT, cells_digest, learner_build

COPY = ROOT / "my-notebooks"
"""The learner's own copy (``.gitignore`` lists it)."""
MANIFEST = ".actmem-copy.json"
"""Inside the copy: the cells' digest of each notebook as this command last
wrote it (a dot file: JupyterLab does not list it)."""
NEW = ".new.ipynb"
"""The ending of a new version written beside a notebook the learner changed."""


def read_manifest(folder: Path) -> dict[str, str]:
    """``{relative path: cells digest}`` of what was last written (empty if none)."""
    try:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["written"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def write_manifest(folder: Path, written: dict[str, str]) -> None:
    about = ("Written by `python -m actmem.learn`: the cells' digest of each notebook as "
             "it last wrote it, so that --refresh knows which ones you changed.")
    (folder / MANIFEST).write_text(json.dumps({"about": about, "written": written},
                                              indent=1, sort_keys=True) + "\n",
                                   encoding="utf-8")


def digest_of(path: Path) -> str | None:
    """The cells' digest of the notebook at ``path`` (None if it is not one)."""
    try:
        return cells_digest(nbformat.read(path, as_version=4))
    except (OSError, ValueError, KeyError, AttributeError):
        return None


def beside(path: Path) -> Path:
    """Where the new version of a notebook the learner changed goes."""
    return path.with_name(path.name.removesuffix(".ipynb") + NEW)


def make_copy(folder: Path = COPY, source: Path = NOTEBOOKS) -> list[Path]:
    """Write the learner version of ``source`` into ``folder`` unless
    ``folder`` already holds something; returns the files written (none
    when a copy is there)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{str(folder)!r} is a file, not a folder for the copy")
    if folder.exists() and any(folder.iterdir()):
        return []
    build = learner_build(source)
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for path, text in build.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text, encoding="utf-8")
        written[path.as_posix()] = cells_digest(nbformat.reads(text, as_version=4))
    write_manifest(folder, written)
    return [folder / p for p in build]


def outdated(folder: Path = COPY, source: Path = NOTEBOOKS) -> list[Path]:
    """The notebooks of the course (relative paths) whose current version
    differs from what this command last wrote into ``folder``."""
    written = read_manifest(Path(folder))
    return [path for path, text in learner_build(source).items()
            if written.get(path.as_posix()) != cells_digest(nbformat.reads(text, as_version=4))]


def refresh_copy(folder: Path = COPY, source: Path = NOTEBOOKS) -> list[tuple[Path, str]]:
    """Bring ``folder`` up to date with ``source`` (the rules in this
    module's docstring); returns ``(relative path, what happened)`` for every
    notebook of the course: ``"added"``, ``"updated"``, ``"up to date"``,
    ``"yours kept, new version beside it"`` or ``"yours kept, and yours
    beside it: nothing written"``."""
    folder = Path(folder)
    written = read_manifest(folder)
    report = []
    for path, text in learner_build(source).items():
        target, key = folder / path, path.as_posix()
        new = cells_digest(nbformat.reads(text, as_version=4))
        mine = digest_of(target) if target.exists() else None
        if not target.exists() or (mine is not None and mine == written.get(key) != new):
            what = "updated" if target.exists() else "added"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            written[key] = new
        elif mine == new:
            what = "up to date"
            written[key] = new
        else:
            other, other_key = beside(target), beside(path).as_posix()
            theirs = digest_of(other) if other.exists() else None
            if theirs == new:
                what = f"yours kept, new version beside it ({other.name})"
            elif not other.exists() or theirs == written.get(other_key):
                other.write_text(text, encoding="utf-8")
                written[other_key] = new
                what = f"yours kept, new version beside it ({other.name})"
            else:
                what = (f"yours kept, and yours beside it ({other.name}): nothing written; "
                        f"rename {other.name} and refresh again")
        report.append((path, what))
    write_manifest(folder, written)
    return report


def jupyter_command(folder: Path, options: list[str]) -> list[str]:
    """``jupyter lab FOLDER OPTIONS`` with this Python."""
    return [sys.executable, "-m", "jupyter", "lab", str(folder), *options]


def open_lab(folder: Path, options: list[str]) -> int:
    """Open JupyterLab on ``folder`` (this process becomes JupyterLab where
    the system allows it, so that Ctrl+C reaches it alone)."""
    if importlib.util.find_spec("jupyterlab") is None:
        print("actmem.learn: JupyterLab is not installed in this environment: "
              "pip install -e \".[lab]\" (the README's Learn command)", file=sys.stderr)
        return 1
    command = jupyter_command(folder, options)
    print(f"opening JupyterLab on {shown(folder)}: {' '.join(command[3:])}", flush=True)
    if os.name == "posix":
        os.execv(command[0], command)
    return subprocess.call(command)


def shown(folder: Path) -> str:
    """``folder`` relative to the checkout when it is inside it."""
    try:
        return Path(folder).resolve().relative_to(ROOT).as_posix() + "/"
    except ValueError:
        return str(folder)


class _Formatter(argparse.HelpFormatter):
    """argparse's help, wrapped without breaking ``my-notebooks/`` at its hyphen."""

    def _fill_text(self, text, width, indent):
        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent,
                             subsequent_indent=indent, break_on_hyphens=False)

    def _split_lines(self, text, width):
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m actmem.learn", allow_abbrev=False, formatter_class=_Formatter,
        description="Open your own copy of the course in JupyterLab. The first run writes "
                    "it to my-notebooks/ (git ignores it): every notebook without speaker "
                    "notes, test checks or outputs, with the answers folded. Later runs "
                    "keep it as it is.",
        epilog="Other options go to jupyter lab, e.g. --no-browser, --allow-root, "
               "--port 8889.")
    parser.add_argument("--refresh", action="store_true",
                        help="after a git pull: replace the notebooks you did not change "
                             "by their new version; for those you changed, write the new "
                             "version beside yours as NAME.new.ipynb")
    parser.add_argument("--no-open", dest="open", action="store_false",
                        help="make or refresh the copy, do not open JupyterLab")
    parser.add_argument("--folder", type=Path, default=COPY,
                        help="where the copy lives (default: my-notebooks/ in the checkout)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Command line; exits 2 with one line when there is no course to copy."""
    parser = build_parser()
    args, options = parser.parse_known_args(argv)
    folder = args.folder
    try:
        if args.refresh:
            print(f"refreshing your copy in {shown(folder)} from notebooks/", flush=True)
            report = refresh_copy(folder, NOTEBOOKS)
            for path, what in report:
                if what != "up to date":
                    print(f"  {path.as_posix()}: {what}")
            same = sum(what == "up to date" for _, what in report)
            print(f"done: {same} of {len(report)} notebooks were up to date", flush=True)
        elif written := make_copy(folder, NOTEBOOKS):
            ignored = " git ignores it and" if Path(folder).resolve() == COPY else ""
            print(f"made your own copy of the course in {shown(folder)} ({len(written)} "
                  "notebooks: no speaker notes, no test checks, answers folded). It is "
                  f"yours:{ignored} this command never overwrites it.", flush=True)
        else:
            stale = outdated(folder, NOTEBOOKS)
            print(f"your copy in {shown(folder)} is kept as it is", flush=True)
            if stale:
                print(f"  the course changed since your copy was made or refreshed "
                      f"({len(stale)} of its notebooks): python -m actmem.learn --refresh "
                      "updates them (your own changes are kept)", flush=True)
    except (FileNotFoundError, NotADirectoryError) as error:
        parser.error(f"{error} (the Learn command needs a checkout of the repository)")
    return open_lab(folder, options) if args.open else 0


if __name__ == "__main__":
    sys.exit(main())

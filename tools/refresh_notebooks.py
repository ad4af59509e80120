"""Refresh the notebooks' saved outputs (nbval compares them), then the learner version.

    python tools/refresh_notebooks.py [NOTEBOOK ...]     # default: every notebook, both languages
    python tools/refresh_notebooks.py --learner-only    # learner/ only, nothing executed

First it checks what the run needs, before it writes anything: torch (notebook 08 measures
with it, and notebook 06 shows a stored measurement instead of a live one without it, so
its outputs would change), nbclient and a ``python3`` kernel. Then it runs each notebook in a
fresh kernel, in the notebook's own folder, as ``jupyter nbconvert --to notebook --execute
--inplace --ExecutePreprocessor.record_timing=False`` did, one line per notebook. Only when
every notebook ran without an error are they written; a failure leaves every file as it
was. Last, ``learner/`` is rewritten from ``notebooks/``
(:func:`actmem.learner.write_learner_build`), which is all ``--learner-only`` does.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from actmem.learner import LEARNER, NOTEBOOKS, course_notebooks, write_learner_build  # noqa: E402

TORCH = ".venv/bin/pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
TIMEOUT = 600
"""Seconds one cell may run (notebook 08's measurement takes about 35 s of CPU)."""


def missing() -> list[str]:
    """What the run needs and lacks, one sentence each (empty: all there)."""
    problems = []
    try:
        import torch  # noqa: F401
    except Exception as error:  # ImportError, or a broken install
        problems.append(f"torch is not importable ({error}): notebook 08 measures with it and "
                        f"notebook 06 measures live with it. Install it: {TORCH}")
    try:
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
        import nbclient  # noqa: F401
    except ImportError as error:
        problems.append(f"{error.name or error} is not installed: pip install -e \".[test]\"")
    else:
        try:
            KernelSpecManager().get_kernel_spec("python3")
        except NoSuchKernel:
            problems.append("no python3 kernel: pip install ipykernel")
    return problems


def execute(path: Path):
    """The notebook at ``path``, run top to bottom in a fresh kernel (a new
    notebook object; the file is not written)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return nb


def refresh(paths: list[Path]) -> None:
    """Run every notebook of ``paths``, then write them all (none if one fails)."""
    import nbformat

    done = []
    for k, path in enumerate(paths, 1):
        print(f"[{k}/{len(paths)}] running {shown(path)} ...", end=" ", flush=True)
        start = time.monotonic()
        done.append((path, execute(path)))
        print(f"{time.monotonic() - start:.0f} s", flush=True)
    for path, nb in done:
        nbformat.write(nb, path)
    print(f"wrote the outputs of {len(done)} notebooks", flush=True)


def shown(path: Path) -> str:
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tools/refresh_notebooks.py",
        description="Run the course's notebooks and save their outputs (both languages), "
                    "then rewrite learner/. Checks for torch and nbclient before it writes "
                    "anything, and writes nothing if a notebook fails.")
    parser.add_argument("notebooks", nargs="*", type=Path, metavar="NOTEBOOK",
                        help="notebooks to run (default: every notebook in notebooks/ and "
                             "notebooks/zh/)")
    parser.add_argument("--learner-only", action="store_true",
                        help="only rewrite learner/ from notebooks/ (runs nothing)")
    args = parser.parse_args(argv)
    if not args.learner_only:
        problems = missing()
        if problems:
            print("refresh_notebooks: nothing was written:\n" +
                  "\n".join(f"  - {p}" for p in problems), file=sys.stderr)
            return 2
        paths = args.notebooks or [NOTEBOOKS / p for p in course_notebooks(NOTEBOOKS)]
        try:
            refresh(paths)
        except Exception as error:  # a cell's error, a timeout, a dead kernel
            print(f"\nrefresh_notebooks: nothing was written: {type(error).__name__}: {error}",
                  file=sys.stderr)
            return 1
    changed = write_learner_build(LEARNER, NOTEBOOKS)
    print(f"learner/: {len(changed)} notebooks rewritten" if changed else
          "learner/: up to date", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

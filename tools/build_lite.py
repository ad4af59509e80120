"""Build the course as a zero-install JupyterLite site (docs/jupyterlite.md).

    python tools/build_lite.py OUT [--pyodide DIR]

Everything is done by the ``jupyter lite`` CLI of jupyterlite-core and
jupyterlite-pyodide-kernel 0.8.6 (the ``lite`` extra); this script only
gathers its inputs: actmem's wheel (built from this checkout, offered to the
in-browser ``%pip`` through piplite), the notebooks (English and zh/), the
widget manager of the installed jupyterlab_widgets, and, with ``--pyodide``,
a Pyodide distribution (the contents of the npm package ``pyodide`` at the
version the kernel pins) copied to ``static/pyodide/`` so that the kernel
needs no CDN. Without it the kernel loads Pyodide from its CDN at run time.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")


def check_pyodide(folder: Path) -> None:
    """Raise ValueError unless ``folder`` holds a Pyodide distribution."""
    missing = [name for name in PYODIDE_FILES if not (folder / name).is_file()]
    if missing:
        raise ValueError(f"--pyodide={str(folder)!r} lacks {', '.join(missing)}; give the folder "
                         "of a Pyodide distribution (the npm package pyodide, unpacked)")


def build(out: Path, pyodide: Path | None = None) -> Path:
    """Build the site into ``out`` (replaced) and return ``out``."""
    if pyodide is not None:
        check_pyodide(pyodide)
    jupyter = Path(sys.executable).parent / "jupyter"
    with tempfile.TemporaryDirectory() as tmp:
        lite_dir = Path(tmp)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                        "--no-build-isolation", "--wheel-dir", str(lite_dir / "wheels"),
                        str(ROOT)], check=True)
        if pyodide is not None:
            shutil.copytree(pyodide, lite_dir / "static" / "pyodide")
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([str(jupyter), "lite", "build", "--lite-dir", str(lite_dir),
                        "--contents", str(ROOT / "notebooks"),
                        "--piplite-wheels", str(next((lite_dir / "wheels").glob("*.whl"))),
                        "--output-dir", str(out.resolve()), "--no-sourcemaps"],
                       cwd=lite_dir, check=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write the site to (replaced)")
    parser.add_argument("--pyodide", type=Path, help="folder of a Pyodide distribution")
    args = parser.parse_args(argv)
    try:
        print(build(args.out, args.pyodide))
    except ValueError as error:
        parser.error(str(error))


if __name__ == "__main__":
    main()

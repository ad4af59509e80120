"""Build the course as a zero-install JupyterLite site (docs/jupyterlite.md).

    python tools/build_lite.py fetch DIR
    python tools/build_lite.py build OUT [--pyodide DIR] [--wheels DIR ...]

``fetch`` is the explicit download step (like an install): the npm package
``pyodide`` at the version jupyterlite-pyodide-kernel 0.8.6 pins, checked
against the registry's sha512 ``integrity``, unpacked to ``DIR/pyodide``; and
the pure wheels the kernel and actmem need, from PyPI, each checked against
PyPI's sha256, into ``DIR/wheels``. Pyodide's compiled wheels (numpy,
matplotlib, contourpy, kiwisolver, pillow for ``pyemscripten_2026_0_wasm32``)
are on no index reachable here: PyPI serves none (checked 2026-12-01); they
come from Pyodide's own distribution (``--wheels`` folder).

``build`` runs the ``jupyter lite`` CLI of jupyterlite-core and the Pyodide
kernel 0.8.6 (the ``lite`` extra) with the learner version of the notebooks
(``learner/``, English and zh/: :mod:`actmem.learner`), the
widget manager of the installed jupyterlab_widgets and actmem's wheel (built
from this checkout) for piplite. With ``--pyodide`` the site serves Pyodide
itself from ``static/pyodide/`` with a lock written for it: the packages the
kernel starts with (the worker's ``initPackageManager`` and ``initKernel``
in @jupyterlite/pyodide-kernel 0.8.6 load ``micropip``, then install
``comm``, ``ipython`` and ``jedi`` unless preloaded), plus ipywidgets and
actmem, all preloaded (``loadPyodideOptions.packages``) so that the
notebooks' first cell, which starts with ``%matplotlib inline``, finds
actmem and matplotlib. Each wheel is taken from the ``--wheels`` folders: a
compiled one must have the lock's file name and sha256; a pure one from PyPI
replaces the lock's (Pyodide rebuilds them, so the sha256 differs) and its
entry is rewritten. Without ``--pyodide`` the kernel loads Pyodide from its
CDN.

Both steps say on stderr what they are doing, step by step.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.metadata
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTENTS = ROOT / "learner"
"""What the site serves: the learner version of the course (no speaker notes,
no test checks, answers folded), which Colab and Binder open too."""
PYODIDE_VERSION = "314.0.6"  # jupyterlite_pyodide_kernel.constants.PYODIDE_VERSION
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
KERNEL = ("micropip", "comm", "ipython", "jedi")  # what the kernel worker loads first
ACTMEM = ("numpy", "matplotlib", "pillow", "ipython", "ipywidgets")  # actmem's in the browser
ADDED = {"comm": ("0.2.3", []), "ipywidgets": (None, ["comm", "ipython", "traitlets"])}
COMPILED = re.compile(r"-cp\d+-cp\d+-pyemscripten_")
PLUGIN = "@jupyterlite/pyodide-kernel-extension:kernel"


def norm(name: str) -> str:
    """A distribution name as the lock keys it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def say(message: str) -> None:
    """One line of progress on stderr (stdout carries the result)."""
    print(f"build_lite: {message}", file=sys.stderr, flush=True)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_pyodide(folder: Path) -> None:
    """Raise ValueError unless ``folder`` holds a Pyodide distribution."""
    missing = [name for name in PYODIDE_FILES if not (folder / name).is_file()]
    if missing:
        raise ValueError(f"--pyodide={str(folder)!r} lacks {', '.join(missing)}; give the folder "
                         "of a Pyodide distribution (the npm package pyodide, unpacked)")


def lock_with_additions(lock: dict, actmem_wheel: Path | None = None) -> dict:
    """Pyodide's lock plus entries for comm, ipywidgets (the building
    environment's version: the site's widget manager is its
    jupyterlab_widgets) and actmem (if its wheel is given); ``file_name``
    and ``sha256`` of the added PyPI wheels are set by :func:`take_wheels`."""
    packages = dict(lock["packages"])
    for name, (version, depends) in ADDED.items():
        packages.setdefault(name, entry(name, version or importlib.metadata.version(name),
                                        depends, "", ""))
    if actmem_wheel is None:
        return {**lock, "packages": packages}
    version = actmem_wheel.name.split("-")[1]
    packages["actmem"] = entry("actmem", version, [*ACTMEM], actmem_wheel.name,
                               sha256(actmem_wheel))
    return {**lock, "packages": packages}


def entry(name: str, version: str, depends: list, file_name: str, digest: str) -> dict:
    """A pyodide-lock.json package entry (the fields of micropip's)."""
    imports = {"ipython": "IPython"}.get(name, name.replace("-", "_"))
    return {"name": name, "version": version, "file_name": file_name, "install_dir": "site",
            "sha256": digest, "package_type": "package", "imports": [imports],
            "depends": depends, "unvendored_tests": False}


def needed(packages: dict, names) -> list[str]:
    """``names`` and everything they depend on in the lock, sorted."""
    seen, todo = set(), [norm(n) for n in names]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += [norm(d) for d in packages[name]["depends"]]
    return sorted(seen)


def pure_wheel_name(name: str, version: str) -> re.Pattern:
    stem = re.sub(r"[-_.]+", "_", name)
    return re.compile(rf"(?i){re.escape(stem)}-{re.escape(version)}-(py2\.)?py3-none-any\.whl")


def take_wheels(packages: dict, names: list[str], folders, dest: Path) -> list[str]:
    """Copy each package's wheel from ``folders`` to ``dest`` and return the
    compiled packages none of them holds. A compiled wheel must carry the
    lock's file name and sha256 (ValueError otherwise); a pure one of the
    lock's version is taken as is and its entry rewritten."""
    files = {p.name: p for folder in folders for p in Path(folder).glob("*.whl")}
    missing = []
    for name in names:
        spec = packages[name]
        if (dest / spec["file_name"]).is_file() if spec["file_name"] else False:
            continue  # actmem's own, or a Pyodide file already there
        if COMPILED.search(spec["file_name"]):
            wheel = files.get(spec["file_name"])
            if wheel is None:
                missing.append(name)
            elif sha256(wheel) != spec["sha256"]:
                raise ValueError(f"--wheels: {wheel} has sha256 {sha256(wheel)}, the lock "
                                 f"{spec['sha256']}; give Pyodide {PYODIDE_VERSION}'s own wheel")
            else:
                shutil.copy(wheel, dest)
            continue
        pattern = pure_wheel_name(name, spec["version"])
        wheel = next((p for n, p in sorted(files.items()) if pattern.fullmatch(n)), None)
        if wheel is None:
            raise ValueError(f"--wheels: no {name} {spec['version']} wheel in "
                             f"{[str(f) for f in folders]}; run `build_lite.py fetch DIR` first")
        shutil.copy(wheel, dest)
        packages[name] = {**spec, "file_name": wheel.name, "sha256": sha256(wheel)}
    return missing


def serve_pyodide(static: Path, pyodide: Path, folders, actmem_wheel: Path) -> list[str]:
    """Copy Pyodide to ``static``, the wheels beside it, write its lock;
    return the packages to preload."""
    shutil.copytree(pyodide, static)
    shutil.copy(actmem_wheel, static)
    lock = lock_with_additions(json.loads((static / "pyodide-lock.json").read_text()),
                               actmem_wheel)
    packages = lock["packages"]
    missing = take_wheels(packages, needed(packages, [*KERNEL, "ipywidgets", "actmem"]),
                          folders, static)
    if missing:
        print(f"build_lite: no compiled wheels for {', '.join(missing)} (Pyodide's own "
              "distribution, --wheels): the site runs actmem's core and its widgets, "
              "not the figures", file=sys.stderr)
        packages["actmem"]["depends"] = [d for d in ACTMEM if
                                         not set(needed(packages, [d])) & set(missing)]
    (static / "pyodide-lock.json").write_text(json.dumps(lock, indent=1))
    return [*KERNEL, "ipywidgets", "actmem", *packages["actmem"]["depends"]]


def configure_kernel(site: Path, preload: list[str]) -> None:
    """Preload ``preload`` and keep piplite off PyPI (jupyter-lite.json)."""
    path = site / "jupyter-lite.json"
    config = json.loads(path.read_text())
    settings = config["jupyter-config-data"].setdefault("litePluginSettings", {})[PLUGIN]
    settings["loadPyodideOptions"] = {"packages": sorted(set(preload))}
    settings["disablePyPIFallback"] = True
    path.write_text(json.dumps(config, indent=2))


def build(out: Path, pyodide: Path | None = None, wheels=(), contents=()) -> Path:
    """Build the site into ``out`` (replaced) and return ``out``; ``contents``:
    more files or folders to serve beside the notebooks."""
    if pyodide is not None:
        check_pyodide(pyodide)
    elif wheels:
        raise ValueError("--wheels needs --pyodide: wheels are served beside Pyodide's lock")
    jupyter = Path(sys.executable).parent / "jupyter"
    with tempfile.TemporaryDirectory() as tmp:
        lite_dir = Path(tmp)
        say("building actmem's wheel from this checkout")
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                        "--no-build-isolation", "--wheel-dir", str(lite_dir / "wheels"),
                        str(ROOT)], check=True)
        actmem_wheel = next((lite_dir / "wheels").glob("*.whl"))
        if pyodide is not None:
            preload = serve_pyodide(lite_dir / "static" / "pyodide", pyodide, wheels,
                                    actmem_wheel)
        shutil.rmtree(out, ignore_errors=True)
        say(f"jupyter lite build: {CONTENTS.relative_to(ROOT)}/ into {out}")
        subprocess.run([str(jupyter), "lite", "build", "--lite-dir", str(lite_dir),
                        "--contents", str(CONTENTS),
                        *[arg for path in contents for arg in ("--contents", str(path))],
                        "--piplite-wheels", str(actmem_wheel),
                        "--output-dir", str(out.resolve()), "--no-sourcemaps"],
                       cwd=lite_dir, check=True)
    if pyodide is not None:
        configure_kernel(out, preload)
    return out


def download(url: str, accept: str | None = None) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read()


def fetch(folder: Path) -> Path:
    """Download Pyodide's npm package and the pure wheels into ``folder``."""
    say(f"fetching the npm package pyodide {PYODIDE_VERSION} (registry.npmjs.org)")
    meta = json.loads(download(f"https://registry.npmjs.org/pyodide/{PYODIDE_VERSION}"))
    tarball = download(meta["dist"]["tarball"])
    say(f"checking its {len(tarball) / 2**20:.1f} MiB against npm's integrity, unpacking "
        f"to {folder / 'pyodide'}")
    algorithm, digest = meta["dist"]["integrity"].split("-", 1)
    if base64.b64encode(hashlib.new(algorithm, tarball).digest()).decode() != digest:
        raise ValueError(f"pyodide {PYODIDE_VERSION}: the tarball does not match npm's integrity")
    with tarfile.open(fileobj=io.BytesIO(tarball)) as tar, tempfile.TemporaryDirectory() as tmp:
        tar.extractall(tmp, filter="data")
        shutil.rmtree(folder / "pyodide", ignore_errors=True)
        shutil.copytree(Path(tmp) / "package", folder / "pyodide")
    lock = lock_with_additions(json.loads((folder / "pyodide" / "pyodide-lock.json").read_text()))
    (folder / "wheels").mkdir(parents=True, exist_ok=True)
    pure = [name for name in needed(lock["packages"], [*KERNEL, *ACTMEM])
            if not COMPILED.search(lock["packages"][name]["file_name"])]
    for k, name in enumerate(pure, 1):
        version = lock["packages"][name]["version"]
        say(f"[{k}/{len(pure)}] wheel {name} {version} from PyPI, checked against its sha256")
        fetch_pure(name, version, folder / "wheels")
    return folder


def fetch_pure(name: str, version: str, folder: Path) -> None:
    """Download ``name``'s pure wheel at ``version`` from PyPI, checked
    against PyPI's sha256 (the simple API's JSON form, PEP 691)."""
    index = json.loads(download(f"https://pypi.org/simple/{name}/",
                                "application/vnd.pypi.simple.v1+json"))
    pattern = pure_wheel_name(name, version)
    file = next((f for f in index["files"] if pattern.fullmatch(f["filename"])), None)
    if file is None:
        raise ValueError(f"PyPI has no pure wheel of {name} {version}")
    data = download(file["url"])
    if hashlib.sha256(data).hexdigest() != file["hashes"]["sha256"]:
        raise ValueError(f"{file['filename']}: sha256 differs from PyPI's")
    (folder / file["filename"]).write_bytes(data)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    get = commands.add_parser("fetch", help="download Pyodide and the pure wheels (network)")
    get.add_argument("folder", type=Path)
    make = commands.add_parser("build", help="build the site (no network)")
    make.add_argument("out", type=Path, help="folder to write the site to (replaced)")
    make.add_argument("--pyodide", type=Path, help="folder of a Pyodide distribution")
    make.add_argument("--wheels", type=Path, action="append", default=[],
                      help="folder of wheels for Pyodide's lock (repeatable)")
    args = parser.parse_args(argv)
    try:
        print(fetch(args.folder) if args.command == "fetch" else
              build(args.out, args.pyodide, args.wheels))
    except ValueError as error:
        parser.error(str(error))


if __name__ == "__main__":
    main()

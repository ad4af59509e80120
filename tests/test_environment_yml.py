"""environment.yml (Binder, conda) asks conda-forge for names it publishes.

conda matches package names exactly, and conda-forge spells some differently
from PyPI (jupyterlab_rise, matplotlib-base), so every name in the file must
be one of the names checked by hand against conda-forge's feedstock recipes in
tools/conda-forge-names.tsv. conda channels cannot be reached from here (no
network at test time; on 2026-12-01 conda.anaconda.org's and repo.prefix.dev's
conda-forge repodata.json did not answer this machine at build time either, so no
solver could run), so the environment is not solved; instead each runtime
dependency of pyproject.toml must appear under its conda name, and actmem
itself must come from this checkout through pip.
"""

import csv
import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]


def environment() -> dict:
    return yaml.safe_load((ROOT / "environment.yml").read_text())


def conda_specs() -> dict[str, str]:
    """Conda name -> version constraint ('' if none) of environment.yml."""
    specs = {}
    for dep in environment()["dependencies"]:
        if isinstance(dep, str):
            name = re.match(r"[\w.-]+", dep).group()
            specs[name] = dep[len(name):]
    return specs


def checked_names() -> dict[str, str]:
    """Conda name -> PyPI name, from tools/conda-forge-names.tsv."""
    lines = [line for line in (ROOT / "tools/conda-forge-names.tsv").read_text().splitlines()
             if not line.startswith("#")]
    return {row["conda"]: row["pypi"] for row in csv.DictReader(lines, delimiter="\t")}


def project() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def test_every_conda_name_was_checked_against_conda_forge():
    unknown = sorted(set(conda_specs()) - set(checked_names()))
    assert unknown == [], f"not in tools/conda-forge-names.tsv: {unknown}"


def test_pypi_spellings_that_conda_forge_lacks_are_absent():
    wrong = {pypi for conda, pypi in checked_names().items() if pypi not in (conda, "-")}
    assert wrong == {"matplotlib", "jupyterlab-rise"}  # the two that differ
    assert not wrong & set(conda_specs())


def test_runtime_dependencies_come_from_conda_at_least_as_new():
    to_conda = {pypi: conda for conda, pypi in checked_names().items()}
    specs = conda_specs()
    for dep in map(Requirement, project()["dependencies"]):
        conda = to_conda[dep.name]
        assert conda in specs, f"{dep.name} (conda: {conda}) missing from environment.yml"
        floor = next(s.version for s in SpecifierSet(specs[conda]) if s.operator == ">=")
        assert floor in dep.specifier, (dep, specs[conda])


def test_python_is_pinned_within_requires_python():
    python = conda_specs()["python"]
    assert python.startswith("=") and python[1:] + ".0" in SpecifierSet(
        project()["requires-python"]), python


def test_actmem_itself_is_installed_from_this_checkout():
    pip = [d for d in environment()["dependencies"] if isinstance(d, dict)]
    assert pip == [{"pip": ["."]}]
    assert environment()["channels"] == ["conda-forge"]


def test_binder_reads_the_root_environment_only():
    """repo2docker prefers a binder/ folder and reads runtime.txt beside it."""
    assert not (ROOT / "binder").exists() and not (ROOT / "runtime.txt").exists()

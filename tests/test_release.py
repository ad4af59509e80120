"""One version string, pyproject's, names the release that learners reach
outside a checkout (docs/release.md): the READMEs' Binder and Colab links use
its tag, and the tag, once made, is a commit of that same version whose
notebooks install actmem at that tag. (The notebooks' own links and install
cell are checked in tests/test_notebooks_structure.py.)"""

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"https://(?:mybinder\.org/v2/gh|colab\.research\.google\.com/github)"
                  r"/actmem/actmem/(?:blob/)?([^/?]+)")
INSTALL = re.compile(r"git\+https://github\.com/actmem/actmem@(\S+)")


def version(text: str) -> str:
    return tomllib.loads(text)["project"]["version"]


def tag() -> str:
    return "v" + version((ROOT / "pyproject.toml").read_text())


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_readme_links_use_the_release_tag(readme):
    text = (ROOT / readme).read_text(encoding="utf-8")
    refs = LINK.findall(text)
    assert len(refs) == 2 and set(refs) == {tag()}, refs
    assert f"({tag()})" in text or f"（{tag()}）" in text  # the prose names it too


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                          check=True).stdout


def test_the_tag_is_a_commit_of_this_version():
    try:
        tags = git("tag", "--list", tag()).split()
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"not a git checkout ({error}): the release tag cannot be checked")
    if not tags:
        pytest.skip(f"tag {tag()} not made in this checkout: the Colab and Binder links and "
                    f"the Colab install cell point at it (docs/release.md says how to make it)")
    assert version(git("show", f"{tag()}:pyproject.toml")) == tag()[1:]
    notebook = json.loads(git("show", f"{tag()}:notebooks/01_variables.ipynb"))
    sources = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    assert [ref for s in sources for ref in INSTALL.findall(s)] == [tag()]

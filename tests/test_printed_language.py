"""What notebooks 07 and 08 print for a learner (issue 20): Chinese in the
Chinese notebooks, each variant's title rather than its code key.

Read from the executed notebooks, which nbval keeps equal to a fresh run."""

import os
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
HAN = re.compile(r"[\u3400-\u9fff]")


def printed(path: Path, marker: str) -> list[str]:
    """The printed lines of the one code cell whose source contains ``marker``."""
    cells = [c for c in nbformat.read(path, as_version=4).cells
             if c.cell_type == "code" and marker in c.source]
    assert len(cells) == 1, (path, marker, len(cells))
    return "".join(o.get("text", "") for o in cells[0].outputs).splitlines()


@pytest.mark.parametrize("marker, count", [("mistakes = (", 5), ("sum of the parts {total}", 2)])
def test_notebook_08_prints_chinese_in_chinese(marker, count):
    lines = printed(ROOT / "notebooks" / "zh" / "08_will_it_fit.ipynb", marker)
    assert len(lines) == count
    for line in lines:
        assert HAN.search(line) and not re.search(r"\b(stage|peak|the|is not)\b", line), line
        assert "：" in line and ": " not in line, line


def measured_variants() -> dict:
    """actmem.measure's variants: it needs torch (skipped without it, except
    where CI is set)."""
    if not os.environ.get("CI"):
        pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0 "
                            "--index-url https://download.pytorch.org/whl/cpu")
    from actmem.measure import VARIANTS
    return VARIANTS


@pytest.mark.parametrize("folder", ["", "zh"])
def test_notebook_07_expectations_start_with_the_variant_title(folder):
    from actmem.language import translator
    VARIANTS = measured_variants()
    tr = translator("zh" if folder else "en")
    lines = printed(ROOT / "notebooks" / folder / "07_measure_it.ipynb", "VARIANTS[name].expect")
    expectations = lines[-len(VARIANTS):]
    for name, line in zip(VARIANTS, expectations):
        assert line.startswith(tr(VARIANTS[name].title) + ("：" if folder else ": ")), line
        assert not line.startswith(name + ":"), line

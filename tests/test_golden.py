"""Every number of the golden file, to the byte (``tools/golden.py`` says
which calls it holds and how to rewrite it): what proves that a refactor of
the memory model changed no number where nbval cannot see (images, widget
readouts, the planners' settings the notebooks do not print)."""

import gzip
import json
import sys
from pathlib import Path

import pytest

import actmem

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
golden = pytest.importorskip("golden", reason="tools/golden.py is in the repository")


@pytest.fixture(scope="module")
def cases():
    with gzip.open(golden.GOLDEN, "rt", encoding="utf-8") as f:
        return json.load(f)["cases"]


def test_every_case_gives_its_golden_numbers(cases):
    changed = [case["call"] for case in cases
               if golden.summary(golden.run(case["call"])) != case["stages"]]
    assert not changed, f"{len(changed)} of {len(cases)} cases changed, e.g. {changed[:3]}"


def test_the_golden_file_holds_every_preset_schedule_and_the_megatron_runs(cases):
    jobs = {repr(golden.job_of(case["call"])) for case in cases}
    wanted: dict = {}
    golden.preset_calls(wanted)
    golden.megatron_calls(wanted)
    assert [text for text in wanted if repr(golden.job_of(text)) not in jobs] == []
    assert len(wanted) >= 110 and len(cases) > 700

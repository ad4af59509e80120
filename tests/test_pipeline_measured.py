"""The stored PyTorch pipeline measurement (shown by notebook 05 without
torch) still agrees with today's simulation; no torch needed."""

from fractions import Fraction

import actmem
from actmem import pipeline_measured


def test_stored_measurement_matches_todays_simulation():
    data = pipeline_measured.stored_measurement()
    assert len(data["stages"]) == 14 + 36 and data["config"]["layers"] == 8
    for s in data["stages"]:
        simulated = actmem.simulate_schedule(s["schedule"], s["p"], s["m"], s["v"], "pytorch")
        assert s["ops"] == [str(op) for op in simulated.ops[s["stage"]]]
        assert Fraction(s["peak_bytes"], s["microbatch_bytes"]) == Fraction(s["ratio"]) \
            == simulated.peak_in_flight(s["stage"]) == s["simulated_peak_in_flight"]
        assert max(s["alive_bytes"]) == s["peak_bytes"] and s["agrees"]


def test_without_torch_the_stored_result_is_labelled_stored(monkeypatch):
    monkeypatch.setattr(pipeline_measured.importlib.util, "find_spec", lambda name: None)
    source, data = pipeline_measured.load_measurement()
    assert source.startswith("STORED result (torch 2.13.0+cpu)")
    assert data == pipeline_measured.stored_measurement()


def test_table_has_one_line_per_schedule():
    table = pipeline_measured.measurement_table(pipeline_measured.stored_measurement())
    assert table.splitlines()[11] == (
        "1f1b         4  4  1        361472  4 3 2 1                   4 3 2 1    yes")

"""PyTorch's pipeline engine (GPipe, 1F1B, interleaved 1F1B, interleaved zero
bubble, ZBV, DualPipeV and looped BFS over gloo) against
actmem.simulate_schedule, stage by stage, and the stored copy notebook 06
shows without torch. Skipped without torch unless CI is set."""

import json
import os

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("torch", reason="torch is not installed: "
                        "pip install torch==2.13.0 --index-url "
                        "https://download.pytorch.org/whl/cpu")

import actmem  # noqa: E402
from actmem.measure import __main__ as cli  # noqa: E402
from actmem.measure import pipeline  # noqa: E402
from actmem.views.pipeline_measured import load_measurement, stored_measurement  # noqa: E402

LAYERNORM_STATS = 512
"""Two LayerNorms x (mean, rstd) x s*b bfloat16 values per layer (test_measure)."""


@pytest.fixture(scope="module")
def data():
    """The run's measurement (:func:`pipeline.measurement`): made here, or
    earlier in the run by notebook 06, which loads it the same way
    (``ACTMEM_MEASURE_CACHE``, tests/conftest.py)."""
    source, measured = load_measurement()
    assert source.startswith("measured on this machine with torch")
    return measured


def test_every_case_and_stage_is_measured(data):
    cases = pipeline.default_cases()
    assert [(s["schedule"], s["p"], s["m"], s["v"], s["stage"]) for s in data["stages"]] == [
        (*case, i) for case in cases for i in range(case[1])]
    assert ("gpipe", 2, 1, 1) in cases and ("gpipe", 4, 3, 1) in cases  # m = p - 1


def test_measured_peaks_equal_the_simulation_in_pytorch_order(data):
    for s in data["stages"]:
        assert s["agrees"], s
        assert s["alive_bytes"] == s["modelled_bytes"]
        if s["schedule"] in actmem.SCHEDULES + ("looped-bfs",):
            assert s["peak_bytes"] == s["simulated_peak_in_flight"] * s["microbatch_bytes"]
            assert s["alive_bytes"][-1] == 0
        simulated = actmem.simulate_schedule(s["schedule"], s["p"], s["m"], s["v"], "pytorch")
        assert s["ops"] == [str(op) for op in simulated.ops[s["stage"]]]


def test_every_new_schedule_is_measured_at_p_2_and_4(data):
    measured = {(s["schedule"], s["p"]) for s in data["stages"]}
    assert {(name, p) for name in actmem.schedules.PYTORCH_ONLY for p in (2, 4)} <= measured


def test_measured_peaks_equal_the_closed_forms(data):
    for s in data["stages"]:
        if s["schedule"] not in actmem.SCHEDULES:
            continue
        p, m, v, i = s["p"], s["m"], s["v"], s["stage"]
        expected = {"gpipe": lambda: actmem.gpipe_in_flight(p, m, i),
                    "1f1b": lambda: actmem.one_f_one_b_in_flight(p, m, i),
                    "interleaved": lambda: actmem.interleaved_in_flight(
                        p, m, v, i, group=m // max(1, m // p))}[s["schedule"]]()
        assert s["ratio"] == str(expected), s


def test_one_pass_is_the_ledger_plus_layernorm_statistics(data):
    small = pipeline.SMALL
    per_layer = actmem.activation_memory(**small).total + LAYERNORM_STATS
    assert per_layer == 180736
    for s in data["stages"]:
        layers = pipeline.LAYERS // (s["p"] * s["v"])
        assert s["microbatch_bytes"] == layers * per_layer


def test_first_stage_of_1f1b_holds_the_whole_stack(data):
    # p cancels: p micro-batches x L/p layers = L layers' worth, for p = 2 and 4.
    whole = pipeline.LAYERS * 180736
    firsts = [s for s in data["stages"] if s["schedule"] == "1f1b" and s["stage"] == 0]
    assert len(firsts) == 4 and {s["peak_bytes"] for s in firsts} == {whole}


def test_stored_copy_is_a_fresh_measurement(data):
    assert stored_measurement() == data


def test_cli_prints_the_table_and_json(data, monkeypatch, capsys):
    monkeypatch.setattr(pipeline, "measurement", lambda: data)
    assert cli.main(["pipeline"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("schedule") and len(lines) == 1 + len(pipeline.default_cases())
    assert lines[14].split() == ["interleaved", "4", "8", "2", "180736", *"11 9 7 5".split() * 3,
                                 "yes"]   # measured, simulated (bytes / pass), passes held
    assert lines[-1].split()[:9] == ["looped-bfs", "4", "4", "2", "180736", "8", "8", "8", "8"]
    assert cli.main(["pipeline", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == data


def test_refuses_what_pytorch_refuses():
    with pytest.raises(ValueError, match="PyTorch's Schedule1F1B"):
        pipeline.measure_pipelines([("1f1b", 4, 3, 1)])
    with pytest.raises(ValueError, match="must divide the 8 measured layers"):
        pipeline.measure_pipelines([("interleaved", 4, 8, 4)])
    with pytest.raises(ValueError, match="v=3: schedule 'zbv' needs exactly v=2"):
        pipeline.measure_pipelines([("zbv", 2, 4, 3)])
    with pytest.raises(ValueError, match=r"ScheduleDualPipeV needs m >= 2p = 8"):
        pipeline.measure_pipelines([("dualpipev", 4, 4, 2)])

"""The stored PyTorch pipeline measurement (shown by notebook 05 without
torch) still agrees with today's simulation; no torch needed."""

from fractions import Fraction

import actmem
from actmem import pipeline_measured


def held_by_hand(ops, full, after_i, after_w):
    """Bytes after each op: passes before their B/I hold ``full``, between I
    and W ``after_i[chunk]``, after W ``after_w[chunk]``."""
    total, out = 0, []
    for op in ops:
        c = op.chunk
        total += {"F": full, "B": -full, "I": after_i[c] - full,
                  "W": after_w[c] - after_i[c]}[op.kind]
        out.append(total)
    return out


def test_stored_measurement_matches_todays_simulation():
    data = pipeline_measured.stored_measurement()
    assert len(data["stages"]) == 14 + 36 + 14 + 28 and data["config"]["layers"] == 8
    for s in data["stages"]:
        simulated = actmem.simulate_schedule(s["schedule"], s["p"], s["m"], s["v"], "pytorch")
        ops = simulated.ops[s["stage"]]
        assert s["ops"] == [str(op) for op in ops]
        assert s["alive_bytes"] == s["modelled_bytes"] == held_by_hand(
            ops, s["microbatch_bytes"], s["kept_after_input_grad"], s["kept_after_weight_grad"])
        assert Fraction(s["peak_bytes"], s["microbatch_bytes"]) == Fraction(s["ratio"])
        assert simulated.peak_in_flight(s["stage"]) == s["simulated_peak_in_flight"]
        assert max(s["alive_bytes"]) == s["peak_bytes"] and s["agrees"]
        if not any(op.kind == "I" for op in ops):
            assert Fraction(s["ratio"]) == s["simulated_peak_in_flight"]


def test_pytorch_keeps_almost_the_whole_pass_from_i_to_w():
    # PyTorch 2.13's I step keeps the autograd graph W needs: one pass of
    # 180736 B per layer frees 4096 B at I (0 on the first stage's first
    # chunk); the ledger's I/W split would keep only the linear inputs.
    data = pipeline_measured.stored_measurement()
    zbv = [s for s in data["stages"] if (s["schedule"], s["p"], s["m"]) == ("zbv", 4, 8)]
    assert [s["kept_after_input_grad"] for s in zbv] == [[180736, 176640]] + [
        [176640, 176640]] * 3
    assert [s["kept_after_weight_grad"] for s in zbv] == [[0, 32768]] + [[32768, 32768]] * 3
    layer = actmem.activation_memory(**{k: data["config"][k] for k in "sbha"})
    from actmem.run.split_backward import weight_gradient_bytes
    assert weight_gradient_bytes(layer) == 57344 < 176640


def test_without_torch_the_stored_result_is_labelled_stored(monkeypatch):
    monkeypatch.setattr(pipeline_measured.importlib.util, "find_spec", lambda name: None)
    source, data = pipeline_measured.load_measurement()
    assert source.startswith("STORED result (torch 2.13.0+cpu)")
    assert data == pipeline_measured.stored_measurement()


def test_table_has_one_line_per_schedule():
    table = pipeline_measured.measurement_table(pipeline_measured.stored_measurement())
    lines = table.splitlines()
    assert len(lines) == 1 + 30
    assert lines[11] == ("1f1b            4  4  1        361472  4 3 2 1"
                         "                    4 3 2 1    yes")
    assert lines[27] == ("zbv             4  4  2        180736  5.54 6.36 7.18 8"
                         "           5 6 7 8    yes")

"""The stored PyTorch pipeline measurement (shown by notebook 06 without
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
    from actmem.run.schedule.split_backward import weight_gradient_bytes
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
    assert lines[0] == ("schedule        p  m  v  pass bytes  measured peak / pass  "
                        "simulated peak / pass  passes held  bytes agree")
    assert lines[11] == ("1f1b            4  4  1      361472  4 3 2 1               "
                         "4 3 2 1                4 3 2 1      yes")
    assert lines[27] == ("zbv             4  4  2      180736  5.54 6.36 7.18 8      "
                         "5.54 6.36 7.18 8       5 6 7 8      yes")


def test_the_simulated_peak_compares_bytes_with_bytes():
    """Review (d) 7: "simulated" beside "agrees" read as pass counts, so ZBV at
    p=4, m=8 (measured 8.73 ... 9.45, simulated 8 8 8 8, agrees) looked like a
    contradiction. The simulated peak is now the simulation's bytes over the
    bytes of one pass, as measured; the count held until B or W has its own
    column. The last stage: 8 passes held whole (8 x 180736 B) and 8 finished
    passes' 32768 B each after W: 1708032 B = 9.45 passes."""
    line = pipeline_measured.measurement_table(
        pipeline_measured.stored_measurement()).splitlines()[28]
    assert line == ("zbv             4  8  2      180736  8.73 9.09 9.27 9.45   "
                    "8.73 9.09 9.27 9.45    8 8 8 8      yes")
    assert 8 * 180736 + 8 * 32768 == 1708032 and f"{1708032 / 180736:.2f}" == "9.45"


def test_the_chinese_table_heading_lines_up_with_the_english_one():
    """Each heading sits over its column in both languages: "pass bytes"
    ends where the right-aligned byte counts end, the others start where
    their columns start (a Han character is two columns wide)."""
    from actmem.language import translator
    from actmem.views.printed import width
    data = pipeline_measured.stored_measurement()
    rows = {language: pipeline_measured.measurement_table(data, translator(language)).splitlines()
            for language in ("en", "zh")}
    for language, words, yes in (
            ("en", ("pass bytes", "measured", "simulated", "passes held", "bytes agree"), "yes"),
            ("zh", ("单次字节", "实测", "模拟", "块计算数", "字节一致"), "是")):
        row = rows[language][28]                   # zbv 4 8 2 (its name is wider in Chinese)
        starts = [width(row[:i]) for i in (row.index("180736") + 6, row.index("8.73"),
                                           row.index("8.73", row.index("8.73") + 5),
                                           row.index("8 8 8 8"), row.index(yes))]
        head = rows[language][0]
        at = [width(head[:head.index(w)]) for w in words]
        assert [at[0] + width(words[0]), *at[1:]] == starts, language

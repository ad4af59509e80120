"""``python -m actmem``: the worked example's table, --json and bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import actmem
from actmem.views.cli import main

WORKED_EXAMPLE_TABLE = """\
s=2048 b=1 h=4096 a=32: MiB per layer, per micro-batch, per GPU
   t      fixed  intermediate  attention map      total
   1         80           192            640        912
   2         80            96            320        496
   4         80            48            160        288
   8         80            24             80        184
"""


def test_default_prints_the_worked_example_table(capsys):
    assert main([]) == 0
    assert capsys.readouterr().out == WORKED_EXAMPLE_TABLE


def test_whole_model_line(capsys):
    main(["-L", "32", "--t", "8"])
    assert capsys.readouterr().out.splitlines()[-1] == "L=32, t=8: 5888 MiB = 5.75 GiB"


def test_json_in_bytes(capsys):
    main(["--json", "-L", "32"])
    data = json.loads(capsys.readouterr().out)
    assert data["unit"] == "bytes"
    assert [r["total"] for r in data["rows"]] == [m * 2**20 for m in (912, 496, 288, 184)]
    assert data["rows"][3]["model"] == 5888 * 2**20
    assert data["rows"][0]["fixed"] == 80 * 2**20


@pytest.mark.parametrize("argv, message", [
    (["--a", "52", "--h", "6656", "--t", "8"],
     "actmem: error: t=8 must divide a=52 and h=6656; valid t: 1, 2, 4, 13, 26, 52\n"),
    (["--s", "x"], "actmem: error: argument -s/--s: invalid int value: 'x'\n"),
    (["--b", "0"], "actmem: error: b must be a positive integer (>= 1), got 0\n"),
    (["--recompute", "some"], None),
])
def test_bad_input_exits_2_with_one_line(argv, message):
    proc = subprocess.run([sys.executable, "-m", "actmem", *argv],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr
    if message:
        assert proc.stderr == message
    else:
        assert "--recompute" in proc.stderr


def test_module_runs_as_a_program():
    proc = subprocess.run([sys.executable, "-m", "actmem"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == WORKED_EXAMPLE_TABLE


def test_storage_options_reach_the_model(capsys):
    main(["--h", "12288", "--a", "96", "--t", "8", "--sequence-parallel",
          "--recompute", "selective", "--json"])
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert row["total"] == 102 * 2**20  # GPT-3 175B, Table 2 row 5


def test_console_script_is_installed():
    script = Path(sys.executable).with_name("actmem")
    proc = subprocess.run([str(script), "--t", "8"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1].split() == [
        "8", "80", "24", "80", "184"]


def test_large_values_print_in_fixed_point(capsys):
    main(["--s", "32768", "--b", "8", "--h", "12288", "--a", "96", "--t", "1"])
    last = capsys.readouterr().out.splitlines()[-1].split()
    # 10sbh = 30720 MiB, 24sbh = 73728 MiB, 5as^2b = 3932160 MiB at t=1
    assert last == ["1", "30720", "73728", "3932160", "4036608"]


# ------------------------------------------------------------------ train

def test_train_prints_every_stage_and_the_verdict(capsys):
    assert main(["train", "--preset", "llama2-7b", "--t", "2", "--p", "2", "--d", "2",
                 "--m", "8", "--schedule", "1f1b", "--gpu-memory", "80GB"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["part", "(MiB", "per", "GPU)", "stage", "0", "stage", "1"]
    assert out[5].split() == ["layer", "activations", "26656", "13328"]
    assert out[-1] == ("most loaded: stage 0, 54.27 GiB of 74.51 GiB: "
                       "margin 20.23 GiB, fits")


def test_train_json_is_training_memory_in_bytes(capsys):
    assert main(["train", "--preset", "llama3-8b", "--t", "4", "--p", "2", "--m", "4",
                 "--sequence-parallel", "--recompute", "selective", "--json",
                 "--gpu-memory", "40GiB", "--reserve", "0.05"]) == 0
    data = json.loads(capsys.readouterr().out)
    r = actmem.training_memory(actmem.PRESETS["llama3-8b"], t=4, p=2, m=4,
                               sequence_parallel=True, recompute="selective",
                               gpu_memory="40GiB", reserve=0.05)
    assert data["stages"] == [{**s.parts, "total": s.total} for s in r.stages]
    assert (data["most_loaded"], data["margin"], data["fits"]) == (
        r.most_loaded.stage, r.margin, r.fits)


@pytest.mark.parametrize("argv, message", [
    (["--gpu-memory", "80 gigs"], "gpu_memory='80 gigs' is not a size"),
    (["--p", "3"], "p=3 must divide L=32"),
    (["--zero-stage", "4", "--accounting", "zero"], "zero_stage must be 0, 1, 2 or 3"),
])
def test_train_errors_are_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--preset", "llama2-7b", *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_table_command_unchanged_with_train_registered(capsys):
    assert main(["-L", "32"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "L=32, t=8: 5888 MiB = 5.75 GiB"


def test_short_flags_are_the_paper_symbols(capsys):
    assert main(["-s", "2048", "-b", "1", "--h", "4096", "-a", "32", "-t", "8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0]["total"] == 184 * 2**20
    assert main(["train", "--preset", "llama2-7b", "-t", "2", "-p", "2", "-d", "2",
                 "-m", "8", "--gpu-memory", "80GB"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("margin 20.23 GiB, fits")


def test_h_with_a_number_points_to_the_hidden_size(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["-h", "4096"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        "actmem: error: -h is --help; for the hidden size write --h 4096\n")
    with pytest.raises(SystemExit) as exit_:
        main(["-h"])
    assert exit_.value.code == 0 and "usage: actmem" in capsys.readouterr().out


def test_huge_s_keeps_every_term_exact(capsys):
    # issue 10 item 5: a 20-digit s must not print total = attention map
    assert main(["--s", "12345678901234567890", "--t", "8", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert row["total"] == row["fixed"] + row["intermediate"] + row["attention_map"]
    assert main(["--s", "12345678901234567890", "--t", "8"]) == 0
    cells = capsys.readouterr().out.splitlines()[-1].split()
    assert cells[-1] == "2907100439689414985104383593023922.01" != cells[-2]


def test_sequence_parallelism_at_t1_is_noted(capsys):
    # issue 10 item 2: Megatron-LM turns it off with a warning; so do we
    assert main(["--sequence-parallel", "--t", "1", "2"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ("actmem: note: sequence_parallel=True does nothing at t=1: there "
                            "is one rank, so nothing is split (Megatron-LM turns it off with "
                            "a warning)\n")
    with pytest.warns(UserWarning, match="does nothing at t=1"):
        actmem.activation_memory(2048, 1, 4096, 32, 1, sequence_parallel=True)


def test_swiglu_without_a_width_notes_megatron_lms_default(capsys):
    assert main(["--h", "1280", "--a", "20", "--t", "1", "2", "4",
                 "--activation", "swiglu"]) == 0
    captured = capsys.readouterr()
    assert "swiglu MLP width f=3392 (Megatron-LM's default" in captured.err
    with pytest.raises(SystemExit) as exit_info:
        main(["--h", "1280", "--a", "20", "--t", "5", "--activation", "swiglu"])
    assert exit_info.value.code == 2
    assert "t=5 must divide" in capsys.readouterr().err

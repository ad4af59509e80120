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
    (["--s", "x"], "actmem: error: argument -s/--s: 'x' is not an integer of at most 30 digits\n"),
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
#
# LLaMA-2-7B (FlashAttention, as the preset), t=2, p=2, d=2, m=8, 1F1B, on an
# A100 80GB (81920 MiB = 80 GiB, compute capability 8.0), checked by hand:
# s=4096, b=1, h=4096, f=11008, V=32000 (a multiple of 128*t already).
S, H, F, V, T = 4096, 4096, 11008, 32000, 2
LAYER = 8*S*H + 8*S*H // T + 6*S*F // T + 4*32*S // T  # ledger of one layer, bytes
assert LAYER == 336_855_040  # 321.25 MiB
# parameters per GPU: 16 layers of (4h^2 + 3hf)/t + 2h norms, plus V*h/t
# (embedding on stage 0; output layer and the final norm h on stage 1)
LAYERS_PARAMS = 16 * ((4*H*H + 3*H*F) // T + 2*H)
STATES = [18 * (LAYERS_PARAMS + V*H // T), 18 * (LAYERS_PARAMS + V*H // T + H)]
MASK = S * S  # the data loader's boolean b*s*s mask, alive in each forward
WORKSPACE = 2 * (4096*1024*2 + 16*1024*8) + 4 * 2**20  # cuBLAS x2 (cc 8.0) + TE
HOPPER = 2 * 4096*1024*8 + 32 * 2**20  # the same on cc 9.0, assumed without a GPU name
# stage 0 peaks in the backward of micro-batch 0, at its last layer's MLP: 2
# micro-batches held (+ token ids) beside the gradients of the layer output
# (2sbh) and of fc2's input (2sbf/t); the weight's goes into the fp32 buffer
MLP_GRADIENTS = 2*S*H + 2*S*F // T
# Transformer Engine's cached dummy weight gradients (gradient accumulation
# fusion): one bf16 tensor per distinct weight shape, QKV 3h/t x h, the output
# projection h x h/t, fc1 2f/t x h, fc2 h x f/t, and on stage 1 the output layer V/t x h
DUMMIES = [2*H * (3*H//T + H//T + 2*F//T + F//T)]
DUMMIES.append(DUMMIES[0] + 2 * V//T * H)
assert DUMMIES == [193 * 2**20, 318 * 2**20]
PEAK0 = STATES[0] + 2 * (16*LAYER + 8*S) + MLP_GRADIENTS + WORKSPACE + DUMMIES[0]
# stage 1 peaks at the loss: 1 micro-batch held, the output layer's inputs and
# targets (2sbh + 2sbh + 9sb), bf16 logits with their fp32 copy: 6*s*b*V/t
PEAK1 = STATES[1] + 16*LAYER + 4*S*H + 9*S + 6*S*V // T + MASK + WORKSPACE + DUMMIES[1]
CASE = ["train", "--preset", "llama2-7b", "-t", "2", "-p", "2", "-d", "2", "-m", "8",
        "--reserve", "0"]   # the bare peak (the default reserve: tests/test_reserve.py)
VERDICT = ("most loaded: stage 0, peak 38.56 GiB at 'backward of micro-batch 0: the last "
           "layer's MLP', of 80 GiB (A100 80GB): margin 41.44 GiB, fits")


def test_hand_computed_peaks_are_the_timelines():
    r = actmem.training_memory(actmem.PRESETS["llama2-7b"], t=2, p=2, d=2, m=8,
                               gpu_memory="A100 80GB", reserve=0)
    assert [s.peak for s in r.stages] == [PEAK0, PEAK1] == [41_405_710_336, 36_545_605_632]
    assert r.stages[1].timeline.peak.label == "loss of micro-batch 0"
    assert r.stages[1].timeline.peak.by_category["logits_loss"] == 6 * S * V // T  # 375 MiB
    assert r.margin == 81920 * 2**20 - PEAK0


def test_train_prints_every_stage_its_peak_and_the_verdict(capsys):
    assert main([*CASE, "--gpu-memory", "A100 80GB"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["part", "(MiB", "per", "GPU)", "stage", "0", "stage", "1"]
    assert out[5].split() == ["layer", "activations", "10280", "5140"]  # 16 x 321.25 x 2, x 1
    assert out[-3].split()[-2:] == [f"{(STATES[0] + 2*(16*LAYER + 8*S)) / 2**20:.2f}",
                                    "34373.36"]  # the sum of the parts
    assert out[-2].split() == ["peak", "(one", "moment)", "39487.56", "34852.61"]
    assert PEAK0 / 2**20 == 39487.5625 and PEAK1 / 2**20 == 34852.60546875
    assert out[-1] == VERDICT


def test_gpu_memory_takes_a_gpu_name_or_a_size(capsys):
    assert main([*CASE, "--gpu-memory", "a100-80gb"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == VERDICT
    assert main([*CASE, "--gpu-memory", "80GB"]) == 0  # 80 x 10^9 bytes: a size, no name
    assert capsys.readouterr().out.splitlines()[-1].endswith(
        "peak 38.64 GiB at 'backward of micro-batch 0: the last layer's MLP', "
        "of 74.51 GiB: margin 35.87 GiB, fits")  # no GPU name: Hopper's workspaces
    assert round((80 * 10**9 - (PEAK0 - WORKSPACE + HOPPER)) / 2**30, 2) == 35.87
    assert main([*CASE, "--gpu-memory", "L4"]) == 0  # 23034 MiB
    assert capsys.readouterr().out.splitlines()[-1].endswith(
        "of 22.49 GiB (L4): margin -16.07 GiB, DOES NOT FIT")
    assert round((23034 * 2**20 - PEAK0) / 2**30, 2) == -16.07


def test_timeline_prints_every_event_and_marks_the_peak(capsys):
    assert main([*CASE, "--gpu-memory", "A100 80GB", "--timeline"]) == 0
    out = capsys.readouterr().out.splitlines()
    r = actmem.training_memory(actmem.PRESETS["llama2-7b"], t=2, p=2, d=2, m=8)
    starts = [i for i, line in enumerate(out) if line.startswith("stage ")]
    assert len(starts) == 2
    assert out[starts[1]] == f"stage 1: {len(r.stages[1].timeline.events)} events, MiB per " \
        "GPU (* peak: 34.04 GiB)"
    assert out[starts[1] + 1].split() == ["op", "total", *actmem.CATEGORIES, "event"]
    body = out[starts[1] + 2: starts[1] + 2 + len(r.stages[1].timeline.events)]
    peaks = [line for line in body if line.startswith("*")]
    # F0 on stage 1: the loss; states, one pass (16 layers + output inputs), the
    # logits' 375 MiB, the 16 MiB mask, the 20.25 MiB of workspaces and the 318 MiB
    # of dummy weight gradients
    assert peaks == [line for line in body if "loss of micro-batch 0" in line
                     and "backward" not in line]
    assert peaks[0].split() == ["*", "F0", "34852.61", "3213.26", "6426.52", "19279.55",
                                "5204.04", "375", "16", "338.25", "loss", "of", "micro-batch",
                                "0"]
    assert body[0].split()[0] == "29257.57" and body[1].split()[:2] == ["*", "F0"]
    assert body[-1].split() == ["29257.57", "3213.26", "6426.52", "19279.55", "0", "0",
                                    "0", "338.25", "optimizer", "step"]
    assert out[-1] == VERDICT


def test_train_json_has_peaks_and_events_in_bytes(capsys):
    assert main(["train", "--preset", "llama3-8b", "--t", "4", "--p", "2", "--m", "4",
                 "--sequence-parallel", "--recompute", "selective", "--json",
                 "--gpu-memory", "H100 80GB SXM", "--reserve", "0.05"]) == 0
    data = json.loads(capsys.readouterr().out)
    r = actmem.training_memory(actmem.PRESETS["llama3-8b"], t=4, p=2, m=4,
                               sequence_parallel=True, recompute="selective",
                               gpu_memory="H100 80GB SXM", reserve=0.05)
    for got, stage in zip(data["stages"], r.stages):
        assert {k: got[k] for k in (*actmem.PARTS, "total", "peak", "needed")} == {
            **stage.parts, "total": stage.total, "peak": stage.peak, "needed": stage.needed}
        assert got["peak_event"] == stage.timeline.peak.label
        assert got["events"] == [{"label": e.label, "op": e.op, "moment": e.moment,
                                  "total": e.total, "bytes": e.by_category}
                                 for e in stage.timeline.events]
        assert max(e["total"] for e in got["events"]) == got["peak"]
    assert (data["most_loaded"], data["margin"], data["fits"], data["gpu"]) == (
        r.most_loaded.stage, r.margin, r.fits, "H100 80GB SXM")
    assert data["gpu_memory"] == 81559 * 2**20


def test_framework_options_reach_the_timeline(capsys):
    def peak_event(*argv):
        assert main([*CASE, "--json", *argv]) == 0
        return json.loads(capsys.readouterr().out)["stages"][1]["events"][1]
    vocab = peak_event()
    assert vocab["label"] == "loss of micro-batch 0"
    assert vocab["bytes"]["logits_loss"] == 6 * S * V // T   # bf16 logits + fp32 copy
    torch16 = peak_event("--loss", "torch", "--logits-bytes", "2")
    assert torch16["bytes"]["logits_loss"] == 4 * S * V // T  # bf16 logits + bf16 log-probs
    fused = peak_event("--loss", "fused")
    # per token the fp32 log-sum-exp and target logit, and one chunk of Liger-Kernel's size (the
    # tokens over ceil(V/t / h) = 4 chunks, a power of two: 1024) of bf16 logits
    # beside their fp32 copy
    assert fused["bytes"]["logits_loss"] == 8 * S + 6 * 1024 * V // T
    late = peak_event("--gradient-buffer", "backward")
    assert vocab["bytes"]["gradients"] - late["bytes"]["gradients"] == 4 * (STATES[1] // 18)
    assert late["bytes"]["gradients"] == 0  # no gradient before the first backward
    unmasked = peak_event("--no-attention-mask")
    assert vocab["total"] - unmasked["total"] == MASK


def test_flash_attention_defaults_to_the_presets(capsys):
    assert main([*CASE, "--json"]) == 0
    flash = json.loads(capsys.readouterr().out)["stages"][0]["peak"]
    assert main([*CASE, "--json", "--flash-attention"]) == 0
    assert json.loads(capsys.readouterr().out)["stages"][0]["peak"] == flash == \
        PEAK0 - WORKSPACE + HOPPER
    assert main([*CASE, "--json", "--no-flash-attention"]) == 0
    assert json.loads(capsys.readouterr().out)["stages"][0]["peak"] > PEAK0 + 2**30


@pytest.mark.parametrize("argv, message", [
    (["--gpu-memory", "80 gigs"], "gpu_memory='80 gigs' is not a size"),
    (["--gpu-memory", "A100 90GB"], "gpu_memory must be one of 'A100 40GB', 'A100 80GB'"),
    (["--p", "3"], "p=3 must divide L=32"),
    (["--zero-stage", "4", "--accounting", "zero"], "zero_stage must be 0, 1, 2 or 3"),
    (["--logits-bytes", "2"], "for 16-bit logits use loss='torch'"),
    (["--loss", "softmax"], "argument --loss: invalid choice: 'softmax' (choose from "
                            "'vocab_parallel', 'torch', 'fused')"),
    (["--gradient-buffer", "never"], "argument --gradient-buffer: invalid choice"),
])
def test_train_errors_are_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--preset", "llama2-7b", *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_table_command_unchanged_with_train_registered(capsys):
    assert main(["-L", "32"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "L=32, t=8: 5888 MiB = 5.75 GiB"


def test_short_flags_are_the_paper_symbols(capsys):
    assert main(["-s", "2048", "-b", "1", "--h", "4096", "-a", "32", "-t", "8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0]["total"] == 184 * 2**20
    assert main(["train", "--preset", "llama2-7b", "-t", "2", "-p", "2", "-d", "2",
                 "-m", "8", "--gpu-memory", "A100 80GB", "--reserve", "0"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == VERDICT


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


# ------------------------------------------------------------ issue 21: kinds of fault

def error_of(argv, capsys) -> str:
    """The one-line error ``main(argv)`` exits 2 with."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("name", ["gpt3-175b", "llama2-70b", "gpt2-large"])
def test_train_json_reports_the_models_shape_and_only_trains_options(name, capsys):
    main(["train", "--preset", name, "--json", "--b", "2"])
    out = json.loads(capsys.readouterr().out)
    model = actmem.PRESETS[name]
    assert out["model"]["h"] == model.h and out["model"]["a"] == model.a
    assert out["model"]["L"] == model.L and out["model"]["b"] == 2
    assert out["config"]["s"] == model.s and out["config"]["b"] == 2
    assert out["config"]["preset"] == name
    assert not {"h", "a", "layers", "kv_heads", "activation", "command"} & set(out["config"])


@pytest.mark.parametrize("argv, before, command", [
    (["--json", "train", "--preset", "llama2-7b"], "--json", "train"),
    (["--flash-attention", "train", "--preset", "llama2-7b"], "--flash-attention", "train"),
    (["--s", "4096", "train", "--preset", "llama2-7b"], "--s 4096", "train"),
    (["-L", "2", "cheatsheet", "x.pdf"], "-L 2", "cheatsheet"),
])
def test_table_options_before_a_command_are_refused(argv, before, command, capsys):
    assert f"error: {before} before '{command}' belongs to the table" in error_of(argv, capsys)


@pytest.mark.parametrize("argv, option", [
    (["--seq", "4096"], "--seq"), (["--sequence", "4096"], "--sequence"),
    (["--nope"], "--nope"), (["-q", "3"], "-q"),
    (["train", "--preset", "llama2-7b", "--seq", "4096"], "--seq"),
    (["train", "--preset", "llama2-7b", "--gpu", "80GB"], "--gpu"),
])
def test_unknown_options_are_named_never_abbreviated(argv, option, capsys):
    err = error_of(argv, capsys)
    assert option in err and "invalid choice" not in err


@pytest.mark.parametrize("command", ["train", "cheatsheet"])
def test_subcommand_usage_names_the_subcommand(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert capsys.readouterr().out.startswith(f"usage: actmem {command} [-h]")
    err = error_of([command], capsys)
    assert err.startswith(f"actmem {command}: error: the following arguments are required")


@pytest.mark.parametrize("value", ["1" + "0" * 4299, "9" * 31, "1" * 10000, "4e3", "0x10", "²"])
@pytest.mark.parametrize("option", [["--s"], ["--h"], ["train", "--preset", "llama2-7b", "-m"]])
def test_integer_options_refuse_what_is_not_a_short_integer(option, value, capsys):
    err = error_of([*option, value], capsys)
    assert "is not an integer of at most 30 digits" in err and len(err) < 300


def test_integer_options_take_any_scripts_digits(capsys):
    main(["--s", "٤٠٩٦", "--t", "8", "--json"])   # Arabic-Indic 4096
    assert json.loads(capsys.readouterr().out)["config"]["s"] == 4096


@pytest.mark.parametrize("reserve, extra", [("5", 5), ("0", 0), (str(2**30), 2**30),
                                            ("1GiB", 2**30), ("0.5", 40 * 2**30)])
def test_reserve_takes_bytes_sizes_and_fractions(reserve, extra, capsys):
    main(["train", "--preset", "llama2-7b", "-t", "2", "--json", "--gpu-memory", "80GiB",
          "--reserve", reserve])
    stage = json.loads(capsys.readouterr().out)["stages"][0]
    assert stage["needed"] == stage["peak"] + extra


@pytest.mark.parametrize("delta", [-1, -2**20, -2**29, 0, 1, 2**20])
def test_verdict_margin_keeps_its_sign(delta):
    from actmem.views.train_cli import verdict
    top = actmem.training_memory(actmem.PRESETS["llama2-7b"], t=2, p=2, m=4)
    need = max(s.needed for s in top.stages)
    result = actmem.training_memory(actmem.PRESETS["llama2-7b"], t=2, p=2, m=4,
                                    gpu_memory=need + delta)
    line = verdict(result)
    margin = line.split("margin ")[1].split(" GiB")[0]
    assert float(margin) * 2**30 == pytest.approx(delta, abs=0.51 * 2**30 * 10**-len(
        margin.split(".")[-1]) if "." in margin else 0.5)
    assert (delta < 0) == margin.startswith("-") == line.endswith("DOES NOT FIT")


@pytest.mark.parametrize("name", [".pdf", ".png", "sheet", "sheet.pdf.txt", "dir/.PDF"])
def test_cheat_sheet_needs_a_name_and_a_pdf_or_png_extension(name, tmp_path, capsys):
    err = error_of(["cheatsheet", str(tmp_path / name)], capsys)
    assert "must end in .pdf or .png after a name" in err
    assert list(tmp_path.iterdir()) == []


def test_cheat_sheet_file_errors_are_one_line_before_drawing(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    for out in (tmp_path / "file" / "x.pdf", tmp_path / ("x" * 300 + ".pdf"),
                tmp_path / "missing" / "x.png"):
        assert "cannot be written" in error_of(["cheatsheet", str(out)], capsys)


def test_cheat_sheet_in_chinese_in_the_format_its_name_gives(tmp_path, capsys):
    from actmem.language import get_language
    out = tmp_path / "SHEET.PDF"
    assert main(["cheatsheet", str(out), "--lang", "zh"]) == 0
    assert out.read_bytes().startswith(b"%PDF") and list(tmp_path.iterdir()) == [out]
    assert get_language() == "en"   # the process's language is left as it was
    assert capsys.readouterr().out == f"wrote {out}\n"


def test_workshop_file_errors_are_one_line(tmp_path, capsys):
    from actmem.workshop import main as workshop
    (tmp_path / "file").write_text("")
    for out in (tmp_path / "file" / "w", tmp_path / ("w" * 300)):
        with pytest.raises(SystemExit) as exit_info:
            workshop([str(out)])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and err.splitlines()[-1].startswith(
            "python -m actmem.workshop: error:")


HELP = [["-m", "actmem"], ["-m", "actmem", "train"], ["-m", "actmem", "cheatsheet"],
        ["-m", "actmem.workshop"], ["-m", "actmem.learn"],
        [str(Path(__file__).resolve().parents[1] / "tools" / "refresh_notebooks.py")]]
"""actmem's command lines (the measurement's, ``actmem.measure``, has its own tests)."""


@pytest.mark.parametrize("command", HELP, ids=lambda c: " ".join(c[-2:]))
def test_help_reads_as_plain_text(command):
    """Issue 41: --help showed the docstrings' reST (``double backticks``,
    :func: roles)."""
    result = subprocess.run([sys.executable, *command, "--help"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout
    assert not [line for line in result.stdout.splitlines()
                if "``" in line or ":func:" in line or ":mod:" in line], result.stdout

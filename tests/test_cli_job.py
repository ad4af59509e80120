"""``actmem train --megatron-args FILE --world-size N`` and ``--hf-config FILE``
(issue 43, section 2): the job as it is launched, through the command line.

The launches are Megatron-LM's own CI runs that actmem ships
(actmem/data/megatron_runs.json: each run's MODEL_ARGS, ENV_VARS and world
size at the pinned commit), written to a file as a launch script holds them."""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import actmem
from actmem import Job, ModelConfig, training_memory
from actmem.language import translator
from actmem.run.job.megatron_args import ci_runs
from actmem.views.cli import main
from actmem.views.job_cli import read_launch
from actmem.views.train_cli import table, timeline_text
from test_cli import error_of   # the one-line error a CLI call exits 2 with

RUNS = ci_runs()
LLAMA2 = Path(__file__).parent / "hf_configs" / "llama2-7b.json"


def script(argv: list[str]) -> str:
    """The launch as a script writes it: each flag and its values on a line,
    the lines joined by a backslash, values quoted as a shell needs."""
    lines = []
    for token in argv:
        if token.startswith("--") or not lines:
            lines.append([])
        lines[-1].append(shlex.quote(token))
    return " \\\n    ".join(" ".join(line) for line in lines) + "\n"


def launch_argv(tmp_path, name: str, text: str | None = None) -> list[str]:
    """``actmem train``'s arguments for the CI run ``name``: its launch file
    (``text``, or :func:`script` of its argv), its world size, its
    environment (``--env``) and its GPU."""
    run = RUNS[name]
    launch = run["launch"]
    path = tmp_path / "launch.txt"
    path.write_text(script(launch["argv"]) if text is None else text)
    env = [x for k, v in launch["env"].items() for x in ("--env", f"{k}={v}")]
    return ["train", "--megatron-args", str(path), "--world-size", str(launch["world_size"]),
            *env, "--gpu-memory", run["gpu"]]


def python_result(name: str):
    run = RUNS[name]
    launch = run["launch"]
    job = Job.from_megatron_args(launch["argv"], world_size=launch["world_size"],
                                 env=launch["env"], gpu=run["gpu"])
    return training_memory(job)


def json_of(argv, capsys) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# Megatron-LM's derivations (arguments.py, validate_args), by hand: tp4_pp1 runs
# --global-batch-size 8 over --micro-batch-size 2 on 8 GPUs at t=4: d = 8/4 = 2,
# m = 8/(2*2) = 2; tp1_pp4 runs micro-batch 1 at p=4: d = 2, m = 8/(1*2) = 4, and
# --num-layers-per-virtual-pipeline-stage 1 gives v = 32/(4*1) = 8 chunks.
SIZES = {"gpt3_7b_tp4_pp1_memory_speed": dict(t=4, p=1, d=2, m=2, schedule="1f1b", v=1),
         "gpt3_7b_tp1_pp4_memory_speed": dict(t=1, p=4, d=2, m=4, schedule="interleaved", v=8)}


@pytest.mark.parametrize("name", sorted(SIZES))
def test_a_ci_launch_gives_the_python_jobs_peaks(name, tmp_path, capsys):
    data = json_of(launch_argv(tmp_path, name), capsys)
    expected = python_result(name)
    assert [s["peak"] for s in data["stages"]] == [s.peak for s in expected.stages]
    assert [{k: s[k] for k in actmem.PARTS} for s in data["stages"]] == [
        s.parts for s in expected.stages]
    assert {k: data["config"][k] for k in SIZES[name]} == SIZES[name]
    assert data["job"]["cublas_workspace_config"] == ":4096:8"   # from --env
    assert data["job"]["distributed_optimizer"] is True          # --use-distributed-optimizer
    assert data["gpu"] == "H100 80GB SXM"
    measured = RUNS[name]["mem_max_allocated_bytes"]              # the last rank's peak
    assert abs(data["stages"][-1]["peak"] - measured) < 0.02 * measured


def test_the_table_timeline_and_chinese_are_the_jobs(tmp_path, capsys):
    name = "gpt3_7b_tp1_pp4_memory_speed"
    assert main([*launch_argv(tmp_path, name), "--timeline", "--lang", "zh"]) == 0
    out = capsys.readouterr().out
    result, zh = python_result(name), translator("zh")
    assert out == "\n".join(["launch.txt: t=1 p=4 d=2 m=4 interleaved v=8",
                             *(timeline_text(s, zh) for s in result.stages),
                             table(result, "H100 80GB SXM", zh)]) + "\n"
    assert "第 3 级" in out


def test_continued_lines_and_comments_are_read_as_a_shell_reads_them(tmp_path, capsys):
    name = "gpt3_7b_tp4_pp1_memory_speed"
    argv = RUNS[name]["launch"]["argv"]
    text = ("# Megatron-LM's CI run, as launched\n\n"
            + " \\\n".join(argv[:6]) + "   # the model's size\n"
            + "# --fsdp-double-buffer   (commented out: refused if it were read)\n"
            + " ".join(shlex.quote(t) for t in argv[6:]) + "\n")
    path = tmp_path / "launch.txt"
    path.write_text(text)
    assert read_launch(str(path)) == argv
    one_line = json_of(launch_argv(tmp_path, name, " ".join(map(shlex.quote, argv))), capsys)
    assert json_of(launch_argv(tmp_path, name, text), capsys)["stages"] == one_line["stages"]


def test_a_file_that_is_not_a_launch_is_named():
    path = Path(__file__).parent / "hf_configs" / "llama2-7b.json"   # a config.json
    with pytest.raises(ValueError, match="starts with '{architectures:', not an option"):
        read_launch(str(path))


@pytest.mark.parametrize("flag, why", [("--main-grads-dtype bf16", "refused"),
                                       ("--fsdp-double-buffer", "refused"),
                                       ("--no-such-flag", "unrecognized arguments")])
def test_a_refused_flag_exits_2_naming_it(flag, why, tmp_path):
    name = "gpt3_7b_tp4_pp1_memory_speed"
    argv = launch_argv(tmp_path, name, script([*RUNS[name]["launch"]["argv"], flag]))
    proc = subprocess.run([sys.executable, "-m", "actmem", *argv], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr
    assert flag in proc.stderr and why in proc.stderr and "--megatron-args" in proc.stderr


# test_cli.py derives LLaMA-2-7B's peaks at s=4096, b=1, t=2, p=2, d=2, m=8 on an
# A100 80GB by hand (its PEAK0 and PEAK1); its config.json is the same model.
HAND_PEAKS = [41_405_710_336, 36_545_605_632]   # with TE's dummy weight gradients


def test_hf_config_gives_the_python_models_peaks(capsys):
    data = json_of(["train", "--hf-config", str(LLAMA2), "--s", "4096", "--b", "1",
                    "--t", "2"], capsys)
    model = ModelConfig.from_hf_config(LLAMA2, s=4096, b=1)
    assert [s["peak"] for s in data["stages"]] == [
        s.peak for s in training_memory(model, t=2).stages]
    assert data["model"]["h"] == 4096 and data["config"]["hf_config"] == str(LLAMA2)
    data = json_of(["train", "--hf-config", str(LLAMA2), "--s", "4096", "-t", "2", "-p", "2",
                    "-d", "2", "-m", "8", "--gpu-memory", "A100 80GB"], capsys)
    assert [s["peak"] for s in data["stages"]] == HAND_PEAKS   # --b: 1 unless given
    options = ["-t", "2", "-p", "2", "-d", "2", "-m", "8", "--gpu-memory", "A100 80GB"]
    assert main(["train", "--hf-config", str(LLAMA2), "--s", "4096", *options]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "llama2-7b.json: t=2 p=2 d=2 m=8 1f1b v=1"
    assert lines[-1].startswith("most loaded: stage 0, peak 38.56 GiB at 'backward of "
                                "micro-batch 0: the last layer's MLP'")
    assert main(["train", "--preset", "llama2-7b", *options]) == 0   # the same model
    assert capsys.readouterr().out.splitlines()[1:] == lines[1:]


@pytest.mark.parametrize("extra, message", [
    (["--t", "2"], "argument --t: not allowed with argument --megatron-args"),
    (["-p2"], "argument -p: not allowed with argument --megatron-args"),
    (["--recompute", "full"], "argument --recompute: not allowed with argument --megatron-args"),
    (["--no-flash-attention"], "argument --no-flash-attention: not allowed with argument "
                               "--megatron-args"),
    (["--preset", "llama2-7b"], "argument --preset: not allowed with argument --megatron-args"),
    (["--hf-config", str(LLAMA2)], "argument --hf-config: not allowed with argument "
                                   "--megatron-args"),
])
def test_a_launch_refuses_the_options_it_sets(extra, message, tmp_path, capsys):
    argv = launch_argv(tmp_path, "gpt3_7b_tp4_pp1_memory_speed")
    assert message in error_of([*argv, *extra], capsys)


@pytest.mark.parametrize("argv, message", [
    (["--megatron-args", "launch.txt"], "argument --megatron-args: needs --world-size N"),
    (["--hf-config", str(LLAMA2)], "argument --hf-config: needs --s N"),
    (["--hf-config", str(LLAMA2), "--s", "4096", "--preset", "llama2-7b"],
     "argument --preset: not allowed with argument --hf-config"),
    (["--preset", "llama2-7b", "--world-size", "8"],
     "argument --world-size: only with --megatron-args"),
    (["--hf-config", str(LLAMA2), "--s", "4096", "--env", "NVTE_FLASH_ATTN=0"],
     "argument --env: only with --megatron-args"),
    ([], "the following arguments are required: one of --preset NAME, --megatron-args FILE "
         "or --hf-config FILE"),
    (["--megatron-args", "launch.txt", "--world-size", "8", "--env", "NVTE_FLASH_ATTN"],
     "argument --env: 'NVTE_FLASH_ATTN' is not KEY=VALUE"),
])
def test_options_that_do_not_go_together_are_refused(argv, message, capsys):
    assert message in error_of(["train", *argv], capsys)


@pytest.mark.parametrize("option, text, message", [
    ("--megatron-args", None, "cannot be read: No such file or directory"),
    ("--megatron-args", "", "holds no arguments"),
    ("--megatron-args", "torchrun pretrain_gpt.py --num-layers 2\n",
     "starts with 'torchrun', not an option"),
    ("--megatron-args", "MODEL_ARGS:\n  --num-layers: 2\n", "YAML's MODEL_ARGS form is not read"),
    ("--megatron-args", "--num-layers '2\n", "No closing quotation"),
    ("--megatron-args", "--num-layers 2\n", "--megatron-args"),   # a launch missing sizes
    ("--hf-config", None, "--hf-config: config="),
    ("--hf-config", '{"model_type": "llama",', "is not a readable config.json"),
    ("--hf-config", '{"model_type": "qwen2"}', "model_type='qwen2' is not modelled"),
])
def test_bad_files_are_one_line_errors(option, text, message, tmp_path, capsys):
    path = tmp_path / "file"
    if text is not None:
        path.write_text(text)
    extra = ["--world-size", "8"] if option == "--megatron-args" else ["--s", "4096"]
    assert message in error_of(["train", option, str(path), *extra], capsys)


def test_env_reaches_the_job(tmp_path, capsys):
    """NVTE_FLASH_ATTN=0 with NVTE_FUSED_ATTN=0: Transformer Engine's unfused
    attention, which keeps the s x s map (Job.from_megatron_args)."""
    name = "gpt3_7b_tp4_pp1_memory_speed"
    flash = json_of(launch_argv(tmp_path, name), capsys)
    unfused = json_of([*launch_argv(tmp_path, name), "--env", "NVTE_FLASH_ATTN=0",
                       "--env", "NVTE_FUSED_ATTN=0"], capsys)
    assert flash["model"]["flash_attention"] is True
    assert unfused["model"]["flash_attention"] is False
    assert unfused["stages"][0]["peak"] > flash["stages"][0]["peak"]
    err = error_of([*launch_argv(tmp_path, name), "--env", "NVTE_FUSED_ATTN=0",
                    "--env", "NVTE_FUSED_ATTN=1"], capsys)
    assert "--env NVTE_FUSED_ATTN given twice: '0' and '1'" in err

"""``actmem train`` with today's levers: --cp/--context-parallel-size,
--cp-comm-type, --hierarchical-context-parallel-sizes, --fp8/--fp8-format,
--fp8-recipe, --moe-token-dispatcher-type, --recompute-modules,
--lora-rank/--lora-targets (Megatron-LM's flag names);
bad values get argparse's choices or the API's message, in one line."""

import json

import pytest

from actmem import MOE_PRESETS, PRESETS, training_memory
from actmem.views.cli import main

L7 = PRESETS["llama2-7b"]


def run_json(capsys, *argv):
    assert main(["train", "--preset", "llama2-7b", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("argv, direct", [
    (["-t", "2", "--cp", "4", "--cp-comm-type", "a2a"], dict(t=2, cp=4, cp_comm_type="a2a")),
    (["--context-parallel-size", "4", "--cp-comm-type", "a2a+p2p",
      "--hierarchical-context-parallel-sizes", "2", "2"],
     dict(cp=4, cp_comm_type="a2a+p2p", hierarchical_context_parallel_sizes=(2, 2))),
    (["--fp8-format", "hybrid", "--recompute", "selective", "--recompute-modules", "core_attn",
      "mlp"], dict(fp8="hybrid", recompute="selective", recompute_modules=["core_attn", "mlp"])),
    (["--cpu-offloading-num-layers", "16"], dict(cpu_offloading_num_layers=16)),
    (["-t", "2", "--fp8", "hybrid", "--fp8-recipe", "blockwise", "--gpu-memory",
      "H100 80GB SXM"], dict(t=2, fp8="hybrid", fp8_recipe="blockwise",
                              gpu_memory="H100 80GB SXM")),
])
def test_the_levers_reach_training_memory(capsys, argv, direct):
    out = run_json(capsys, *argv)
    result = training_memory(L7, **direct)
    assert [s["peak"] for s in out["stages"]] == [s.peak for s in result.stages]
    assert out["stages"][0]["layer_activations"] == result.stages[0].layer_activations
    assert out["stages"][0]["host_memory"] == result.stages[0].host_memory


def test_lora_freezes_the_base(capsys):
    out = run_json(capsys, "--lora-rank", "16", "--lora-targets", "q_proj", "v_proj")
    lora = training_memory(L7.with_(lora_rank=16, lora_targets=("q_proj", "v_proj")))
    assert out["stages"][0]["peak"] == lora.stages[0].peak
    assert out["model"]["lora_targets"] == ["q_proj", "v_proj"]
    assert out["config"]["lora_rank"] == 16
    assert out["stages"][0]["peak"] < run_json(capsys)["stages"][0]["peak"]


def test_the_run_line_names_the_levers(capsys):
    main(["train", "--preset", "llama2-7b", "-t", "2", "--cp", "2", "--cp-comm-type",
          "allgather"])
    assert capsys.readouterr().out.splitlines()[0] == (
        "llama2-7b: t=2 p=1 d=1 m=1 1f1b v=1 cp=2 allgather")


@pytest.mark.parametrize("argv, message", [
    (["--fp8", "e5m2"], "argument --fp8/--fp8-format: invalid choice: 'e5m2' "
                        "(choose from 'e4m3', 'hybrid')"),
    (["--cp-comm-type", "ring"], "argument --cp-comm-type: invalid choice: 'ring'"),
    (["--recompute", "selective", "--recompute-modules", "attn"],
     "argument --recompute-modules: invalid choice: 'attn'"),
    (["--cp", "3"], "s=4096 must be divisible by 2*cp=6 (cp=3)"),
    (["--cp", "4", "--cp-comm-type", "a2a+p2p"],
     "cp_comm_type='a2a+p2p' needs hierarchical_context_parallel_sizes"),
    (["--recompute-modules", "mlp"], "recompute_modules=['mlp'] needs recompute='selective'"),
    (["--lora-rank", "8"], "lora_rank=8 needs lora_targets"),
    (["-p", "2", "--cpu-offloading-num-layers", "4"],
     "cpu_offloading_num_layers=4 with p=2: Megatron-LM has no support for pipeline"),
    (["--preset", "mixtral-8x7b", "--fp8", "e4m3", "--recompute", "selective",
      "--recompute-modules", "moe_act"],
     "fp8='e4m3' under fp8_recipe='delayed' with recompute_modules containing 'moe_act'"),
    (["--preset", "mixtral-8x7b", "--t", "2", "--d", "8", "--ep", "8",
      "--moe-token-dispatcher-type", "flex"], "moe_token_dispatcher_type='flex' with etp*ep=16"),
    (["--moe-token-dispatcher-type", "flex"],
     "moe_token_dispatcher_type='flex' needs num_experts"),
])
def test_bad_levers_exit_2_with_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--preset", "llama2-7b", *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_an_moe_preset_takes_cp_into_its_expert_groups(capsys):
    """ep*etp divides t*cp*d: ep=4 at t=2, cp=2 (Megatron-LM's expert groups)."""
    main(["train", "--preset", "mixtral-8x7b", "-t", "2", "--sequence-parallel", "--cp", "2",
          "--ep", "4", "--etp", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    result = training_memory(MOE_PRESETS["mixtral-8x7b"], t=2, sequence_parallel=True, cp=2,
                             ep=4, etp=1)
    assert out["stages"][0]["peak"] == result.stages[0].peak


def test_an_moe_preset_takes_the_flex_dispatcher(capsys):
    """--moe-token-dispatcher-type flex: DeepEP's rows and its buffers in the
    reserve, as training_memory on the preset with that dispatcher."""
    argv = ["train", "--preset", "mixtral-8x7b", "-t", "2", "--sequence-parallel", "--ep", "4",
            "-d", "4", "--moe-token-dispatcher-type", "flex", "--gpu-memory", "H100 80GB SXM"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    direct = training_memory(MOE_PRESETS["mixtral-8x7b"].with_(moe_token_dispatcher_type="flex"),
                             t=2, sequence_parallel=True, ep=4, d=4, gpu_memory="H100 80GB SXM")
    assert [s["peak"] for s in out["stages"]] == [s.peak for s in direct.stages]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert " dispatcher=flex" in printed.splitlines()[0] and "DeepEP 0.23" in printed


def test_offloading_prints_the_host_memory(capsys):
    main(["train", "--preset", "llama2-7b", "--cpu-offloading-num-layers", "16"])
    host = training_memory(L7, cpu_offloading_num_layers=16).stages[0].host_memory
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("host memory")]
    assert line == [f"{'host memory (offload)':<24}{host / 2**20:>12.10g}"]

"""Notebook 09's planner with today's levers (issue 23 item 10): cp and its
comm type, FP8 and named-module recomputation are offered only where
training_memory runs them, and the readouts state training_memory."""

import pytest

from actmem import MOE_PRESETS, PRESETS, training_memory
from actmem.views import fit_levers
from actmem.views.fit_views import (MODELS, STATES, FitPlanner, expert_choices,
                                    recompute_options, run_arguments, tensor_choices)
from actmem.views.train_cli import verdict

L7 = PRESETS["llama2-7b"]
BASE = dict(p=1, d=1, m=1, schedule="1f1b", v=1, split="even", gpu="H100 80GB SXM",
            states=STATES["Megatron-LM (18 B/param)"], loss="vocab_parallel",
            gradient_buffer="persistent")


def offered_runs(name):
    """Every (t, sp, cp, comm, recompute, fp8, ep, offload) the planner's
    menus offer for one preset at p = d = m = 1, with t at its smallest and
    largest offered value up to 8 (the levers' rules look at t only through
    divisibility, which these two bound) and the offloaded layers at 0 and at
    the ends of their offered range (the rule is 0 <= n < L)."""
    model = MODELS[name]
    for sp in (False, True):
        ts = [t for t in tensor_choices(model, sp) if t <= 8]
        for t in sorted({ts[0], ts[-1]}):
            for cp in fit_levers.cp_choices(model, t, sp):
                ep = expert_choices(model, t, 1, cp=cp)[0][-1]
                etp = expert_choices(model, t, 1, ep, cp)[1][0]
                for comm in fit_levers.comm_keys(model, t, sp, cp):
                    for _, recompute in recompute_options(1, model, t, sp):
                        modules = (*recompute[2:], None)[0]
                        fp8s = fit_levers.fp8_choices(model, t, sp, recompute[0], modules, cp)
                        offloads = fit_levers.offload_choices(model, 1, recompute[0], "1f1b")
                        for fp8 in fp8s:
                            for offload in {0, offloads[1 % len(offloads)], offloads[-1]}:
                                yield dict(model=name, t=t, sequence_parallel=sp, cp=cp,
                                           cp_comm_type=comm, recompute=recompute, fp8=fp8,
                                           offload=offload, ep=ep,
                                           etp=etp if model.num_experts else None)


CPS = {1, 2, 4, 8, 16, 32}


@pytest.mark.parametrize("name, cps", [
    ("gpt2-large", {1}),  # no FlashAttention: TE runs no context parallelism unfused
    ("llama2-7b", CPS), ("llama2-70b", CPS),
    ("qwen3-30b-a3b", {1}),  # kv_channels, query/key norms: cp's rows not modelled
    ("deepseek-v2-lite", CPS)])  # multi-latent attention, MoE: p2p and allgather
def test_every_offered_combination_runs(name, cps):
    """No menu entry makes training_memory raise, and the menus offer each
    lever somewhere (FP8 without multi-latent attention, a2a only for dense
    models)."""
    runs = list(offered_runs(name))
    model = MODELS[name]
    for run in runs:
        training_memory(model, **run_arguments({**BASE, **run}))
    seen = {k: {str(r[k]) for r in runs}
            for k in ("cp", "cp_comm_type", "fp8", "recompute", "offload")}
    assert seen["offload"] == ({"0"} if model.num_experts else {"0", "1", str(model.L - 1)})
    assert seen["cp"] == {str(cp) for cp in cps}
    assert ("e4m3" in seen["fp8"]) == (not model.multi_latent_attention)
    assert ("a2a" in seen["cp_comm_type"]) == (model.num_experts is None and cps != {1})
    assert any("core_attn" in r for r in seen["recompute"])


def test_menus_narrow_with_the_other_controls():
    x = FitPlanner(model="llama2-70b", t=8, p=2, d=1, m=4, gpu="H100 80GB SXM")
    assert list(x.controls["cp"].options) == [1, 2, 4, 8, 16, 32]
    assert x.controls["fp8"].options == (("off", "off"), ("e4m3", "e4m3"), ("hybrid", "hybrid"))
    x.controls["cp"].value = 2  # 8 key/value heads over t=8: one per rank, none for a2a
    assert [k for _, k in x.controls["cp_comm_type"].options] == ["p2p", "allgather"]
    assert x.controls["fp8"].options == (("off", "off"),)  # TE's FP8 is modelled at cp=1
    x.controls["t"].value = 2
    assert [k for _, k in x.controls["cp_comm_type"].options] == ["p2p", "allgather", "a2a"]
    x.controls["flash_attention"].value = False  # no unfused attention runs cp > 1
    assert list(x.controls["cp"].options) == [1] and x.controls["cp"].value == 1
    assert x.controls["cp_comm_type"].options == (("p2p", "p2p"),)
    x.controls["model"].value = "mixtral-8x7b"
    x.controls["cp"].value = 4
    assert [k for _, k in x.controls["cp_comm_type"].options] == ["p2p", "allgather"]
    assert x.controls["fp8"].options == (("off", "off"),)
    assert [label for label, _ in recompute_options(1, MOE_PRESETS["mixtral-8x7b"], 2, True)
            if ":" in label] == [
        "selective: layernorm", "selective: moe_act", "selective: moe",
        "selective: core_attn + layernorm", "selective: core_attn + moe_act",
        "selective: core_attn + moe", "selective: core_attn + layernorm + moe_act + moe"]


def test_fp8_is_offered_where_transformer_engines_dimensions_hold():
    """TE's assert_dim_for_fp8_exec needs f/t divisible by 16: LLaMA-2-7B's
    11008 = 16 x 688 at t = 1 .. 8; f = 11000 at t = 2 gives 5500 = 16 x 343.75."""
    for t in (1, 2, 4, 8):
        assert fit_levers.fp8_choices(L7, t, False, "none") == [None, "e4m3", "hybrid"]
    odd = L7.with_(ffn_hidden_size=11000)
    assert fit_levers.fp8_choices(odd, 2, False, "none") == [None]
    x = FitPlanner(fp8="hybrid", recompute=("selective", 1, ["core_attn", "mlp"]),
                   gpu="H100 80GB SXM")
    assert x.result().stages[0].peak == training_memory(
        L7, t=2, p=2, d=2, m=8, fp8="hybrid", recompute="selective", gpu_memory="H100 80GB SXM",
        recompute_modules=["core_attn", "mlp"]).stages[0].peak


def test_fp8_is_offered_only_on_gpus_that_run_it():
    """Transformer Engine runs FP8 from compute capability 8.9 (check_fp8_support):
    the A100 (8.0) offers off only, the L4 (8.9) and the H100 (9.0) the formats;
    moving to an A100 turns FP8 off."""
    x = FitPlanner(gpu="H100 80GB SXM", fp8="e4m3")
    assert [v for _, v in x.controls["fp8"].options] == ["off", "e4m3", "hybrid"]
    x.controls["gpu"].value = "A100 80GB"
    assert x.controls["fp8"].options == (("off", "off"),) and x.controls["fp8"].value == "off"
    x.controls["gpu"].value = "L4"
    assert [v for _, v in x.controls["fp8"].options] == ["off", "e4m3", "hybrid"]
    with pytest.raises(ValueError, match="fp8='e4m3' is not offered"):
        FitPlanner(gpu="A100 80GB", fp8="e4m3")


def test_the_readouts_state_training_memory_for_the_levers():
    x = FitPlanner(t=2, p=2, d=2, m=8, gpu="H100 80GB SXM")
    for name, value, direct in [
            ("cp", 4, dict(cp=4)),
            ("cp_comm_type", "a2a", dict(cp=4, cp_comm_type="a2a")),
            ("cp_comm_type", "a2a+p2p:2x2", dict(cp=4, cp_comm_type="a2a+p2p",
                                                 hierarchical_context_parallel_sizes=(2, 2))),
            ("recompute", ("selective", 1, ("core_attn", "mlp")),
             dict(cp=4, cp_comm_type="a2a+p2p", hierarchical_context_parallel_sizes=(2, 2),
                  recompute="selective", recompute_modules=["core_attn", "mlp"])),
            ("cp", 1, dict(recompute="selective", recompute_modules=["core_attn", "mlp"])),
            ("fp8", "hybrid", dict(recompute="selective", recompute_modules=["core_attn", "mlp"],
                                   fp8="hybrid"))]:
        x.controls[name].value = value
        result = training_memory(L7, t=2, p=2, d=2, m=8, gpu_memory="H100 80GB SXM", **direct)
        assert x.readouts["verdict"].value == verdict(result, gpu="H100 80GB SXM"), name


def test_the_levers_remove_the_bytes_they_should():
    """LLaMA-2-7B (s=4096, h=4096, L=32, FlashAttention), t=2, one GPU per
    stage: p2p at cp=2 halves every layer row (each holds s/cp tokens);
    a2a keeps the attention output before the all-to-all back, 2(s/cp)h/t
    bytes more per layer; FP8 keeps the four linear inputs in 1 byte."""
    x = FitPlanner(t=2, p=1, d=1, m=1, gpu="H100 80GB SXM")

    def layers():
        return x.result().stages[0].layer_activations
    whole = layers()
    x.controls["cp"].value = 2
    assert layers() * 2 == whole
    p2p = layers()
    x.controls["cp_comm_type"].value = "a2a"
    assert layers() - p2p == 32 * 2 * (4096 // 2) * 4096 // 2
    x.controls["cp"].value = 1
    x.controls["fp8"].value = "e4m3"
    assert layers() < whole


def test_offloading_is_offered_where_megatron_runs_it():
    """--cpu-offloading-num-layers: p = 1, no recomputation, 1F1B, a dense
    model (Megatron-LM's and Transformer Engine's checks); the stages table
    adds the pinned host memory training_memory reports."""
    x = FitPlanner(t=2, p=1, d=1, m=1)
    assert list(x.controls["offload"].options) == list(range(32))
    x.controls["offload"].value = 16
    direct = training_memory(L7, t=2, m=1, cpu_offloading_num_layers=16, gpu_memory="A100 80GB")
    assert x.readouts["verdict"].value == verdict(direct, gpu="A100 80GB")
    host = direct.stages[0].host_memory
    assert host > 0 and f"<td>host memory (offload)</td><td>{host / 2**30:.2f}</td>" in \
        x.readouts["stages"].value
    x.controls["recompute"].value = ("selective", 1)
    assert list(x.controls["offload"].options) == [0] and x.controls["offload"].value == 0
    assert "host memory" not in x.readouts["stages"].value
    x.controls["recompute"].value = ("none", 1)
    x.controls["p"].value = 2
    assert list(x.controls["offload"].options) == [0]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_offered_module_set_runs(name):
    """module_sets checks the names with check_for_model only: for every
    preset, t the planner offers and sequence parallelism, each set it
    offers runs in training_memory (bf16, p = m = 1); an MoE model's sets
    include MoE names (Megatron-LM applies them to its MoE layers only),
    a dense model's core_attn + mlp."""
    model, offered = MODELS[name], set()
    for sp in (False, True):
        for t in tensor_choices(model, sp):
            for names in fit_levers.module_sets(model, t, sp):
                offered.add(names)
                training_memory(model, t=t, sequence_parallel=sp, recompute="selective",
                                recompute_modules=list(names))
    assert ("core_attn", "mlp") in offered or model.num_experts is not None
    if model.num_experts is not None:
        assert any("moe" in n or "moe_act" in n for n in offered)

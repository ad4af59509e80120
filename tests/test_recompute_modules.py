"""Named-module recomputation (issue 23, item 5): Megatron-LM's --recompute-modules.

Every expected number is derived here by hand from the paper's rows (sec. 4.1)
and what each module drops (actmem/layer/recompute_modules.py).
"""

import pytest

from actmem import LayerConfig, activation_memory
from actmem.layer.recompute_modules import MODULES, working_set

S, B, H, A = 256, 2, 64, 4
SBH, MAP = S * B * H, A * S * S * B


def total(t=1, **options):
    return activation_memory(S, B, H, A, t, **options).total


def keys(**options):
    return [r.key for r in activation_memory(S, B, H, A, **options).rows]


@pytest.mark.parametrize("t", [1, 2, 4])
def test_default_and_core_attn_are_the_papers_selective_recomputation(t):
    paper = 10 * SBH + 24 * SBH // t   # Table 2: sbh(10 + 24/t)
    assert total(t, recompute="selective") == paper
    assert total(t, recompute="selective", recompute_modules=["core_attn"]) == paper
    assert working_set(LayerConfig(S, B, H, A, t, recompute="selective")) == 5 * MAP // t


@pytest.mark.parametrize("t", [1, 2])
def test_mlp_drops_the_gelu_input_and_fc2_input(t):
    # the GeLU MLP keeps 2*2sbf/t = 16sbh/t inside its checkpoint (f = 4h)
    none = 10 * SBH + 24 * SBH // t + 5 * MAP // t
    assert total(t) == none
    assert total(t, recompute="selective", recompute_modules=("mlp",)) == none - 16 * SBH // t
    both = ("core_attn", "mlp")
    assert total(t, recompute="selective", recompute_modules=both) == none - 16 * SBH // t - \
        5 * MAP // t
    c = LayerConfig(S, B, H, A, t, recompute="selective", recompute_modules=both)
    assert working_set(c) == max(5 * MAP, 16 * SBH) // t   # blocks rebuilt one at a time


def test_mlp_keeps_its_checkpoint_input_and_the_dropout_mask_outside():
    rows = keys(recompute="selective", recompute_modules=["mlp"])
    assert "fc1_input" in rows and "mlp_out_dropout_mask" in rows
    assert not {"gelu_input", "fc2_input"} & set(rows)
    swiglu = keys(activation="swiglu", recompute="selective", recompute_modules=["mlp"])
    assert not {"swiglu_gate", "swiglu_up", "fc2_input"} & set(swiglu)


@pytest.mark.parametrize("sp", [False, True])
def test_layernorm_drops_both_norm_outputs_not_their_inputs(sp):
    t = 4 if sp else 1
    base = dict(sequence_parallel=sp)
    plain = activation_memory(S, B, H, A, t, recompute="selective", recompute_modules=(),
                              **base)
    ln = activation_memory(S, B, H, A, t, recompute="selective", recompute_modules=["layernorm"],
                           **base)
    assert plain.total - ln.total == 2 * 2 * SBH // t
    assert {r.key for r in plain.rows} - {r.key for r in ln.rows} == {"qkv_input", "fc1_input"}
    assert working_set(ln.config) == 2 * SBH // t    # one norm output at a time
    both = LayerConfig(S, B, H, A, t, recompute="selective", sequence_parallel=sp,
                       recompute_modules=["layernorm", "core_attn"])
    assert working_set(both) == (2 * SBH + 5 * MAP) // t    # qkv input beside the map


def test_empty_list_recomputes_nothing_as_megatron():
    assert total(recompute="selective", recompute_modules=[]) == total()


MOE = dict(activation="swiglu", num_experts=4, moe_router_topk=2, moe_ffn_hidden_size=96,
           moe_shared_expert_intermediate_size=32, recompute="selective")
N, K, FE, FS = S * B, 2, 96, 32


def moe_rows(mods):
    return {r.key: r.bytes for r in activation_memory(S, B, H, A, recompute_modules=mods,
                                                      **MOE).rows}


def test_moe_modules_drop_their_rows():
    base = moe_rows([])
    assert set(base) - set(moe_rows(["moe_act"])) == {"expert_fc2_input"}
    assert base["expert_fc2_input"] == 2 * N * K * FE
    assert set(base) - set(moe_rows(["shared_experts"])) == {"shared_fc1_output",
                                                             "shared_fc2_input"}
    gone = set(base) - set(moe_rows(["moe"]))
    assert "moe_input" not in gone and gone == {
        "router_topk_indices", "router_probs", "permute_probs_index", "permute_index",
        "expert_fc1_input", "expert_fc1_output", "expert_probs", "expert_fc2_input",
        "shared_fc1_output", "shared_fc2_input"}
    assert set(base) - set(moe_rows(["layernorm"])) == {"qkv_input", "moe_input"}
    c = LayerConfig(S, B, H, A, recompute_modules=("moe_act", "shared_experts"), **MOE)
    assert working_set(c) == max(2 * N * K * FE, 3 * 2 * N * FS)
    c = LayerConfig(S, B, H, A, recompute_modules=("moe", "layernorm"), **MOE)
    assert working_set(c) == sum(base[k] for k in gone) + 2 * N * H


def test_names_are_kept_in_megatrons_order():
    c = LayerConfig(S, B, H, A, recompute="selective", recompute_modules=["mlp", "core_attn"])
    assert c.recompute_modules == ("core_attn", "mlp")
    assert c == LayerConfig(S, B, H, A, recompute="selective",
                            recompute_modules=("core_attn", "mlp"))
    assert MODULES[:3] == ("core_attn", "layernorm", "mlp")


@pytest.mark.parametrize("options, error, match", [
    (dict(recompute_modules=["mlp"]), ValueError, "needs recompute='selective'"),
    (dict(recompute="full", recompute_modules=["mlp"]), ValueError, "got recompute='full'"),
    (dict(recompute="selective", recompute_modules="mlp"), TypeError, "list of module names"),
    (dict(recompute="selective", recompute_modules=["mlp", 3]), TypeError, "module names"),
    (dict(recompute="selective", recompute_modules=["attention"]), ValueError,
     "unknown name.*'attention'.*allowed: core_attn"),
    (dict(recompute="selective", recompute_modules=["mlp", "mlp"]), ValueError, "twice"),
    (dict(recompute="selective", recompute_modules=["moe_act"]), ValueError,
     "moe_act.*dense.*'mlp'"),
    (dict(recompute="selective", recompute_modules=["mla_up_proj"]), ValueError,
     "multi_latent_attention"),
    (dict(MOE, recompute_modules=["mlp"]), ValueError, "use 'moe'"),
    (dict(MOE, moe_shared_expert_intermediate_size=None, recompute_modules=["shared_experts"]),
     ValueError, "needs shared experts"),
])
def test_refused(options, error, match):
    with pytest.raises(error, match=match):
        LayerConfig(S, B, H, A, **options)


MLA = dict(multi_latent_attention=True, q_lora_rank=24, kv_lora_rank=16, qk_head_dim=8,
           qk_pos_emb_head_dim=4, v_head_dim=8, recompute="selective")


def test_mla_up_proj_drops_q_k_v_and_the_latents_norm_outputs():
    base = {r.key: r.bytes for r in activation_memory(S, B, H, A, recompute_modules=[], **MLA).rows}
    up = {r.key: r.bytes for r in activation_memory(S, B, H, A, recompute_modules=["mla_up_proj"],
                                                    **MLA).rows}
    assert set(base) - set(up) == {"q_up_input", "kv_up_input", "query", "key", "value"}
    assert base["kv_down_output"] == 2 * S * B * 16
    assert up["kv_down_output"] == 2 * S * B * (16 + 4)   # the split view keeps the rope columns
    c = LayerConfig(S, B, H, A, recompute_modules=["mla_up_proj"], **MLA)
    rebuilt = sum(base[k] for k in ("q_up_input", "kv_up_input", "query", "key", "value"))
    assert working_set(c) == rebuilt + 2 * S * B * 16     # and the up projection's r_kv copy
    ln = {r.key for r in activation_memory(S, B, H, A, recompute_modules=["layernorm"],
                                           **MLA).rows}
    assert "mla_down_input" not in ln and "attn_norm_input" in ln
    sp = {r.key: r.bytes for r in activation_memory(S, B, H, A, 2, sequence_parallel=True,
                                                    recompute_modules=["mla_up_proj"], **MLA).rows}
    assert sp["kv_down_output"] == up["kv_down_output"] // 2   # the rank's s/t tokens
    assert sp["mla_rotary_key_gathered"] == 2 * S * B * 4     # gathered: every token's d_r
    one = {r.key for r in activation_memory(S, B, H, A, recompute_modules=["mla_up_proj"],
                                            **MLA).rows}
    assert "mla_rotary_key_gathered" not in one   # nothing is gathered without SP


@pytest.mark.parametrize("mods, activation", [
    (None, "gelu"), (("mlp",), "swiglu"), (("layernorm",), "gelu"),
    (("core_attn", "layernorm", "mlp"), "swiglu")])
def test_measured_rows_match_the_ledger_to_the_byte(mods, activation):
    pytest.importorskip("torch")
    from actmem.measure.compare import compare
    from actmem.measure.recompute_modules import gradients_match, measure_recompute_modules
    c = LayerConfig(64, 2, 32, 4, recompute="selective", recompute_modules=mods,
                    activation=activation)
    result = compare(measure_recompute_modules(c))
    assert [r.key for r in result.rows if not r.exact] == []
    assert result.measured_rows_total == activation_memory(**{
        f: getattr(c, f) for f in ("s", "b", "h", "a", "t", "recompute", "activation",
                                   "recompute_modules")}).total
    freed = {e.storage.key for e in result.extras if e.storage.nbytes == 0}
    assert freed == ({"qkv_input", "fc1_input"} if "layernorm" in (mods or ()) else set())
    stats = [e for e in result.extras if e.storage.saved_by[:1] and
             e.storage.saved_by[0].startswith("NativeLayerNormBackward0")]
    assert len(stats) == (0 if "layernorm" in (mods or ()) else 4)   # no_grad norms save none
    assert gradients_match(c)


def test_measured_layer_refuses_moe_names():
    pytest.importorskip("torch")
    from actmem.measure.recompute_modules import ModuleRecomputeLayer
    c = LayerConfig(64, 2, 32, 4, recompute="selective", recompute_modules=["moe_act"], **{
        k: v for k, v in MOE.items() if k != "recompute"})
    with pytest.raises(ValueError, match="dense layer"):
        ModuleRecomputeLayer(c)


def test_training_memory_takes_recompute_modules():
    from actmem import PRESETS, training_memory
    llama = PRESETS["llama2-7b"]     # SwiGLU, FlashAttention, no dropout
    sbh = 4096 * 4096

    def stage(**options):
        return training_memory(llama, m=4, recompute="selective", **options).stages[0]

    default = stage()
    assert stage(recompute_modules=["core_attn"]) == default
    # per layer: the norms' inputs, the QKV and fc1 inputs, Q, K, V and proj_input: 16sbh
    assert stage(recompute_modules=["mlp", "core_attn"]).layer_activations == 32 * 16 * sbh
    assert stage(recompute_modules=["core_attn", "layernorm", "mlp"]).layer_activations == \
        32 * 12 * sbh
    # core_attn alone: the same and SwiGLU's gate, up and fc2 input, 3 x 2sbf
    assert default.layer_activations == 32 * (16 * sbh + 3 * 2 * 4096 * 11008)


def test_training_memory_rebuilds_one_block_at_a_time():
    from actmem import PRESETS, training_memory
    llama, sbh, sbf = PRESETS["llama2-7b"], 4096 * 4096, 4096 * 11008
    names = ["core_attn", "layernorm", "mlp"]
    run = training_memory(llama, m=4, recompute="selective", recompute_modules=names)
    # the MLP block rebuilds its norm's output (2sbh) and gate, up, fc2 input (3 x 2sbf);
    # the attention block, later, only the first norm's output (no map under FlashAttention)
    assert run.stages[0].recompute_working_set == 2 * sbh + 3 * 2 * sbf  # 290 MiB
    assert run.stages[0].recompute_working_set == working_set(
        llama.layer(1, recompute="selective", recompute_modules=tuple(names)))
    with pytest.raises(ValueError, match=r"precision='fp32' does not model recompute_modules=\['mlp'\]"):
        training_memory(llama, recompute="selective", recompute_modules=["mlp"],
                        precision="fp32")


@pytest.mark.parametrize("options, match", [
    (dict(recompute="none", recompute_modules=["mlp"]), "needs recompute='selective'"),
    (dict(recompute="selective", recompute_modules=["moe"]), "dense"),
    (dict(recompute="selective", recompute_modules=["core"]), "unknown name"),
])
def test_training_memory_refuses_before_any_work(options, match):
    from actmem import PRESETS, training_memory
    with pytest.raises(ValueError, match=match):
        training_memory(PRESETS["llama2-7b"], **options)
    with pytest.raises(TypeError, match="list of module names"):
        training_memory(PRESETS["llama2-7b"], recompute_modules="mlp")


def test_each_layer_of_a_model_takes_the_names_it_has():
    from actmem import MOE_PRESETS, PRESETS, training_memory
    from actmem.layer.recompute_modules import for_layer
    assert for_layer(("core_attn", "mlp", "moe_act"), "selective", True, True) == \
        ("core_attn", "moe_act")
    assert for_layer(("core_attn", "mlp", "moe_act"), "selective", False, True) == \
        ("core_attn", "mlp")
    assert for_layer(("mlp",), "none", False, False) is None
    mixtral = MOE_PRESETS["mixtral-8x7b"]
    with pytest.raises(ValueError, match="every layer of this model is an MoE layer"):
        training_memory(mixtral, t=2, sequence_parallel=True, recompute="selective",
                        recompute_modules=["mlp"])
    layer = PRESETS["llama2-7b"].layer(1, False, "selective", recompute_modules=["mlp"])
    assert layer.recompute_modules == ("mlp",)


@pytest.mark.parametrize("mods", [("moe_act",), ("moe",), ("core_attn", "shared_experts")])
def test_measured_moe_rows_match_the_ledger_to_the_byte(mods):
    pytest.importorskip("torch")
    from actmem.measure.compare import compare
    from actmem.measure.recompute_modules import gradients_match, measure_recompute_moe
    c = LayerConfig(64, 2, 32, 4, recompute_modules=mods,
                    **dict(MOE, moe_ffn_hidden_size=48))
    result = compare(measure_recompute_moe(c))
    assert [r.key for r in result.rows if not r.exact] == []
    freed = {e.storage.key for e in result.extras if e.storage.key}
    assert freed == ({"expert_fc2_input"} if "moe_act" in mods else set())   # 0 bytes each
    assert gradients_match(c)

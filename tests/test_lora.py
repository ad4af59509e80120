"""LoRA and frozen weights (issue 23 item 4): rows, parameters, checks."""

import pytest

from actmem import LayerConfig, activation_memory
from actmem.layer.lora import LORA_TARGETS, adapters, lora_parameters

LLAMA = dict(s=4096, b=1, h=4096, a=32, activation="swiglu", ffn_hidden_size=11008,
             flash_attention=True, dropout=False)
"""LLaMA-2-7B's layer (Touvron et al. 2023) at s = 4096, b = 1."""


def _rows(**kw):
    return {r.key: r for r in activation_memory(**kw).rows}


def test_q_v_adapters_drop_the_frozen_inputs_and_add_rank_r_outputs():
    base = _rows(**LLAMA)
    lora = _rows(**LLAMA, lora_rank=16, lora_targets=("q_proj", "v_proj"))
    sbh, sbf, sbr = 4096 * 4096, 4096 * 11008, 4096 * 16
    assert set(base) - set(lora) == {"fc1_input", "fc2_input"}
    assert set(lora) - set(base) == {"lora_linear_q_a_output", "lora_linear_v_a_output"}
    assert lora["qkv_input"].bytes == 2 * sbh  # A reads it: one storage for both adapters
    assert lora["proj_input"].bytes == 2 * sbh  # FlashAttention's backward keeps O
    assert lora["proj_input"].needed_for.startswith("FlashAttention backward")
    assert lora["lora_linear_q_a_output"].bytes == 2 * sbr
    total = activation_memory(**LLAMA, lora_rank=16, lora_targets=("q_proj", "v_proj")).total
    assert activation_memory(**LLAMA).total - total == 2 * sbh + 2 * sbf - 2 * 2 * sbr


def test_without_flash_attention_the_frozen_projection_keeps_no_input():
    rows = _rows(s=64, b=2, h=64, a=4, lora_rank=4, lora_targets=("linear_fc1",))
    assert "proj_input" not in rows and "fc2_input" not in rows and "qkv_input" not in rows
    assert rows["fc1_input"].needed_for.startswith("weight gradient of the LoRA")
    assert rows["lora_linear_fc1_a_output"].bytes == 2 * 64 * 2 * 4


def test_fused_and_canonical_names_make_one_or_several_adapters():
    c = LayerConfig(64, 1, 64, 4, kv_heads=2, activation="swiglu", ffn_hidden_size=128,
                    lora_rank=8, lora_targets=("linear_qkv", "linear_fc1"))
    assert [(a.name, a.in_features, a.out_features) for a in adapters(c)] == [
        ("linear_qkv", 64, 64 + 2 * 32), ("linear_fc1", 64, 2 * 128)]
    split = LayerConfig(64, 1, 64, 4, kv_heads=2, activation="swiglu", ffn_hidden_size=128,
                        lora_rank=8, lora_targets=("k_proj", "up_proj", "down_proj"))
    assert [(a.name, a.out_features) for a in adapters(split)] == [
        ("linear_k", 32), ("linear_fc1_up", 128), ("linear_fc2", 64)]
    assert lora_parameters(split) == 8 * ((64 + 32) + (64 + 128) + (128 + 64))


def test_llama2_7b_q_v_rank_16_has_peft_trainable_count():
    # PEFT's print_trainable_parameters for LLaMA-2-7B, q_proj and v_proj: 4,194,304
    # at r=8 (its README), so 8,388,608 at r=16: 32 layers x 2 adapters x r(h + h)
    c = LayerConfig(**LLAMA, lora_rank=16, lora_targets=("q_proj", "v_proj"))
    assert 32 * lora_parameters(c) == 8_388_608
    assert 32 * lora_parameters(LayerConfig(**{**LLAMA, "lora_rank": 8},
                                            lora_targets=("q_proj", "v_proj"))) == 4_194_304
    c2 = LayerConfig(**{**LLAMA, "t": 2}, lora_rank=16, lora_targets=("q_proj", "v_proj"))
    assert lora_parameters(c2) * 2 == lora_parameters(c)


def test_sequence_parallel_column_adapters_keep_the_gathered_input():
    kw = dict(s=64, b=2, h=64, a=4, t=2, sequence_parallel=True, lora_rank=4)
    rows = _rows(**kw, lora_targets=("linear_qkv", "linear_proj"))
    assert rows["qkv_input"].ranks == 1 and rows["qkv_input"].bytes == 2 * 64 * 2 * 64
    assert "all-gathered" in rows["qkv_input"].name
    assert rows["proj_input"].bytes == 2 * 64 * 2 * 64 // 2  # head-split, as the base's
    assert rows["lora_linear_qkv_a_output"].bytes == 2 * 64 * 2 * 4  # whole on each rank
    assert rows["attn_norm_input"].bytes == 2 * 64 * 2 * 64 // 2  # still sequence-split


def test_full_recomputation_keeps_only_the_layer_input():
    kw = dict(s=64, b=2, h=64, a=4, recompute="full")
    assert activation_memory(**kw, lora_rank=4, lora_targets=("q_proj",)).rows == \
        activation_memory(**kw).rows


def test_defaults_leave_the_paper_unchanged():
    assert LayerConfig(64, 1, 64, 4).lora_targets == ()
    assert activation_memory(2048, 1, 4096, 32, t=8).total // 2**20 == 184


@pytest.mark.parametrize("kw, message", [
    (dict(lora_rank=4), "needs lora_targets"),
    (dict(lora_targets=("q_proj",)), "without lora_rank"),
    (dict(lora_rank=4, lora_targets=("query",)), "'query', which this layer lacks"),
    (dict(lora_rank=4, lora_targets=("gate_proj",)), "'gelu' MLP has no gate"),
    (dict(lora_rank=4, lora_targets=("linear_qkv", "linear_q")), "mixes 'linear_qkv'"),
    (dict(lora_rank=4, lora_targets=("q_proj", "linear_q")), "twice: linear_q, q_proj"),
    (dict(lora_rank=6, t=4, lora_targets=("q_proj",)), "t=4 must divide lora_rank=6"),
    (dict(lora_rank=0, lora_targets=("q_proj",)), "lora_rank"),
    (dict(lora_rank=4, num_experts=4, activation="swiglu", lora_targets=("q_proj",)),
     "dense layers"),
])
def test_invalid_lora_names_the_argument(kw, message):
    with pytest.raises(ValueError, match=message):
        LayerConfig(64, 1, 64, 4, **kw)


def test_targets_must_be_a_list_of_names():
    with pytest.raises(TypeError, match="lora_targets must be a list or tuple"):
        LayerConfig(64, 1, 64, 4, lora_rank=4, lora_targets="q_proj")
    assert LayerConfig(64, 1, 64, 4, lora_rank=4, lora_targets=["q_proj"]).lora_targets == \
        ("q_proj",)
    assert "linear_fc1_gate" in LORA_TARGETS and "o_proj" in LORA_TARGETS


def _llama_lora(**kw):
    from actmem import PRESETS
    return PRESETS["llama2-7b"].with_(lora_rank=16, lora_targets=["q_proj", "v_proj"], **kw)


def test_model_states_freeze_the_base_and_train_the_adapters():
    from actmem import model_states, parameter_count
    model = _llama_lora()
    base, adapters = parameter_count(model), 8_388_608
    # PEFT for LLaMA-2-7B at r=8 prints "all params: 6,742,609,920": the base plus 4,194,304
    assert base + adapters // 2 == 6_742_609_920
    states = model_states(model, accounting="megatron")
    assert (states.parameters, states.frozen_parameters) == (base + adapters, base)
    assert states.weights == 2 * (base + adapters)  # bf16, frozen or not
    assert (states.gradients, states.optimizer) == (4 * adapters, 12 * adapters)
    sharded = model_states(model, accounting="megatron", d=8, distributed_optimizer=True)
    assert sharded.optimizer == 12 * adapters // 8 and sharded.gradients == 4 * adapters
    zero3 = model_states(model, accounting="zero", zero_stage=3, d=8)
    assert zero3.weights == -(-2 * base // 8) + 2 * adapters // 8
    assert zero3.gradients == 2 * adapters // 8 and zero3.optimizer == 12 * adapters // 8
    split = model_states(model, t=2, p=2, accounting="megatron", stage=0)
    assert split.gradients == 4 * adapters // 4  # 16 of 32 layers, half of each adapter


def test_training_memory_of_a_lora_run():
    from actmem import PRESETS, training_memory
    lora = training_memory(_llama_lora(), gpu_memory="H100 80GB SXM").most_loaded
    full = training_memory(PRESETS["llama2-7b"], gpu_memory="H100 80GB SXM").most_loaded
    sbh, sbf, sbr = 4096 * 4096, 4096 * 11008, 4096 * 16
    assert full.layer_activations - lora.layer_activations == \
        32 * (2 * sbh + 2 * sbf - 2 * 2 * sbr)
    assert (lora.gradients, lora.optimizer) == (4 * 8_388_608, 12 * 8_388_608)
    assert lora.peak < full.peak
    with pytest.raises(ValueError, match="precision='fp32' does not model lora_rank=16"):
        training_memory(_llama_lora(), precision="fp32")


def test_model_config_refuses_names_the_model_lacks():
    from actmem import PRESETS
    with pytest.raises(ValueError, match="'gelu' MLP has no gate"):
        PRESETS["gpt3-175b"].with_(lora_rank=8, lora_targets=("gate_proj",))
    with pytest.raises(ValueError, match="dense layers"):
        PRESETS["llama2-7b"].with_(num_experts=8, bias=False, lora_rank=8,
                                   lora_targets=("q_proj",))


def test_a_frozen_fc2_makes_no_weight_gradient_in_the_timeline():
    from actmem import PRESETS, training_memory

    def mlp_transient(model, buffer):
        events = training_memory(model, gradient_buffer=buffer).stages[0].timeline.events
        return next(e.by_category["transient"] for e in events if "MLP" in e.label)
    llama = PRESETS["llama2-7b"]
    # full training without Megatron's fusion: fc2's weight gradient, 2fh bytes, is a tensor
    assert mlp_transient(llama, "backward") - mlp_transient(llama, "persistent") == \
        2 * 11008 * 4096
    assert mlp_transient(_llama_lora(), "backward") == mlp_transient(_llama_lora(), "persistent")


def test_zero_bubble_w_step_reads_the_adapters_rows_only():
    from actmem.run.schedule.split_backward import weight_gradient_rows
    m = activation_memory(**LLAMA, lora_rank=16, lora_targets=("q_proj", "v_proj"))
    assert [r.key for r in weight_gradient_rows(m)] == [
        "qkv_input", "lora_linear_q_a_output", "lora_linear_v_a_output"]


def test_adapters_follow_the_head_width():
    c = LayerConfig(64, 1, 64, 4, kv_heads=2, kv_channels=32, lora_rank=4,
                    lora_targets=("linear_qkv", "linear_proj"))
    assert [(a.name, a.in_features, a.out_features) for a in adapters(c)] == [
        ("linear_qkv", 64, 4 * 32 + 2 * 2 * 32), ("linear_proj", 4 * 32, 64)]

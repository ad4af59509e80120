"""ModelConfig.from_hf_config (issue 43): a Hugging Face config.json as a
model. The files in tests/hf_configs/ are the checkpoints' config.json as
published on the Hugging Face Hub (transcribed, keys unchanged); each must
give the preset of the same model, whose shape and parameter count come
from its paper or card (actmem/run/job/presets.py), field for field."""

import json
from pathlib import Path

import pytest

import actmem
from actmem import MOE_PRESETS, PRESETS, ModelConfig
from actmem.run.job.hf_config import NEUTRAL

CONFIGS = Path(__file__).parent / "hf_configs"
PUBLISHED = {**PRESETS, **MOE_PRESETS}
AUX = {"mixtral-8x7b": 0.02, "qwen3-30b-a3b": 0.001, "deepseek-v3": 0.001,
       "deepseek-v2-lite": 0.001}   # the router's load-balancing coefficient each trained with
BALANCING = {"deepseek-v3": "seq_aux_loss", "deepseek-v2-lite": "seq_aux_loss"}  # seq_aux
TABLE = {"gpt2-large": 1024}   # n_positions: the learned table's rows (the preset: s's)


@pytest.mark.parametrize("name", sorted(p.stem for p in CONFIGS.glob("*.json")))
def test_each_config_gives_its_published_model(name):
    preset = PUBLISHED[name]
    model = ModelConfig.from_hf_config(CONFIGS / f"{name}.json", s=preset.s, b=preset.b,
                                       flash_attention=preset.flash_attention)
    assert model == preset.with_(
        source=model.source, moe_aux_loss_coeff=AUX.get(name, 0.0),
        moe_router_load_balancing_type=BALANCING.get(name, "aux_loss"),
        max_positions=TABLE.get(name))
    assert actmem.parameter_count(model) == actmem.parameter_count(preset)
    assert model.source.startswith(f"{name}.json (Hugging Face config.json, ")


def test_a_dict_is_read_as_the_file_and_the_run_sets_s_and_b():
    config = json.loads((CONFIGS / "llama3-8b.json").read_text())
    model = ModelConfig.from_hf_config(config, s=131072, b=2, source="Meta's card")
    assert (model.s, model.b, model.kv_heads, model.source) == (131072, 2, 8, "Meta's card")
    assert actmem.training_memory(model, t=8, cp=4, sequence_parallel=True).stages[0].peak > 0


def test_each_gate_becomes_megatrons_router():
    """DeepSeek-V3's noaux_tc gate: the sigmoid, an expert bias, 4 of 8 groups;
    DeepSeek-V2-Lite's greedy gate without renormalisation: the softmax before
    top-k; Qwen3's renormalised top-k and Mixtral's: the softmax after it."""
    v3 = ModelConfig.from_hf_config(CONFIGS / "deepseek-v3.json", s=4096, b=1)
    lite = ModelConfig.from_hf_config(CONFIGS / "deepseek-v2-lite.json", s=4096, b=1)
    qwen = ModelConfig.from_hf_config(CONFIGS / "qwen3-30b-a3b.json", s=4096, b=1)
    assert (v3.moe_router_score_function, v3.moe_router_enable_expert_bias,
            v3.moe_router_num_groups, v3.moe_router_group_topk,
            v3.moe_router_pre_softmax) == ("sigmoid", True, 8, 4, False)
    assert (lite.moe_router_score_function, lite.moe_router_pre_softmax,
            lite.moe_router_group_topk) == ("softmax", True, None)
    assert not qwen.moe_router_pre_softmax


def test_deepseek_v2s_gate_is_groups_without_bias_and_the_softmax_before_top_k():
    config = {**json.loads((CONFIGS / "deepseek-v3.json").read_text()),
              "topk_method": "group_limited_greedy", "scoring_func": "softmax",
              "norm_topk_prob": False}
    model = ModelConfig.from_hf_config(config, s=4096, b=1)
    assert (model.moe_router_group_topk, model.moe_router_enable_expert_bias,
            model.moe_router_pre_softmax) == (4, False, True)


@pytest.mark.parametrize("change, message", [
    ({"topk_method": "sorted"}, r"topk_method='sorted' is not modelled; actmem reads greedy"),
    ({"norm_topk_prob": False}, r"scoring_func='sigmoid' with norm_topk_prob=False"),
])
def test_deepseek_gates_not_modelled_are_refused_by_name(change, message):
    config = {**json.loads((CONFIGS / "deepseek-v3.json").read_text()), **change}
    with pytest.raises(ValueError, match=message):
        ModelConfig.from_hf_config(config, s=4096, b=1)


@pytest.mark.parametrize("change, message", [
    ({"model_type": "qwen2"}, r"model_type='qwen2' is not modelled; actmem reads gpt2, llama"),
    ({"model_type": "falcon"}, r"model_type='falcon' is not modelled"),
    ({"hidden_act": "gelu"}, r"hidden_act='gelu': the rotary families' MLP is SwiGLU"),
    ({"attention_bias": True}, r"attention_bias=True: biases on some linears only"),
    ({"attention_dropout": 0.1}, r"attention_dropout=0.1: dropout in the attention alone"),
    ({"some_new_key": 3}, r"some_new_key=3 not modelled for model_type='llama': actmem reads"),
    ({"num_attention_heads": 30}, r"must divide|must be"),
])
def test_what_is_not_modelled_is_refused_by_name(change, message):
    config = {**json.loads((CONFIGS / "llama2-7b.json").read_text()), **change}
    with pytest.raises(ValueError, match=message):
        ModelConfig.from_hf_config(config, s=4096, b=1)


def test_bad_files_and_objects_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"config='.*missing.json' is not a readable config.json"):
        ModelConfig.from_hf_config(tmp_path / "missing.json", s=4096, b=1)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="is not a readable config.json"):
        ModelConfig.from_hf_config(tmp_path / "bad.json", s=4096, b=1)
    with pytest.raises(TypeError, match="config must be a path to a config.json or its dict"):
        ModelConfig.from_hf_config(42, s=4096, b=1)
    with pytest.raises(ValueError, match="s must be a positive integer"):
        ModelConfig.from_hf_config(CONFIGS / "llama2-7b.json", s=0, b=1)


def test_every_memory_neutral_key_says_why():
    assert all(len(why) > 30 for why in NEUTRAL.values())

"""Issue 39, the fourth round of generated inputs: the kinds about MoE options,
head widths and model-states options (8, 9, 15, 17, 18, 19). Each test covers
its kind over several inputs."""

import numpy as np
import pytest

from actmem import (MOE_PRESETS, PRESETS, LayerConfig, activation_memory, model_states,
                    parameter_count, training_memory)

P = PRESETS["llama2-7b"]
MIXTRAL = MOE_PRESETS["mixtral-8x7b"]
DENSE = [P, PRESETS["gpt2-large"], PRESETS["llama3-8b"]]
S, B, H, A = 512, 2, 1024, 16   # a small layer for LayerConfig


def peak(model, **options):
    return training_memory(model, **options).most_loaded.peak


# Kind 8: an MoE field on a model without experts is refused, naming it and its value.
@pytest.mark.parametrize("model", DENSE)
@pytest.mark.parametrize("field, value, default", [
    ("moe_router_topk", 3, "2"), ("moe_router_topk", 4, "2"),
    ("moe_router_score_function", "sigmoid", "'softmax'"),
    ("moe_router_pre_softmax", True, "False"),
    ("moe_router_num_groups", 4, "None"), ("moe_router_enable_expert_bias", True, "False"),
    ("moe_ffn_hidden_size", 1408, "None"), ("moe_shared_expert_intermediate_size", 2816, "None"),
    ("moe_expert_capacity_factor", 1.0, "None"), ("moe_expert_capacity_factor", 0.5, "None"),
    ("moe_pad_expert_input_to_capacity", True, "False"), ("moe_aux_loss_coeff", 0.01, "0.0"),
    ("moe_layer_freq", 2, "1"), ("moe_layer_freq", (1, 0) * 16, "1"),
])
def test_moe_fields_without_experts_are_refused(model, field, value, default):
    if isinstance(value, tuple):
        value = value[:1] * model.L
    with pytest.raises(ValueError) as error:
        model.with_(**{field: value})
    assert str(error.value).startswith(f"{field}={value!r} needs num_experts")
    assert f"keeps its default, {default}" in str(error.value)
    if field != "moe_layer_freq":   # the same value is taken with experts
        needs = {"moe_pad_expert_input_to_capacity": {"moe_expert_capacity_factor": 1.0},
                 "moe_router_enable_expert_bias": {"moe_router_score_function": "sigmoid"}}
        assert getattr(MIXTRAL.with_(**{field: value}, **needs.get(field, {})), field) == value


def test_moe_fields_at_their_defaults_stay_accepted_without_experts():
    model = P.with_(moe_router_topk=2, moe_aux_loss_coeff=0, moe_layer_freq=1,
                    moe_expert_capacity_factor=None)
    assert model == P and peak(model.with_(L=2)) == peak(P.with_(L=2))


# Kind 9: each MoE option's type and range is checked before the dense-model rule.
@pytest.mark.parametrize("value, error", [
    (0, ValueError), (-1, ValueError), (1.0, TypeError), ("2", TypeError), (True, TypeError),
    (np.float64(2.0), TypeError),
])
@pytest.mark.parametrize("call", [
    lambda v: model_states(P, etp=v),
    lambda v: model_states(10**9, etp=v),
    lambda v: training_memory(P.with_(L=2), etp=v),
    lambda v: P.layer(etp=v, moe=False),
])
def test_etp_on_a_dense_model_names_its_own_invalid_value(call, value, error):
    with pytest.raises(error, match=r"^etp must be a positive integer"):
        call(value)


@pytest.mark.parametrize("field, value, error, message", [
    ("moe_router_topk", 2.0, TypeError, "must be a positive integer"),
    ("moe_router_topk", 0, ValueError, "must be a positive integer"),
    ("moe_router_topk", True, TypeError, "must be a positive integer"),
    ("moe_router_topk", "2", TypeError, "must be a positive integer"),
    ("moe_ffn_hidden_size", 0, ValueError, "must be a positive integer"),
    ("moe_shared_expert_intermediate_size", 64.0, TypeError, "must be a positive integer"),
    ("moe_expert_capacity_factor", 0, ValueError, r"must be None \(dropless\) or a finite"),
    ("moe_aux_loss_coeff", -0.5, ValueError, "must be a finite number >= 0"),
    ("moe_pad_expert_input_to_capacity", 1, TypeError, "must be True or False"),
    ("moe_layer_freq", 0, ValueError, "must be a positive int or a tuple of L=32"),
    ("moe_layer_freq", "x", TypeError, "must be a positive int or a tuple of L=32"),
])
def test_moe_options_of_a_dense_model_are_checked_for_type_first(field, value, error, message):
    with pytest.raises(error, match=field + "(=.*)? " + message):
        P.with_(**{field: value})
    if field != "moe_layer_freq":   # a LayerConfig without experts: the same rule
        with pytest.raises(error, match=field + "(=.*)? " + message):
            LayerConfig(S, B, H, A, **{field: value})


def test_valid_expert_sizes_on_a_dense_model_are_still_refused():
    with pytest.raises(ValueError, match=r"ep=1, etp=2: expert parallelism needs an MoE"):
        model_states(P, etp=2)
    with pytest.raises(ValueError, match=r"etp=2 is for MoE layers"):
        P.layer(etp=2, moe=False)


# Kind 15: kv_channels = h/a is the default width, the same as None everywhere.
P2 = P.with_(L=2)


@pytest.mark.parametrize("model, options", [
    (P2, {}), (P2, dict(precision="fp32")), (P2, dict(precision="autocast")),
    (P2, dict(cp=2)), (P2.with_(tied_embeddings=False),
                       dict(use_torch_fsdp2=True, gradient_buffer="backward")),
    (PRESETS["gpt2-large"].with_(L=2), dict(precision="fp32")),
    (PRESETS["llama2-70b"].with_(L=2), dict(t=8, sequence_parallel=True)),
    (MOE_PRESETS["deepseek-v2-lite"].with_(L=2, moe_layer_freq=(0, 1)), {}),
    (MIXTRAL.with_(L=2), dict(t=2, sequence_parallel=True)),
])
def test_kv_channels_equal_to_h_over_a_is_the_default(model, options):
    wide = model.with_(kv_channels=model.h // model.a)
    assert wide.kv_channels is None and wide == model
    assert peak(wide, **options) == peak(model, **options)
    assert parameter_count(wide) == parameter_count(model)


def test_kv_channels_equal_to_h_over_a_in_a_layer():
    for options in ({}, dict(multi_latent_attention=True), dict(cp=2, flash_attention=True)):
        wide = LayerConfig(S, B, H, A, kv_channels=H // A, **options)
        assert wide == LayerConfig(S, B, H, A, **options)
    assert (activation_memory(S, B, H, A, kv_channels=H // A).total
            == activation_memory(S, B, H, A).total)
    with pytest.raises(ValueError, match=r"kv_channels=128 \(not h/a=64\) with cp=2"):
        LayerConfig(S, B, H, A, kv_channels=128, cp=2, flash_attention=True)
    with pytest.raises(ValueError, match=r"precision='fp32' does not model kv_channels=64"):
        training_memory(P.with_(L=2, kv_channels=64), precision="fp32")
    with pytest.raises(TypeError, match=r"kv_channels must be a positive integer, got 128.0"):
        P.with_(kv_channels=128.0)


# Kind 17: NumPy floats of any width are the float they hold.
@pytest.mark.parametrize("kind", [np.float16, np.float32, np.float64, np.longdouble])
@pytest.mark.parametrize("field, value", [
    ("moe_expert_capacity_factor", 1.25), ("moe_expert_capacity_factor", 0.5),
    ("moe_aux_loss_coeff", 0.01), ("moe_aux_loss_coeff", 2.0),
])
def test_numpy_floats_are_taken_for_the_moe_float_fields(kind, field, value):
    model = MIXTRAL.with_(L=2, **{field: kind(value)})
    stored = getattr(model, field)
    assert type(stored) is float and stored == float(kind(value))
    assert model == MIXTRAL.with_(L=2, **{field: float(kind(value))})
    assert peak(model) == peak(MIXTRAL.with_(L=2, **{field: float(kind(value))}))
    layer = LayerConfig(S, B, H, A, num_experts=4, activation="swiglu", **{field: kind(value)})
    assert type(getattr(layer, field)) is float


@pytest.mark.parametrize("field", ["moe_expert_capacity_factor", "moe_aux_loss_coeff"])
@pytest.mark.parametrize("value", [np.array([1.5]), np.array(1.5), np.bool_(True), True,
                                   np.float32("nan"), np.float64("inf"), float("nan"),
                                   np.complex64(1), "1.5"])
def test_numpy_arrays_bools_and_non_finite_floats_are_refused(field, value):
    with pytest.raises(ValueError, match=f"^{field} must be .*finite number"):
        MIXTRAL.with_(**{field: value})


# Kind 18: every wrong model_states option is named, with what is allowed.
@pytest.mark.parametrize("value", ["x", 3, ["x"], [1.5, 30.5], {0: 32}, np.array([16, 16]),
                                   [True, 31], b"xy"])
def test_moe_layers_of_the_wrong_type_are_named(value):
    with pytest.raises(TypeError, match=r"^moe_layers must be None or a list of p=\d ints"):
        model_states(MIXTRAL, p=2, moe_layers=value)


def test_moe_layers_out_of_range_say_what_each_stage_takes():
    with pytest.raises(ValueError, match=r"moe_layers=\[20, 20\] must give each of the 2 "
                                         r"stages at most its layers \[16, 16\], 32 MoE"):
        model_states(MIXTRAL, p=2, moe_layers=[20, 20])
    with pytest.raises(ValueError, match=r"moe_layers=\[1\]: a bare parameter count"):
        model_states(10**9, moe_layers=[1])
    assert (model_states(MIXTRAL, p=2, moe_layers=(np.int64(16), 16))
            == model_states(MIXTRAL, p=2, moe_layers=(16, 16)))


@pytest.mark.parametrize("model", [P, MIXTRAL, 10**9])
@pytest.mark.parametrize("option", ["t", "p", "d", "optimizer", "accounting", "zero_stage",
                                    "distributed_optimizer", "stage", "stage_layers", "ep",
                                    "etp", "cp", "moe_layers", "fp8"])
def test_every_wrong_model_states_option_is_named(model, option):
    for value in ["x", 2.5, [1], {}, np.array([1, 2]), b"x", 1 + 2j, 10**5000, -1]:
        with pytest.raises((TypeError, ValueError)) as error:
            model_states(model, **{option: value})
        text = str(error.value)
        assert option in text and ("must" in text or "takes" in text or "needs" in text), text


# Kind 19: duplicate names and MoE names on a dense layer list what is allowed.
DENSE_NAMES = ("core_attn", "layernorm", "mlp")
MOE_NAMES = ("core_attn", "layernorm", "moe_act", "moe")


@pytest.mark.parametrize("call, allowed", [
    (lambda: training_memory(P.with_(L=2), recompute="selective",
                             recompute_modules=["core_attn", "core_attn"]), DENSE_NAMES),
    (lambda: training_memory(P.with_(L=2), recompute="selective",
                             recompute_modules=["mlp", "layernorm", "mlp"]), DENSE_NAMES),
    (lambda: training_memory(MIXTRAL.with_(L=2), t=2, sequence_parallel=True,
                             recompute="selective", recompute_modules=["moe", "moe"]), MOE_NAMES),
    (lambda: LayerConfig(S, B, H, A, recompute="selective", recompute_modules=("layernorm",) * 3),
     DENSE_NAMES),
    (lambda: training_memory(P.with_(L=2), recompute="selective", recompute_modules=["moe"]),
     DENSE_NAMES),
    (lambda: LayerConfig(S, B, H, A, recompute="selective",
                         recompute_modules=["moe_act", "core_attn"]), DENSE_NAMES),
    (lambda: training_memory(MIXTRAL.with_(L=2), recompute="selective",
                             recompute_modules=["mlp"]), MOE_NAMES),
    (lambda: LayerConfig(S, B, H, A, num_experts=4, activation="swiglu", recompute="selective",
                         recompute_modules=["mlp"]), MOE_NAMES),
    (lambda: P.with_(lora_rank=8, lora_targets=("q_proj", "linear_q")),
     ("linear_qkv", "linear_proj", "q_proj", "v_proj")),
    (lambda: P.with_(lora_rank=8, lora_targets=("v_proj", "v_proj")),
     ("linear_qkv", "linear_fc1", "q_proj", "down_proj")),
    (lambda: LayerConfig(S, B, H, A, num_experts=4, activation="swiglu", lora_rank=8,
                         lora_targets=("q_proj",)), ("num_experts=4", "num_experts=None", "cp=1")),
    (lambda: P.layer(moe=True), ("moe=False", "moe=None")),
])
def test_duplicate_and_moe_on_dense_messages_list_what_is_allowed(call, allowed):
    with pytest.raises(ValueError) as error:
        call()
    for name in allowed:
        assert name in str(error.value), str(error.value)

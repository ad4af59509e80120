"""actmem.memo: results kept by their arguments as printed (issue 19)."""

import warnings

import numpy as np
import pytest

from actmem import MOE_PRESETS, PRESETS
from actmem.memo import kept_by_repr, warns_at_t1
from actmem.layer.context_parallel import rank_model
from actmem.run.moments.moe_timeline import dense_twin
from actmem.run.moments.precision import precision_moments


def counted():
    calls = []

    @kept_by_repr(2)
    def double(x):
        calls.append(x)
        if x < 0:
            raise ValueError(f"x={x} must be >= 0")
        return (2 * x,)
    return double, calls


def test_a_result_is_kept_and_given_back_without_a_call():
    double, calls = counted()
    assert double(3) is double(3)
    assert calls == [3]


def test_equal_values_printed_differently_are_different_keys():
    double, calls = counted()
    assert double(1) == double(True) == double(1.0) == (2,)
    assert calls == [1, True, 1.0]  # True == 1 == 1.0, yet each is its own call


def test_only_the_newest_maxsize_are_kept():
    double, calls = counted()
    for x in (1, 2, 1, 3, 2, 1):
        double(x)
    # 1 was used again, so 3 drops 2; then 2 drops 1, which is called again
    assert calls == [1, 2, 3, 2, 1]


def test_a_call_that_raises_raises_again():
    double, calls = counted()
    for _ in range(2):
        with pytest.raises(ValueError, match="x=-1"):
            double(-1)
    assert calls == [-1, -1]


def test_arguments_too_long_to_print_reach_the_function():
    double, calls = counted()
    huge = 10**5000
    assert double(huge) == (2 * huge,)
    assert double(huge) == (2 * huge,)
    assert len(calls) == 2


def test_a_layer_refused_for_a_bool_t_after_the_same_layer_at_t_1():
    model = PRESETS["llama2-7b"]
    assert model.layer(1).t == 1
    with pytest.raises(TypeError, match="t must be a positive integer, got True"):
        model.layer(True)


def test_the_same_layer_twice_is_one_object():
    model = PRESETS["llama2-7b"]
    assert model.layer(2, False, "selective") is model.layer(2, False, "selective")


def test_a_rank_model_and_a_dense_twin_are_kept():
    model = MOE_PRESETS["mixtral-8x7b"]
    assert rank_model(model, 2, True, "none", 2) is rank_model(model, 2, True, "none", 2)
    assert rank_model(model, 2, True, "none", 2).s == model.s // 2
    assert dense_twin(model) is dense_twin(model)
    assert dense_twin(model).num_experts is None


def test_a_rank_model_refused_for_a_bool_cp_after_cp_2():
    model = PRESETS["llama2-7b"]
    rank_model(model, 2, False, "none", 2)
    with pytest.raises(TypeError, match="cp must be a positive integer, got True"):
        rank_model(model, 2, False, "none", True)


@pytest.mark.parametrize("ask", [
    lambda model: model.layer(1, True),
    lambda model: precision_moments(model, 1, True, "none", 1, "bf16"),
    lambda model: rank_model(model, 1, True, "none", 2),
])
def test_sequence_parallelism_at_t_1_warns_each_time(ask):
    model = PRESETS["llama2-7b"]
    for _ in range(2):
        with pytest.warns(UserWarning, match="does nothing at t=1"):
            ask(model)


def test_warns_at_t1_reads_t_and_sequence_parallel():
    model = PRESETS["llama2-7b"]
    assert warns_at_t1(model, 1, True)
    assert not warns_at_t1(model, 2, True)
    assert not warns_at_t1(model, 1, False)
    assert warns_at_t1(model, np.int64(1), True)  # as the layer reads it
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an array t is judged without a warning or an error
        assert not warns_at_t1(model, np.array([1, 1]), True)


def test_a_model_prints_as_its_dataclass_would_once_for_all():
    """ModelConfig's repr (the key kept_by_repr prints) is the dataclass's,
    made once: every field, a copy printing its own change."""
    import dataclasses
    model = PRESETS["gpt3-175b"]
    text = repr(model)
    assert text.startswith("ModelConfig(s=2048, b=1, h=12288, a=96, L=96, ")
    assert text.count("=") == len(dataclasses.fields(model))
    assert repr(model) is text   # printed once
    longer = model.with_(s=4096)
    assert repr(longer) == text.replace("ModelConfig(s=2048,", "ModelConfig(s=4096,", 1)
    assert longer != model and longer.with_(s=2048) == model

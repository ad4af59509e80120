"""Bad input: a clear error that names the argument, its value and what is allowed."""

from fractions import Fraction

import pytest
from hypothesis import given, strategies as st

import actmem
from actmem import (activation_memory, common_divisors, model_activation_memory,
                    pipeline_stage_memory)

GOOD = dict(s=2048, b=1, h=4096, a=32, t=1)


@pytest.mark.parametrize("name", ["s", "b", "h", "a", "t"])
@pytest.mark.parametrize("value", [0, -4])
def test_non_positive_sizes_name_the_argument(name, value):
    with pytest.raises(ValueError, match=rf"^{name} must be a positive integer.*got {value}"):
        activation_memory(**{**GOOD, name: value})


@pytest.mark.parametrize("name", ["s", "b", "h", "a", "t"])
@pytest.mark.parametrize("value", [2.0, "8", None, True])
def test_non_integer_sizes_name_the_argument(name, value):
    with pytest.raises(TypeError, match=rf"^{name} must be a positive integer, got {value!r}"):
        activation_memory(**{**GOOD, name: value})


def test_h_not_divisible_by_a():
    with pytest.raises(ValueError, match=r"h=4100 must be divisible by a=32"):
        activation_memory(2048, 1, 4100, 32)


def test_t_not_dividing_a_lists_valid_t():
    with pytest.raises(ValueError) as info:
        activation_memory(2048, 1, 6656, 52, t=8)
    assert str(info.value) == "t=8 must divide a=52 and h=6656; valid t: 1, 2, 4, 13, 26, 52"


def test_valid_tensor_parallel_sizes():
    assert actmem.valid_tensor_parallel_sizes(6656, 52) == [1, 2, 4, 13, 26, 52]
    assert actmem.valid_tensor_parallel_sizes(4096, 32) == [1, 2, 4, 8, 16, 32]


@pytest.mark.parametrize("call, message", [
    (lambda m: model_activation_memory(m, 0), r"^L must be a positive integer"),
    (lambda m: model_activation_memory(m, 2.5), r"^L must be a positive integer"),
    (lambda m: pipeline_stage_memory(m, 32, 3, 1), r"^p=3 must divide L=32"),
    (lambda m: pipeline_stage_memory(m, 32, 4, 0), r"^m must be a positive integer"),
    (lambda m: pipeline_stage_memory(m, 32, 0, 1), r"^p must be a positive integer"),
    (lambda m: model_activation_memory(-5, 32), r"^per_layer must be a positive integer"),
])
def test_training_estimates_validate(call, message):
    layer = activation_memory(**GOOD)
    with pytest.raises((TypeError, ValueError), match=message):
        call(layer)


def test_pipeline_stage_estimate():
    layer = activation_memory(2048, 1, 4096, 32, 8)
    assert pipeline_stage_memory(layer, L=32, p=4, m=4) == 4 * 8 * 184 * 2**20


def test_unknown_unit():
    with pytest.raises(ValueError, match=r"unit must be one of B, KiB, MiB, GiB, TiB, PiB, GB, TB, got 'mb'"):
        actmem.convert(1, "mb")


@pytest.mark.parametrize("args, error, message", [
    ((), TypeError, "common_divisors needs at least one positive integer"),
    ((4096, 0), ValueError, r"numbers\[1\] must be a positive integer \(>= 1\), got 0"),
    ((32, "8"), TypeError, r"numbers\[1\] must be a positive integer, got '8'"),
])
def test_common_divisors_refuses_bad_input(args, error, message):
    with pytest.raises(error, match=message):
        actmem.common_divisors(*args)


# ------------------------------------------- issue 10, items 3, 4 and 7

def test_valid_t_knows_kv_heads_and_ffn_width_like_layer_config():
    assert actmem.valid_tensor_parallel_sizes(5120, 40, ffn_hidden_size=13824) == [1, 2, 4, 8]
    assert actmem.valid_tensor_parallel_sizes(8192, 64, kv_heads=8) == [1, 2, 4, 8]
    for h, a, g, f in [(5120, 40, 40, 13824), (8192, 64, 8, 28672), (6656, 52, 4, 17920)]:
        offered = actmem.valid_tensor_parallel_sizes(h, a, kv_heads=g, ffn_hidden_size=f)
        accepted = []
        for t in range(1, a + 1):
            try:
                actmem.LayerConfig(2048, 1, h, a, t, kv_heads=g, ffn_hidden_size=f)
            except ValueError:
                continue
            accepted.append(t)
        assert offered == accepted


def test_valid_t_refuses_heads_that_do_not_divide_h():
    with pytest.raises(ValueError, match=r"^h=4096 must be divisible by a=30"):
        actmem.valid_tensor_parallel_sizes(4096, 30)
    with pytest.raises(ValueError, match=r"^a must be a positive integer \(>= 1\), got 0$"):
        actmem.valid_tensor_parallel_sizes(4096, 0)


def test_divisors_of_huge_sizes_come_from_the_gcd():
    with pytest.raises(ValueError, match=r"^t=3 must divide a=1099511627776 and "
                                         r"h=2199023255552; valid t: 1, 2, 4, 8, "):
        actmem.activation_memory(2048, 1, 2**41, 2**40, 3)
    assert common_divisors(2 * 10**7, 10**7)[-3:] == [2_500_000, 5_000_000, 10_000_000]
    assert len(common_divisors(2**40)) == 41
    assert common_divisors(2**31 - 1) == [1, 2**31 - 1]  # a prime: sqrt(n) trial divisions


# ------------------------------------------------- issue 10, items 7 and 8

def test_unknown_option_names_the_function_and_lists_the_options():
    from actmem.layer.config import STORAGE_OPTIONS
    assert STORAGE_OPTIONS[:8] == ("sequence_parallel", "recompute", "flash_attention",
                                   "kv_heads", "ffn_hidden_size", "activation", "dropout",
                                   "num_experts")
    with pytest.raises(TypeError) as refused:
        actmem.activation_memory(2048, 1, 4096, 32, flash=True)
    assert str(refused.value) == ("activation_memory() got unknown option flash; its options "
                                  "are " + ", ".join(STORAGE_OPTIONS))
    with pytest.raises(TypeError, match=r"^table2\(\) got unknown option"):
        actmem.table2(2048, 1, 4096, 32, 8, flash=True)


def test_numpy_integers_are_integers_and_arrays_are_not():
    np = pytest.importorskip("numpy")  # installed with matplotlib
    r = activation_memory(*(np.int64(x) for x in (2048, 1, 4096, 32, 8)))
    assert r.total == 184 * 2**20 and type(r.config.s) is int and type(r.total) is int
    s = actmem.simulate_schedule("1f1b", np.int64(4), np.int32(8))
    assert s.peak_in_flight(np.int64(0)) == 4 and type(s.p) is int
    run = actmem.training_memory(actmem.PRESETS["llama2-7b"], t=np.int64(2), p=np.int64(2),
                                 d=np.int64(2), m=np.int64(8))
    assert run.stages[0].total == actmem.training_memory(
        actmem.PRESETS["llama2-7b"], t=2, p=2, d=2, m=8).stages[0].total
    with pytest.raises(ValueError, match=r"^recompute must be one of 'none', 'selective', "
                                         r"'full', got array\(\['selective'\]"):
        activation_memory(2048, 1, 4096, 32, 8, recompute=np.array(["selective"]))
    with pytest.raises(TypeError, match=r"^s must be a positive integer, got array"):
        activation_memory(np.array([2048]), 1, 4096, 32, 8)
    with pytest.raises(TypeError, match=r"^t must be a positive integer, got np.True_|"
                                        r"^t must be a positive integer, got True"):
        activation_memory(2048, 1, 4096, 32, np.bool_(True))


# ------------------------------------------- issue 10, item 1: SwiGLU's width

def test_swiglu_default_width_is_megatron_lms_rule():
    # Megatron-LM arguments.py: int((4 * h * 2 / 3) / 64) * 64
    assert actmem.default_ffn_hidden_size(1280, "swiglu") == 3392
    assert actmem.default_ffn_hidden_size(4096, "swiglu") == 10880
    assert actmem.default_ffn_hidden_size(8192, "swiglu") == 21824
    assert actmem.default_ffn_hidden_size(4096) == 16384
    assert actmem.LayerConfig(2048, 1, 1280, 20, activation="swiglu").f == 3392
    assert actmem.LayerConfig(2048, 1, 1280, 20, activation="swiglu",
                              ffn_hidden_size=5120).f == 5120


@given(h=st.integers(24, 10**6))
def test_swiglu_default_width_is_exact_for_any_h(h):
    f = actmem.default_ffn_hidden_size(h, "swiglu")
    assert f % 64 == 0 and f <= Fraction(8 * h, 3) < f + 64


def test_swiglu_without_a_width_below_h_24_asks_for_one():
    with pytest.raises(ValueError, match="h=16.*pass ffn_hidden_size"):
        actmem.activation_memory(128, 1, 16, 2, activation="swiglu")
    assert actmem.activation_memory(128, 1, 16, 2, activation="swiglu",
                                    ffn_hidden_size=32).total > 0


def test_valid_t_knows_swiglus_default_width_like_layer_config():
    assert actmem.valid_tensor_parallel_sizes(1280, 20) == [1, 2, 4, 5, 10, 20]
    assert actmem.valid_tensor_parallel_sizes(1280, 20, activation="swiglu") == [1, 2, 4]
    with pytest.raises(ValueError, match="t=5 must divide .*ffn_hidden_size=3392"):
        actmem.LayerConfig(2048, 1, 1280, 20, t=5, activation="swiglu")
    for h, a in [(1280, 20), (6656, 52), (5120, 40), (2560, 20)]:
        offered = actmem.valid_tensor_parallel_sizes(h, a, activation="swiglu")
        for t in actmem.valid_tensor_parallel_sizes(h, a):
            if t in offered:
                actmem.LayerConfig(2048, 1, h, a, t, activation="swiglu")
            else:
                with pytest.raises(ValueError, match="ffn_hidden_size"):
                    actmem.LayerConfig(2048, 1, h, a, t, activation="swiglu")

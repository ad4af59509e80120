"""Kinds of bad input the run layer must refuse clearly, and odd but valid
input it must accept (issue 21): each test covers a kind, over several inputs."""

from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import actmem
from actmem import PRESETS, model_states, paper_formula, training_memory

P = PRESETS["llama2-7b"]
NOT_INTEGERS = [1.0, Decimal(1), Fraction(1), np.array([1]), np.float64(1.0), "1", True]


@pytest.mark.parametrize("value", NOT_INTEGERS)
@pytest.mark.parametrize("call, name", [
    (lambda v: model_states(P, accounting="zero", zero_stage=v), "zero_stage"),
    (lambda v: model_states(P, p=2, stage=v), "stage"),
    (lambda v: training_memory(P, logits_bytes=v), "logits_bytes"),
    (lambda v: training_memory(P, p=v), "p"),
])
def test_integer_options_refuse_other_numbers(call, name, value):
    if value is True and name == "logits_bytes":
        value = np.bool_(True)
    with pytest.raises(TypeError, match=name):
        call(value)


@pytest.mark.parametrize("kind", [np.int8, np.int16, np.int32, np.int64, np.uint32])
def test_numpy_integers_give_exact_python_ints(kind):
    # 8192 * 8192 * 8192 overflows int32: products must be taken in Python ints
    exact = paper_formula(8192, 1, 8192, 64, 8)
    if np.iinfo(kind).max >= 8192:
        assert paper_formula(kind(8192), 1, kind(8192), 64, 8) == exact
        assert type(paper_formula(kind(8192), 1, kind(8192), 64, 8)) is int
    states = model_states(P, p=kind(2), stage=kind(1), accounting="zero", zero_stage=kind(1))
    assert states == model_states(P, p=2, stage=1, accounting="zero", zero_stage=1)
    assert type(states.stage) is int


@pytest.mark.parametrize("reserve, expected", [
    (np.float64(0.05), 4 * 2**30), (np.float32(0.25), 20 * 2**30),
    (np.int64(5), 5), (np.uint8(7), 7)])
def test_numpy_reserves_are_accepted(reserve, expected):
    r = training_memory(P, reserve=reserve, gpu_memory="80GiB")
    assert r.stages[0].reserve == expected


@pytest.mark.parametrize("bad", ["llama2-7b", None, 7, actmem.LayerConfig(2048, 1, 4096, 32)])
def test_wrong_objects_name_the_argument(bad):
    for call in (training_memory, actmem.parameter_count):
        with pytest.raises(TypeError, match=r"model must be a ModelConfig \(e\.g\."):
            call(bad)
    with pytest.raises(TypeError, match="result must be an ActivationMemory"):
        actmem.coefficients(bad)


@pytest.mark.parametrize("call", [training_memory, model_states, actmem.split_layers])
@pytest.mark.parametrize("keyword", ["tp", "pp", "micro_batches", "gpu"])
def test_unknown_keywords_list_the_known_ones(call, keyword):
    args = (32, 4) if call is actmem.split_layers else (P,)
    with pytest.raises(TypeError, match=rf"unknown keyword argument {keyword}; it takes .*\bp\b"):
        call(*args, **{keyword: 2})


@pytest.mark.parametrize("name", [["llama2-7b"], None, 7, b"llama2-7b"])
def test_preset_names_are_strings(name):
    with pytest.raises(ValueError, match="preset must be one of"):
        actmem.preset(name)


def test_model_config_refuses_a_short_position_table_and_a_non_text_source():
    gpt2 = PRESETS["gpt2-large"].with_(max_positions=1024)
    with pytest.raises(ValueError, match="max_positions=1024 must be at least s=2048"):
        gpt2.with_(s=2048)
    assert gpt2.with_(s=2048, max_positions=2048).s == 2048
    assert gpt2.with_(s=2048, positions="rotary").s == 2048  # no table
    for source in (5, None, ["paper"]):
        with pytest.raises(TypeError, match="source must be a str"):
            P.with_(source=source)


@pytest.mark.parametrize("n, factors", [
    (2**61 - 1, {2**61 - 1: 1}),                       # a Mersenne prime
    ((2**31 - 1) * (2**61 - 1), {2**31 - 1: 1, 2**61 - 1: 1}),
    (2**64 - 1, {3: 1, 5: 1, 17: 1, 257: 1, 641: 1, 65537: 1, 6700417: 1}),
    (2**40 * 3**5, {2: 40, 3: 5}),
    (1, {}),
])
def test_divisors_of_huge_numbers_come_from_their_factors(n, factors):
    from actmem.validate import divisors, prime_factors
    assert prime_factors(n) == factors
    found = divisors(n)
    assert found[0] == 1 and found[-1] == n and all(n % d == 0 for d in found)
    expected_count = 1
    for power in factors.values():
        expected_count *= power + 1
    assert len(found) == expected_count == len(set(found))
    assert actmem.common_divisors(n, n) == found

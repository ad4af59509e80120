"""Property test of the public API under bad and odd input (issues 10 and
21): one argument at a time gets an integer of any size (beyond Python's
4,300 printable digits too), a float (nan, inf), a bool, a string (digits of
other scripts), None, a NumPy scalar or 0-d array, a Fraction, a Decimal or
a wrong object; every call returns a result or raises TypeError/ValueError
whose message names that argument. No deadline: speed lives in benchmarks."""

from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import actmem

ODD = st.one_of(
    st.integers(min_value=-10**30, max_value=10**30), st.integers(0, 64),
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.text(max_size=5),
    st.none(), st.integers(-5, 4096).map(np.int64), st.just(np.float64(2.0)),
    st.just(Fraction(3, 2)), st.just(np.array([8])),
    # issue 21: 0-d arrays, Decimal, other scripts' digits, beyond Python's
    # 4,300 printable digits, wrong objects
    st.integers(-2, 64).map(np.array), st.integers(-2, 64).map(Decimal),
    st.sampled_from(["٤", "８", "²", "4096", "80GB"]), st.sampled_from([10**5000, -10**5000]),
    st.sampled_from([object(), actmem.PRESETS["llama2-7b"], [2], {"t": 2}, b"2"]),
)
LAYER = dict(s=2048, b=1, h=4096, a=32, t=8)
MODEL = actmem.PRESETS["llama2-7b"]

CALLS = {
    "activation_memory": (lambda **kw: actmem.activation_memory(**{**LAYER, **kw}),
                          ["s", "b", "h", "a", "t", "kv_heads", "ffn_hidden_size",
                           "recompute", "activation", "flash_attention", "dropout",
                           "sequence_parallel"]),
    "valid_tensor_parallel_sizes": (
        lambda **kw: actmem.valid_tensor_parallel_sizes(**{"h": 4096, "a": 32, **kw}),
        ["h", "a", "s", "kv_heads", "ffn_hidden_size", "activation"]),
    "default_ffn_hidden_size": (
        lambda **kw: actmem.default_ffn_hidden_size(**{"h": 4096, "activation": "swiglu",
                                                       **kw}),
        ["h", "activation"]),
    "simulate_schedule": (
        lambda **kw: actmem.simulate_schedule(**{"schedule": "1f1b", "p": 4, "m": 8,
                                                 "v": 1, **kw}),
        ["schedule", "p", "m", "v", "order"]),
    "training_memory": (lambda **kw: actmem.training_memory(MODEL, **{"t": 2, "p": 2, **kw}),
                        ["t", "p", "d", "m", "v", "recompute_num_layers", "zero_stage",
                         "logits_bytes", "reserve", "gpu_memory", "schedule",
                         "sequence_parallel", "recompute"]),
    "model_states": (lambda **kw: actmem.model_states(MODEL, **kw),
                     ["t", "p", "d", "zero_stage", "accounting", "optimizer",
                      "distributed_optimizer"]),
    "format_bytes": (lambda **kw: actmem.format_bytes(**{"n_bytes": 2**20, **kw}),
                     ["n_bytes", "unit", "digits"]),
    "convert": (lambda **kw: actmem.convert(**{"n_bytes": 2**20, "unit": "MiB", **kw}),
                ["n_bytes", "unit"]),
    "common_divisors": (lambda **kw: actmem.common_divisors(kw["n"]), ["n"]),
}
CASES = [(fn, arg) for fn, (_, args) in CALLS.items() for arg in args]


def named(message: str, arg: str) -> bool:
    """The message names the argument (``numbers[0]`` for common_divisors,
    and ``n_bytes`` or the unit for format functions)."""
    aliases = {"n": "numbers[0]", "zero_stage": "zero_stage"}
    return aliases.get(arg, arg) in message


@pytest.mark.parametrize("fn, arg", CASES, ids=[f"{f}-{a}" for f, a in CASES])
@settings(max_examples=40, deadline=None, database=None)
@given(value=ODD)
def test_odd_input_gives_a_result_or_names_the_argument(fn, arg, value):
    call = CALLS[fn][0]
    try:
        call(**{arg: value})
    except (TypeError, ValueError) as error:
        assert named(str(error), arg), f"{fn}({arg}={value!r}): {error}"

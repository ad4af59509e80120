"""The source article's worked example (s=2048, b=1, h=4096, a=32; whole model
L=32) and the paper's Table 2 for GPT-3 175B."""

import pytest
from hypothesis import given
from strategies import layers

import actmem
from actmem import activation_memory, to_mib

MIB = 2**20
EXAMPLE = dict(s=2048, b=1, h=4096, a=32)


@pytest.mark.parametrize("t, fixed, intermediate, attention_map, total", [
    (1, 80, 192, 640, 912),
    (2, 80, 96, 320, 496),
    (4, 80, 48, 160, 288),
    (8, 80, 24, 80, 184),
])
def test_worked_example_table_in_mib(t, fixed, intermediate, attention_map, total):
    r = activation_memory(**EXAMPLE, t=t)
    assert (r.fixed, r.intermediate, r.attention_map, r.total) == (
        fixed * MIB, intermediate * MIB, attention_map * MIB, total * MIB)
    assert all(isinstance(v, int) for v in (r.fixed, r.intermediate, r.attention_map, r.total))


@pytest.mark.parametrize("t", [1, 2, 4, 8])
def test_m_of_t_is_80_plus_832_over_t(t):
    assert activation_memory(**EXAMPLE, t=t).total * t == (80 * t + 832) * MIB


def test_whole_model_5888_mib_is_5_75_gib():
    total = actmem.model_activation_memory(activation_memory(**EXAMPLE, t=8), L=32)
    assert total == 5888 * MIB
    assert actmem.to_gib(total) == 5.75
    assert actmem.format_bytes(total, "GiB") == "5.75 GiB"


def test_t4_to_t8_drop_is_36_1_percent_and_about_a_fifth():
    m1, m4, m8 = (activation_memory(**EXAMPLE, t=t).total for t in (1, 4, 8))
    assert round(100 * (m4 - m8) / m4, 1) == 36.1
    assert round(m8 / m1, 3) == 0.202  # about one fifth, not one eighth


GPT3 = dict(s=2048, b=1, h=12288, a=96)


@pytest.mark.parametrize("name, mib", [
    ("no parallelism", 2736),
    ("tensor parallel", 552),
    ("tensor + sequence parallel", 342),
    ("tensor parallel + selective recompute", 312),
    ("tensor + sequence parallel + selective recompute", 102),
    ("full recompute", 48),
])
def test_gpt3_175b_table2_per_layer(name, mib):
    assert actmem.table2(**GPT3, t=8)[name].total == mib * MIB


def test_selective_removes_about_70_percent_without_parallelism():
    full = activation_memory(**GPT3)
    selective = activation_memory(**GPT3, recompute="selective")
    assert (full.total - selective.total) * 114 == full.total * 80


@given(layers())
def test_ledger_equals_table2_row2_closed_form(layer):
    s, b, h, a, t = layer
    assert activation_memory(s, b, h, a, t).total == (
        10 * s * b * h + 24 * s * b * h // t + 5 * a * s * s * b // t)
    assert activation_memory(s, b, h, a, t).total == actmem.paper_formula(s, b, h, a, t)


@given(layers())
def test_rows_at_t1_add_to_34sbh_plus_5as2b(layer):
    s, b, h, a, _ = layer
    r = activation_memory(s, b, h, a, 1)
    assert sum(row.bytes for row in r.rows) == 34 * s * b * h + 5 * a * s * s * b
    assert (r.fixed, r.intermediate, r.attention_map) == (
        10 * s * b * h, 24 * s * b * h, 5 * a * s * s * b)


def test_to_mib_uses_2_to_the_20():
    assert to_mib(3 * MIB) == 3.0
    assert actmem.to_gb(10**9) == 1.0
    assert actmem.format_bytes(184 * MIB) == "184 MiB"
    assert actmem.format_bytes(1536, "KiB") == "1.5 KiB"


@pytest.mark.parametrize("n_bytes, unit, digits, text", [
    (10 * MIB, "MiB", 0, "10 MiB"),
    (100 * MIB, "MiB", 2, "100 MiB"),
    (4036608 * MIB, "MiB", 2, "4036608 MiB"),
    (5888 * MIB, "GiB", 2, "5.75 GiB"),
    (MIB // 3, "MiB", 3, "0.333 MiB"),
    (1, "MiB", 2, "0 MiB"),
])
def test_format_bytes_is_fixed_point_and_keeps_real_zeros(n_bytes, unit, digits, text):
    assert actmem.format_bytes(n_bytes, unit, digits) == text


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(n_bytes="1024"), TypeError, "n_bytes must be a whole number of bytes .*got '1024'"),
    (dict(n_bytes=1, unit=["MiB"]), ValueError, r"unit must be one of .*got \['MiB'\]"),
    (dict(n_bytes=1, digits=-1), ValueError, "digits must be between 0 and 20, got -1"),
    (dict(n_bytes=1, digits=10**30), ValueError, "digits must be between 0 and 20"),
    (dict(n_bytes=-5), ValueError, "n_bytes must be >= 0 bytes, got -5"),
    (dict(n_bytes=float("nan")), TypeError, "n_bytes must be a whole number of bytes"),
    (dict(n_bytes=float("inf")), TypeError, "n_bytes must be a whole number of bytes"),
    (dict(n_bytes=True), TypeError, "n_bytes must be a whole number of bytes"),
    (dict(n_bytes=1, digits=1.5), TypeError, "digits must be an integer, got 1.5"),
])
def test_format_bytes_refuses_bad_input_by_name(kwargs, error, message):
    with pytest.raises(error, match=message):
        actmem.format_bytes(**kwargs)


@pytest.mark.parametrize("n_bytes, unit, digits, text", [
    (5 * 2**20 // 2, "MiB", 0, "2"),   # 2.5 MiB: a tie rounds to the even 2
    (7 * 2**20 // 2, "MiB", 0, "4"),   # 3.5 MiB: to the even 4
    (2**20 // 8, "MiB", 2, "0.12"),    # 0.125: to 0.12
    (3 * 2**20 // 8, "MiB", 2, "0.38"),  # 0.375: to 0.38
    (2**20 // 8 + 1, "MiB", 2, "0.13"),  # just above the tie: up
    (5 * 10**8, "GB", 0, "0"), (15 * 10**8, "GB", 0, "2"),
])
def test_format_value_rounds_half_to_even(n_bytes, unit, digits, text):
    """Exact decimal rounding, ties to even, as Python's round() of the
    exact fraction (:func:`actmem.format_value`)."""
    assert actmem.format_value(n_bytes, unit, digits) == text


def test_format_value_checks_arguments_in_order():
    """With several bad arguments, the first one in the signature is named."""
    with pytest.raises(ValueError, match="n_bytes"):
        actmem.format_value(-1, "parsecs", 99)
    with pytest.raises(ValueError, match="parsecs"):
        actmem.format_value(1, "parsecs", 99)
    with pytest.raises(ValueError, match="digits must be between 0 and 20, got 99"):
        actmem.format_value(1, "MiB", 99)


def test_huge_sizes_format_exactly():
    # issue 10 item 5: no float anywhere, no OverflowError, every digit kept
    assert actmem.format_bytes(10**400, "B") == f"{10**400} B"
    assert actmem.format_value(10**400 + 2**20) == str(10**400 // 2**20 + 1)  # 2^20 | 10^400
    big = actmem.activation_memory(10**20, 1, 4096, 32, 8)
    assert big.total > big.attention_map  # the smaller terms survive the sum
    assert actmem.format_value(big.total) != actmem.format_value(big.attention_map)
    assert actmem.format_bytes(84099072 * 2**20, "TiB") == "80.2 TiB"
    assert actmem.format_bytes(2**50, "PiB") == "1 PiB"
    with pytest.raises(ValueError, match="too many for a float; format_value prints it"):
        actmem.to_mib(10**400)


def test_fractions_and_numpy_style_integers():
    from fractions import Fraction
    with pytest.raises(TypeError, match="n_bytes must be a whole number of bytes"):
        actmem.format_bytes(Fraction(3, 2))

    class Index:  # what NumPy integer scalars offer
        def __index__(self):
            return 3 * 2**20
    assert actmem.format_bytes(Index()) == "3 MiB"


def test_signed_changes():
    from actmem.units import format_change
    assert [format_change(d) for d in (80 * MIB, -80 * MIB, -5, 0)] == ["+80", "-80", "0", "0"]

"""Pipeline schedules as data: validity of every order, and every closed form
of actmem.pipeline_formulas against the simulation (p up to 16, m up to 64,
v up to 4)."""

import functools
from collections import Counter
from fractions import Fraction

import pytest

import actmem
from actmem import (activation_memory, bubble_fraction_formula, first_stage_memory_1f1b,
                    gpipe_in_flight, interleaved_factor, interleaved_factor_holds,
                    interleaved_first_stage_memory, interleaved_in_flight,
                    model_activation_memory, one_f_one_b_in_flight, simulate_schedule)
from actmem.run.schedule.schedules import BACKWARD, FORWARD

MIB = 2**20
P_RANGE, M_RANGE, V_RANGE = range(1, 17), range(1, 65), range(2, 5)
BUBBLE_M = 32
"""The bubble tests time schedules up to m = 32 (the timing costs p*m*v per
schedule, two thirds of this file's CPU time at m = 64): every p up to 16
still meets m < p, m = p, multiples of p and m that p does not divide."""
WORKED = activation_memory(s=2048, b=1, h=4096, a=32, t=8)
"""The worked example's layer at t=8: 184 MiB."""


@functools.cache
def flat_cases(schedule):
    """{(p, m): schedule} of GPipe or 1F1B for every p in P_RANGE and m in
    M_RANGE (built once, shared by the tests: their timelines are cached)."""
    return {(p, m): simulate_schedule(schedule, p, m) for p in P_RANGE for m in M_RANGE}


@functools.cache
def interleaved_cases(order, max_p=16, max_m=64):
    """(p, m, v, schedule) for every (p, m, v) the implementation ``order``
    accepts (built once, shared by the tests)."""
    cases = []
    for p in range(2, max_p + 1):
        for m in range(1, max_m + 1):
            for v in V_RANGE:
                try:
                    cases.append((p, m, v, simulate_schedule("interleaved", p, m, v, order)))
                except ValueError:
                    break
    return tuple(cases)


# ---------------------------------------------------------------- validity

def assert_valid(s):
    """Every stage runs F and B of every (micro-batch, chunk) once; in time,
    each forward on virtual stage k starts after k-1's forward ended, each
    backward after its own forward and after virtual stage k+1's backward;
    a stage runs one operation at a time; it ends holding nothing."""
    p, v = s.p, s.v
    ends = {}
    for i, stage in enumerate(s.timeline):
        assert Counter((t.op.kind, t.op.microbatch, t.op.chunk) for t in stage) == Counter(
            (k, j, c) for k in (FORWARD, BACKWARD) for j in range(s.m) for c in range(v))
        assert all(a.end <= b.start for a, b in zip(stage, stage[1:]))
        for t in stage:
            ends[(t.op.kind, t.op.microbatch, t.op.chunk * p + i)] = (t.start, t.end)
    last = p * v - 1
    for (kind, j, k), (start, _) in ends.items():
        if kind == FORWARD and k > 0:
            assert start >= ends[(FORWARD, j, k - 1)][1]
        if kind == BACKWARD:
            assert start >= ends[(FORWARD, j, k)][1]
            if k < last:
                assert start >= ends[(BACKWARD, j, k + 1)][1]
    for i in range(p):
        counts = s.in_flight(i)
        assert min(counts) >= 0 and counts[-1] == 0 and len(counts) == 2 * s.m * v


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_gpipe_and_1f1b_orders_are_valid(schedule):
    for (p, m), s in flat_cases(schedule).items():
        if p <= 8 and m <= 24:
            assert_valid(s)


@pytest.mark.parametrize("order", actmem.ORDERS)
def test_interleaved_orders_are_valid(order):
    cases = [case for case in interleaved_cases(order) if case[0] <= 8 and case[1] <= 24]
    assert len(cases) > 20
    for *_, s in cases:
        assert_valid(s)


def test_1f1b_order_matches_megatron_warmup_and_steady_phase():
    s = simulate_schedule("1f1b", p=4, m=6)
    assert [" ".join(map(str, ops)) for ops in s.ops] == [
        "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5",
        "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5",
        "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5",
        "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5",
    ]


def test_interleaved_order_follows_megatron_schedule_table():
    # p=2, m=4, v=2: groups of p=2 micro-batches, chunk 0 then chunk 1;
    # stage 0 warms up with 2*(p-1) + (v-1)*p = 4 forwards.
    s = simulate_schedule("interleaved", p=2, m=4, v=2)
    assert " ".join(map(str, s.ops[0])) == (
        "F0 F1 F0/1 F1/1 F2 B0/1 F3 B1/1 F2/1 B0 F3/1 B1 B2/1 B3/1 B2 B3")
    assert " ".join(map(str, s.ops[1])) == (
        "F0 F1 F0/1 B0/1 F1/1 B1/1 F2 B0 F3 B1 F2/1 B2/1 F3/1 B3/1 B2 B3")


# ----------------------------------------------------- in flight, closed forms

def test_1f1b_stage_i_holds_min_p_minus_i_and_m():
    for (p, m), s in flat_cases("1f1b").items():
        assert [s.peak_in_flight(i) for i in range(p)] == [
            one_f_one_b_in_flight(p, m, i) for i in range(p)] == [
            min(p - i, m) for i in range(p)]


def test_gpipe_every_stage_holds_m():
    for (p, m), s in flat_cases("gpipe").items():
        assert {s.peak_in_flight(i) for i in range(p)} == {m} == {
            gpipe_in_flight(p, m, i) for i in range(p)}


@pytest.mark.parametrize("order", actmem.ORDERS)
def test_interleaved_in_flight_closed_form(order):
    for p, m, v, s in interleaved_cases(order):
        group = p if order == "megatron" else m // max(1, m // p)
        assert [s.peak_in_flight(i) for i in range(p)] == [
            interleaved_in_flight(p, m, v, i, group) for i in range(p)], (p, m, v)


def test_fewer_microbatches_than_stages():
    # m < p: 1F1B and GPipe both hold all m micro-batches on the first stages.
    s = simulate_schedule("1f1b", p=8, m=3)
    assert [s.peak_in_flight(i) for i in range(8)] == [3, 3, 3, 3, 3, 3, 2, 1]
    assert s.bubble_fraction() == Fraction(7, 3)


# ------------------------------------------------------------ memory, p cancels

def test_p_cancels_first_stage_of_1f1b_holds_the_whole_model():
    L = 96
    whole = model_activation_memory(WORKED, L)
    for p in actmem.common_divisors(L):
        for m in (p, p + 1, 2 * p, max(p, 64)):
            s = simulate_schedule("1f1b", p, m)
            assert s.stage_activation_memory(0, WORKED, L) == whole
            assert first_stage_memory_1f1b(WORKED, L, p, m) == whole
        if p > 1:
            assert first_stage_memory_1f1b(WORKED, L, p, p - 1) < whole


def test_worked_example_stages_in_mib():
    # L=32 layers of 184 MiB (t=8), p=4 stages, m=8 micro-batches.
    s = simulate_schedule("1f1b", p=4, m=8)
    assert [s.stage_activation_memory(i, WORKED, 32) // MIB for i in range(4)] == [
        5888, 4416, 2944, 1472]
    gpipe = simulate_schedule("gpipe", p=4, m=16)
    assert gpipe.stage_activation_memory(3, WORKED, 32) == 23552 * MIB
    inter = simulate_schedule("interleaved", p=4, m=8, v=2)
    assert inter.stage_activation_memory(0, WORKED, 32) == 8096 * MIB  # 5888 * 11/8


@pytest.mark.parametrize("order", actmem.ORDERS)
def test_interleaved_first_stage_factor(order):
    checked = 0
    for p, m, v, s in interleaved_cases(order):
        if m % p:
            continue
        L = p * v * 3
        held = s.stage_activation_memory(0, WORKED, L)
        whole = model_activation_memory(WORKED, L)
        if interleaved_factor_holds(p, m, v):
            checked += 1
            assert held == interleaved_first_stage_memory(WORKED, L, p, v)
            assert Fraction(held, whole) == interleaved_factor(p, v) == 1 + Fraction(
                p - 1, p * v)
        else:
            assert m == p and held == whole, (p, m, v)
    assert checked > 100


def test_interleaved_factor_holds_from_two_p_when_p_divides_m():
    for p in range(2, 17):
        for v in V_RANGE:
            assert not interleaved_factor_holds(p, p, v)
            assert interleaved_factor_holds(p, 2 * p, v)


# ---------------------------------------------------------------- bubble

@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_bubble_is_p_minus_1_over_m(schedule):
    for (p, m), s in flat_cases(schedule).items():
        assert bubble_fraction_formula(schedule, p, m) == Fraction(p - 1, m)
        assert m > BUBBLE_M or s.bubble_fraction() == Fraction(p - 1, m), (p, m)


@pytest.mark.parametrize("order", actmem.ORDERS)
def test_interleaved_bubble_is_p_minus_1_over_v_m_when_p_divides_m(order):
    for p, m, v, s in interleaved_cases(order):
        formula = bubble_fraction_formula("interleaved", p, m, v)
        assert formula == Fraction(p - 1, v * m)
        if m > BUBBLE_M:
            continue
        if m >= p:
            assert s.bubble_fraction() == formula, (p, m, v)
        else:  # only PyTorch's order accepts m < p: it idles longer
            assert order == "pytorch" and s.bubble_fraction() > formula


def test_bubble_units_worked_out_by_hand():
    # p=2, m=2, 1F1B: stage 1 starts at 1, the step ends at 3*(m+p-1) = 9.
    s = simulate_schedule("1f1b", p=2, m=2)
    assert s.makespan() == 9 and s.bubble_fraction() == Fraction(1, 2)
    assert [(str(t.op), t.start, t.end) for t in s.timeline[1]] == [
        ("F0", 1, 2), ("B0", 2, 4), ("F1", 4, 5), ("B1", 5, 7)]
    assert s.shortest_op() == 1  # a forward pass


@pytest.mark.parametrize("args, shortest", [
    (("interleaved", 4, 8, 2), Fraction(1, 2)),  # a forward through one of 2 chunks
    (("zbv", 4, 8, 2), Fraction(1, 2)),  # I and W: half a backward, through one of 2 chunks
    (("interleaved-zb", 4, 8, 1), 1)])
def test_shortest_op_is_the_timelines_shortest(args, shortest):
    s = simulate_schedule(*args)
    assert s.shortest_op() == shortest == min(t.end - t.start for st in s.timeline for t in st)


# ----------------------------------------------------------------- orders

def test_megatron_and_pytorch_orders_agree_when_p_divides_m():
    for p in range(2, 9):
        for m in range(p, 33, p):
            for v in V_RANGE:
                assert simulate_schedule("interleaved", p, m, v).ops == \
                    simulate_schedule("interleaved", p, m, v, "pytorch").ops


def test_orders_differ_where_megatron_refuses():
    with pytest.raises(ValueError, match="multiple of p=4"):
        simulate_schedule("interleaved", 4, 6, 2)
    s = simulate_schedule("interleaved", 4, 6, 2, "pytorch")  # groups of 6
    assert s.peak_in_flight(0) == interleaved_in_flight(4, 6, 2, 0, group=6) == 12
    with pytest.raises(ValueError, match="PyTorch's Schedule1F1B"):
        simulate_schedule("1f1b", 4, 3, order="pytorch")


# ----------------------------------------------------------------- errors

@pytest.mark.parametrize("args, kwargs, error, message", [
    (("1f1b", 4, 0), {}, ValueError, "m must be a positive integer"),
    (("1f1b", 4, 8), {"v": 2}, ValueError, "v=2: model chunks .* need schedule='interleaved'"),
    (("zero-bubble", 4, 8), {}, ValueError, "schedule must be one of 'gpipe', '1f1b', "
                                            "'interleaved', 'interleaved-zb', .*got 'zero-bubble'"),
    (("gpipe", 4.0, 8), {}, TypeError, "p must be a positive integer, got 4.0"),
    (("gpipe", 4, True), {}, TypeError, "m must be a positive integer, got True"),
    (("interleaved", 4, 8), {}, ValueError, "v=1: the interleaved schedule needs v >= 2"),
    (("interleaved", 1, 8, 2), {}, ValueError, "p=1: the interleaved schedule needs p >= 2"),
    (("1f1b", 4, 8), {"order": "deepspeed"}, ValueError, "order must be one of"),
])
def test_bad_schedule_input(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        simulate_schedule(*args, **kwargs)


def test_bad_stage_and_layers():
    s = simulate_schedule("1f1b", 4, 8)
    with pytest.raises(ValueError, match=r"p=4 must divide L=30"):
        s.stage_activation_memory(0, WORKED, 30)
    with pytest.raises(ValueError, match=r"stage i must be an int in 0..3 \(p=4\), got 4"):
        s.in_flight(4)
    inter = simulate_schedule("interleaved", 4, 8, 2)
    with pytest.raises(ValueError, match=r"p\*v=8 \(p=4, v=2\) must divide L=12"):
        inter.stage_activation_memory(0, WORKED, 12)
    with pytest.raises(ValueError, match="got -1"):
        one_f_one_b_in_flight(4, 8, -1)


def test_huge_schedules_are_refused_not_built():
    with pytest.raises(ValueError, match=r"p=4, m=1000000000000000000000000000000, v=1: "
                                         r"3\*p\*m\*v operations exceed the simulation's 1,000,000"):
        simulate_schedule("1f1b", 4, 10**30)
    assert one_f_one_b_in_flight(4, 10**30, 0) == 4  # the closed form still answers

"""Kinds of bad input the run layer must refuse clearly, and odd but valid
input it must accept (issue 21): each test covers a kind, over several inputs."""

from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import actmem
from actmem import PRESETS, model_states, paper_formula, training_memory

P = PRESETS["llama2-7b"]
NOT_INTEGERS = [1.0, Decimal(1), Fraction(1), np.array([1]), np.array(1), np.float64(1.0), "1",
                True]


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


# ---------------------------------------------------------------- closed forms, parts

@pytest.mark.parametrize("call", [
    lambda v: actmem.interleaved_in_flight(4, 8, v, 0),
    lambda v: actmem.interleaved_factor(4, v),
    lambda v: actmem.interleaved_factor_holds(4, 8, v),
    lambda v: actmem.interleaved_first_stage_memory(10, 32, 4, v),
    lambda v: actmem.bubble_fraction_formula("interleaved", 4, 8, v),
])
def test_interleaved_closed_forms_refuse_one_chunk(call):
    with pytest.raises(ValueError, match=r"v=1: the interleaved schedule needs v >= 2"):
        call(1)
    assert call(2) > 0


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_one_chunk_closed_forms_refuse_chunks(schedule):
    with pytest.raises(ValueError, match=rf"v=2: schedule '{schedule}' runs one model chunk"):
        actmem.bubble_fraction_formula(schedule, 4, 8, 2)


@pytest.mark.parametrize("bad", ["4", 4.0, None, np.array(4)])
def test_closed_forms_check_before_arithmetic(bad):
    with pytest.raises(TypeError, match="p must be a positive integer"):
        actmem.interleaved_first_stage_memory(10, 32, bad, 2)


@pytest.mark.parametrize("parts, error, words", [
    ([{"x": -1}], ValueError, "bytes >= 0"), ([{"x": 1.5}], TypeError, r"parts\[0\]\['x'\]"),
    ([{1: 2}], ValueError, "part names"), (["x"], TypeError, r"parts\[0\] must be a dict"),
    (5, ValueError, "one dict per model chunk"), ([{}, {}], ValueError, "v=1"),
])
def test_peak_parts_checks_its_parts(parts, error, words):
    s = actmem.simulate_schedule("1f1b", 2, 4)
    with pytest.raises(error, match=words):
        s.peak_parts(0, parts)
    assert s.peak_parts(0, [{"x": np.int64(2)}]) == {"x": 4}  # 2 in flight on stage 0


def test_schedule_timing_looks_at_each_operation_a_bounded_number_of_times(monkeypatch):
    """Linear in the operations: a GPU parks on the one event it waits for
    (a loop over every stage until nothing moves costs O(p) per wave)."""
    from actmem.run.schedule import schedule_timing
    calls = []
    real = schedule_timing.needs
    monkeypatch.setattr(schedule_timing, "needs", lambda *a: calls.append(1) or real(*a))
    p, m = 200, 2
    s = actmem.simulate_schedule("gpipe", p, m)
    assert s.bubble_fraction() == Fraction(p - 1, m)   # (p-1)/m, Narayanan et al. sec. 2.2
    assert len(calls) <= 2 * 3 * p * m   # each op: once placed, at most once parked


# ---------------------------------------------------------------- sizes and text

@pytest.mark.parametrize("call", [
    lambda n: actmem.format_bytes(n), lambda n: actmem.format_value(n, "GiB", 20),
    lambda n: actmem.convert(n, "MiB"), lambda n: actmem.format_change(-n),
])
@pytest.mark.parametrize("exponent", [4000, 5000, 100000])
def test_sizes_beyond_what_python_prints_name_the_argument(call, exponent):
    n = 10**exponent
    with pytest.raises(ValueError, match=r"(n_bytes|delta) must have at most 4000 digits"):
        call(n)


def test_sizes_up_to_the_limit_print_every_digit():
    n = 10**4000 - 1
    assert actmem.format_value(n, "B", 20) == "9" * 4000
    assert actmem.format_change(-n, "B") == "-" + "9" * 4000


@pytest.mark.parametrize("text", ["1" + "0" * 4400 + "GiB", "8" * 101, " " * 200 + "80GB"])
def test_parse_size_refuses_long_texts_naming_the_argument(text):
    with pytest.raises(ValueError, match=r"^reserve is a text of \d+ characters"):
        actmem.parse_size("reserve", text)


# ---------------------------------------------------------------- explorers

def all_explorers():
    from actmem.views import fit_views, schedule_views, variant_views, widgets  # noqa: F401
    from actmem.views.widgets import _Explorer
    seen, todo = [], list(_Explorer.__subclasses__())
    while todo:
        cls = todo.pop()
        seen.append(cls)
        todo += cls.__subclasses__()
    return seen


def test_every_explorer_lists_its_keywords():
    classes = all_explorers()
    assert {"FitPlanner", "LayerExplorer"} <= {c.__name__ for c in classes}
    for cls in classes:
        with pytest.raises(TypeError, match=rf"^{cls.__name__}\(\) got unknown keyword argument "
                                            r"tp; it takes \w+"):
            cls(tp=2)


@pytest.mark.parametrize("model", ["LLaMA2-7B", ["llama2-7b"], None, P])
def test_planner_names_its_model_argument(model):
    from actmem.views.fit_views import FitPlanner
    with pytest.raises(ValueError, match="^model must be one of 'gpt2-large'"):
        FitPlanner(model=model)


def test_planner_offers_only_schedules_that_run():
    """Every schedule the planner offers has some v and m for every p it
    offers (interleaving needs m a multiple of p, at most 32)."""
    from actmem.views.fit_views import interleaving_chunks, pipeline_choices
    from actmem.views.schedule_views import microbatch_choices, schedule_options
    for model in PRESETS.values():
        for p in pipeline_choices(model.L):
            chunks = interleaving_chunks(model.L, p)
            for _, schedule in schedule_options(chunks):
                vs = [1, *chunks] if schedule != "interleaved" else chunks
                assert any(microbatch_choices(schedule, p, v) for v in vs), (model, p, schedule)
            if p > 32:
                assert "interleaved" not in [s for _, s in schedule_options(chunks)]


def test_planner_refuses_menus_set_from_code():
    from actmem.views.fit_views import FitPlanner
    planner = FitPlanner()
    shown = {k: r.value for k, r in planner.readouts.items()}
    offered = planner.controls["p"].options
    for options in ([3, 5], [2, 1000], ["x"]):
        with pytest.raises(ValueError, match=r"^p\.options=.* refused"):
            planner.controls["p"].options = options
        assert planner.controls["p"].options == offered and planner.controls["p"].value == 2
        assert {k: r.value for k, r in planner.readouts.items()} == shown
    planner.controls["p"].value = 4  # the menus still work
    assert planner.readouts["verdict"].value != shown["verdict"]


@pytest.mark.parametrize("summary", [None, 3, b"answers", ["a"]])
def test_hidden_answers_refuse_a_summary_before_the_block(summary, capsys):
    from actmem.views.answers import hidden_answers
    ran = []
    with pytest.raises(TypeError, match="summary must be a str"):
        with hidden_answers(summary):
            ran.append(True)
    assert ran == []


@pytest.mark.parametrize("call, name", [
    (lambda v: training_memory(P, p=v), "p"), (lambda v: training_memory(P, recompute=v), "recompute"),
    (lambda v: model_states(P, accounting=v), "accounting"), (lambda v: actmem.format_bytes(2, v), "unit"),
    (lambda v: actmem.parse_size("gpu_memory", [v]), "gpu_memory"),
])
def test_messages_print_integers_python_cannot(call, name):
    with pytest.raises((TypeError, ValueError), match=rf"^{name}\b"):
        call(-10**5000)

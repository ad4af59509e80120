"""Issue 21, fresh campaign: a bounded subset of ``benchmarks/fuzz_campaign.py``
(every public entry point, the command line, the explorers' controls set
from code) and one test per kind of fault it found, each failing on the
code before its fix. No deadlines: speed lives in the benchmark."""

import importlib.util
import io
import re
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import actmem
from actmem.run.moments.framework import workspace_bytes
from actmem.run.moments.loss import loss_bytes

_spec = importlib.util.spec_from_file_location(
    "fuzz_campaign", Path(__file__).resolve().parents[1] / "benchmarks" / "fuzz_campaign.py")
campaign = sys.modules["fuzz_campaign"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(campaign)

FEW = settings(max_examples=12, deadline=None, database=None,
               suppress_health_check=list(HealthCheck))
P = actmem.PRESETS["llama2-7b"]
MIX = actmem.MOE_PRESETS["mixtral-8x7b"]


@pytest.mark.parametrize("entry", campaign.ENTRIES, ids=[e.name for e in campaign.ENTRIES])
@FEW
@given(data=st.data())
def test_each_entry_point_gives_a_result_or_a_clear_error(entry, data):
    name = data.draw(st.sampled_from(sorted(entry.args)))
    domain = entry.args[name]
    value = data.draw(st.one_of(campaign.ODD, campaign.valid_for(domain)))
    try:
        verdict, detail = campaign.judge(entry, name, value, domain_says=domain.judge(value))
    finally:
        actmem.set_language("en")  # set_language's entry may draw "zh": the process's labels
    assert verdict in ("result", "clear"), detail


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(argv=campaign.command_lines())
def test_command_lines_give_output_or_one_error_line(argv):
    verdict, detail = campaign.judge_cli(argv)
    assert verdict in ("result", "clear"), detail


@pytest.fixture(scope="module")
def explorers():
    return campaign.explorers()


def test_explorer_controls_take_only_what_they_offer(explorers):
    @settings(max_examples=6, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def one(data):
        explorer = data.draw(st.sampled_from(explorers))
        name = data.draw(st.sampled_from(sorted(explorer.controls)))
        control = explorer.controls[name]
        menu = [o[1] if isinstance(o, tuple) else o for o in getattr(control, "options", ())]
        value = data.draw(st.one_of(campaign.ODD, st.sampled_from(menu or [True, False])))
        options = data.draw(st.booleans()) and bool(menu)
        verdict, detail = campaign.judge_control(
            explorer, name, [value] if options else value, options)
        assert verdict in ("result", "clear"), detail
    for _ in range(5):
        one()


# ---- one test per kind of fault found -------------------------------------------

def test_loss_bytes_checks_sizes_and_dtypes_before_arithmetic():
    logits, tokens = 4096 * 32000, 4096
    assert loss_bytes("torch", logits, tokens, logits_dtype=np.int64(2))["saved"] == 4 * logits
    for kwargs, message in [
            (dict(logits_dtype=4.0), "logits_dtype must be one of 2, 4"),  # 4.0 in (2, 4)
            (dict(logits_dtype=np.array(4)), "logits_dtype must be one of 2, 4"),
            (dict(logits=0), "logits must be a positive integer"),
            (dict(tokens=object()), "tokens must be a positive integer"),
            (dict(chunk=0, loss="fused"), "chunk must be a positive integer"),
            (dict(output_gradients=-1, loss="fused"), "output_gradients must be an integer >= 0")]:
        call = {"loss": "vocab_parallel", "logits": logits, "tokens": tokens, **kwargs}
        with pytest.raises((TypeError, ValueError), match=message):
            loss_bytes(**call)
    fused = loss_bytes("fused", logits, tokens, chunk=np.int64(1024))
    assert all(type(v) is int for v in fused.values())  # was np.int64


def test_wrong_objects_are_named_not_attribute_errors():
    config = actmem.LayerConfig(2048, 1, 4096, 32)
    for call, message in [
            (lambda: actmem.ledger_rows("llama2-7b"), "config must be a LayerConfig"),
            (lambda: actmem.row_coefficient(0, config), "row must be a LedgerRow"),
            (lambda: actmem.expert_data_parallel("mixtral", 2, 4), "model must be a ModelConfig"),
            (lambda: workspace_bytes(compute_capability=9), r"compute_capability must be a pair"),
            (lambda: workspace_bytes(compute_capability=(9, "0")),
             r"compute_capability\[1\] must be an integer >= 0"),
            (lambda: workspace_bytes(transformer_engine=0), "transformer_engine must be True"),
            (lambda: actmem.split_layers(32, 2, stage_layers=np.array(16)),
             "stage_layers must be a tuple of p=2 ints, got array"),
            (lambda: actmem.split_layers(32, 2, stage_layers={0: 16, 1: 16}),
             "stage_layers must be a tuple"),
            (lambda: actmem.preset(0), "got name=0")]:
        with pytest.raises((TypeError, ValueError), match=message):
            call()


def test_run_sizes_are_checked_before_arithmetic():
    for kwargs, error, message in [
            (dict(t="2"), TypeError, "t must be a positive integer, got '2'"),  # was '%' on a str
            (dict(d=2j), TypeError, "d must be a positive integer"),
            (dict(t=0), ValueError, r"t must be a positive integer \(>= 1\), got 0")]:
        with pytest.raises(error, match=message):
            actmem.training_memory(MIX, **{"t": 2, "p": 4, "d": 4, "ep": 2, "m": 4,
                                           "sequence_parallel": True, **kwargs})
    with pytest.raises(ValueError, match="t must be a positive integer"):  # ZeroDivisionError
        actmem.expert_data_parallel(MIX, 0, 4)
    e_d = actmem.expert_data_parallel(MIX, np.int64(2), np.int64(4), ep=2)  # t*d/(ep*etp), etp=t
    assert e_d == 2 and type(e_d) is int


def test_numpy_scalars_are_stored_as_python_numbers():
    model = MIX.with_(num_experts=np.int64(8), moe_router_topk=np.int64(2),
                      moe_aux_loss_coeff=np.float64(0.01))
    assert [type(model.num_experts), type(model.moe_router_topk),
            type(model.moe_aux_loss_coeff)] == [int, int, float]
    assert model == MIX.with_(moe_aux_loss_coeff=0.01)
    layer = actmem.LayerConfig(np.int64(2048), 1, 4096, 32, num_experts=np.int32(8),
                               activation="swiglu")
    assert type(layer.num_experts) is int
    # 4 * np.int32(2**30) wraps to 0 in NumPy's arithmetic
    assert actmem.default_ffn_hidden_size(np.int32(2**30)) == 2**32


def test_small_numpy_integers_reach_no_numpy_arithmetic():
    # np.uint8(4) passed the checks and overflowed later: "4096 out of bounds for uint8"
    assert (actmem.training_memory(P, logits_bytes=np.uint8(4)).most_loaded.peak
            == actmem.training_memory(P, logits_bytes=4).most_loaded.peak)
    assert actmem.paper_formula(np.int16(2048), 1, np.int16(4096), 32) == actmem.paper_formula(
        2048, 1, 4096, 32)  # 2048 * 4096 wraps in int16
    from actmem.views.widgets import LedgerExplorer
    assert LedgerExplorer(a=np.uint8(4)).layer["a"] == 4


def test_planner_arguments_are_checked_before_use():
    from actmem.views.fit_views import FitPlanner
    with pytest.raises(TypeError, match=r"^recompute must be a tuple .* got 0 \(int\)"):
        FitPlanner(recompute=0)  # was "'int' object is not subscriptable"
    with pytest.raises(ValueError, match=r"^schedule=<a int of \d+ bits, too long to print> is "
                                         r"not offered"):
        FitPlanner(schedule=10**5000)  # the menu's message raised Python's digit limit
    with pytest.raises(TypeError, match="gradient_accumulation_fusion .* too long to print"):
        actmem.training_memory(P, gradient_accumulation_fusion=10**5000)


def test_huge_layer_counts_are_refused_before_any_per_layer_work():
    for L in (10**6 + 1, 10**26):  # 10**26 raised OverflowError, 1.5e9 ran for minutes
        with pytest.raises(ValueError, match=rf"^L={L} layers: at most 1,000,000"):
            P.with_(L=L)


def test_huge_numbers_reach_no_float_and_no_unprintable_message():
    moe = dict(num_experts=8, activation="swiglu", sequence_parallel=True)
    keep_all = actmem.activation_memory(2048, 1, 4096, 32, 8, moe_expert_capacity_factor=4,
                                        **moe).total  # 4 = E/k: every token kept
    for factor in (1e308, 10**400):  # overflowed float arithmetic
        assert actmem.activation_memory(2048, 1, 4096, 32, 8, moe_expert_capacity_factor=factor,
                                        **moe).total == keep_all
    with pytest.raises(TypeError, match="cublas_workspace_config .* too long to print"):
        actmem.training_memory(P, cublas_workspace_config=10**5000)
    with pytest.raises(ValueError, match=r"^language=<a int of \d+ bits, too long to print> is "
                                         r"not offered; choose one of 'en', 'zh'"):
        actmem.set_language(10**5000)  # the message's repr raised Python's digit limit


def test_the_schedule_caps_say_why():
    with pytest.raises(ValueError, match=r"exceed the simulation's 1,000,000 \(about 7 s of "
                                         r"CPU; its timing costs about 7 us per operation\)"):
        actmem.simulate_schedule("gpipe", 100, 5000)
    with pytest.raises(ValueError, match=r"^p=2, m=120692, v=1: 3\*p\*m\*v operations exceed "
                                         r"training_memory's timeline of 200,000 \(about 7 s"):
        actmem.training_memory(P, t=2, p=2, m=120692)  # ran past 10 s of CPU


@pytest.mark.parametrize("entry", [e for e in campaign.ENTRIES if e.keywords],
                         ids=[e.name for e in campaign.ENTRIES if e.keywords])
def test_unknown_keywords_are_named_with_the_keywords_allowed(entry):
    verdict, detail = campaign.judge_unknown_keyword(entry)  # Python's message lists none
    assert verdict == "clear", detail


def test_menus_refuse_look_alike_values_by_name(explorers):
    layer = explorers[0]
    before = layer.values()
    for value in (True, 4.0, np.array([4]), np.array(4)):  # == 4, but not an offered int
        with pytest.raises(ValueError, match=rf"^t={re.escape(repr(value))} is not offered; "
                                             r"choose one of 1, "):
            layer.controls["t"].value = value
        assert layer.values() == before
    layer.controls["t"].value = np.int64(4)  # an integer: the offered 4
    assert layer.controls["t"].value == 4 and type(layer.controls["t"].value) is int
    layer.controls["t"].value = before["t"]


def test_checkboxes_refuse_zero_and_one(explorers):
    planner = explorers[-1]   # shared with the tests before, which may have moved it
    readouts = {k: r.value for k, r in planner.readouts.items()}
    before = planner.controls["sequence_parallel"].value
    for value in (0, 1, np.True_):
        with pytest.raises(ValueError, match=r"^sequence_parallel=.* is not offered; choose "
                                             r"True or False"):
            planner.controls["sequence_parallel"].value = value
    assert planner.controls["sequence_parallel"].value is before
    assert {k: r.value for k, r in planner.readouts.items()} == readouts


def test_menus_set_from_code_are_refused_before_they_change(explorers):
    schedule = explorers[3]
    before, readouts = schedule.values(), {k: r.value for k, r in schedule.readouts.items()}
    with pytest.raises(ValueError, match=r"^N.options=\[array\(27\)\] refused"):
        schedule.controls["N"].options = [np.array(27)]  # raised numpy's ambiguity error
    assert schedule.values() == before
    assert {k: r.value for k, r in schedule.readouts.items()} == readouts


def test_command_line_errors_are_one_line():
    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err), pytest.raises(SystemExit) as end:
        from actmem.views.cli import main
        main(["train", "--preset", "llama2-7b", "-t", "٣"])
    assert end.value.code == 2
    assert err.getvalue().count("\n") <= 2 and "error:" in err.getvalue()


@pytest.mark.parametrize("model", [P, MIX])
def test_a_numpy_bool_is_no_hot_expert(model):
    """np.True_ equals 1 but is a flag, not the busiest expert's load: refused
    for a dense model as for an MoE one (found by the campaign)."""
    with pytest.raises(ValueError, match="moe_hot_expert"):
        actmem.training_memory(model, moe_hot_expert=np.True_)

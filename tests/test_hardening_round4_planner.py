"""Issue 39, kinds 4, 6, 7, 12, 14 and 21: the fused loss's chunk, the
first/last-stage layer counts, loss_bytes' fused-only arguments and the
planner's defaults and messages. Each test covers a kind over several inputs."""

import re

import numpy as np
import pytest

import actmem
from actmem import MOE_PRESETS, PRESETS, loss_bytes, split_layers, training_memory
from actmem.run.moments.loss import fused_loss_chunk
from actmem.views.fit_views import MODELS, FitPlanner, tensor_choices
from actmem.views.schedule_views import ScheduleExplorer
from actmem.views.widgets import _dropdown, _option_values

P = PRESETS["llama2-7b"]
FIRST, LAST = "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"


# kind 4: a chunk of more than the tokens is one chunk of the tokens there are


@pytest.mark.parametrize("model, options", [
    (P, {}), (P.with_(b=2), dict(t=2, sequence_parallel=True)),
    (P.with_(flash_attention=True), dict(cp=2)), (PRESETS["gpt2-large"], dict(p=2)),
    (P, dict(precision="fp32", logits_bytes=4)),
])
@pytest.mark.parametrize("larger", [1, 10**3, 10**9, 2**70])
def test_a_chunk_larger_than_the_tokens_is_the_tokens(model, options, larger):
    tokens = model.s * model.b // options.get("cp", 1)  # the loss's tokens on one GPU
    run = dict(loss="fused", **options)
    whole = training_memory(model, loss_chunk_tokens=tokens, **run)
    bigger = training_memory(model, loss_chunk_tokens=tokens + larger, **run)
    assert [s.peak for s in bigger.stages] == [s.peak for s in whole.stages]
    assert bigger.stages[-1].timeline.peak.label == whole.stages[-1].timeline.peak.label
    smaller = training_memory(model, loss_chunk_tokens=tokens - 1, **run)
    assert smaller.stages[-1].peak < whole.stages[-1].peak  # below the tokens it still counts


@pytest.mark.parametrize("tokens", [1, 7, 4096, 8192])
@pytest.mark.parametrize("logits_dtype", [2, 4])
def test_loss_bytes_clamps_the_chunk_to_the_tokens(tokens, logits_dtype):
    logits = tokens * 16000
    whole = loss_bytes("fused", logits, tokens, logits_dtype, chunk=tokens)
    for chunk in (tokens + 1, 2 * tokens, 10**12):
        assert loss_bytes("fused", logits, tokens, logits_dtype, chunk=chunk) == whole
    window = (logits_dtype + 4 * (logits_dtype != 4)) * logits  # a chunk's logits, fp32 copy
    assert whole == {"forward": 8 * tokens + window, "saved": 4 * tokens,
                     "backward": 4 * tokens + window}
    assert fused_loss_chunk(tokens, 32000, 4096) <= tokens  # the default never exceeds them


# kind 12: loss_bytes refuses what only the fused loss takes


@pytest.mark.parametrize("loss", ["vocab_parallel", "torch"])
@pytest.mark.parametrize("chunk", [1, 4096, 10**9])
def test_loss_bytes_refuses_a_chunk_for_other_losses(loss, chunk):
    with pytest.raises(ValueError, match=rf"^chunk={chunk} is for loss='fused' only "
                                         rf"\(got loss='{loss}'"):
        loss_bytes(loss, 4096 * 32000, 4096, chunk=chunk)
    with pytest.raises(ValueError, match=rf"^output_gradients={chunk} is for loss='fused'"):
        loss_bytes(loss, 4096 * 32000, 4096, output_gradients=chunk)
    assert loss_bytes(loss, 4096 * 32000, 4096) == loss_bytes(loss, 4096 * 32000, 4096,
                                                              chunk=None, output_gradients=0)


@pytest.mark.parametrize("chunk, error", [(0, ValueError), (-3, ValueError), (True, TypeError),
                                          (2.0, TypeError), ("8", TypeError)])
def test_loss_bytes_checks_the_chunk(chunk, error):
    with pytest.raises(error, match=r"^chunk must be a positive integer"):
        loss_bytes("fused", 4096 * 32000, 4096, chunk=chunk)


def test_training_memory_runs_every_loss_with_the_defaults():
    for loss in actmem.LOSSES:
        assert training_memory(P, loss=loss).stages[0].peak > 0


# kind 6: at p=1 the one stage is the first and the last: it holds all L layers


@pytest.mark.parametrize("L", [1, 7, 32])
@pytest.mark.parametrize("name", [FIRST, LAST])
def test_first_or_last_at_one_stage_must_be_all_layers(L, name):
    for n in {1, L - 1, L + 1, 5 * L} - {0, L}:
        with pytest.raises(ValueError, match=rf"^{name}={n} must be L={L} \(or None\) at p=1"):
            split_layers(L, 1, **{name: n})
    assert split_layers(L, 1, **{name: L}) == ((L,),)  # Megatron-LM accepts it: no middle


@pytest.mark.parametrize("name", [FIRST, LAST])
def test_training_memory_refuses_first_or_last_at_one_stage(name):
    with pytest.raises(ValueError, match=rf"^{name}=5 must be L=32"):
        training_memory(P, p=1, **{name: 5})
    assert training_memory(P, p=1, **{name: 32}).stages[0].peak == training_memory(
        P).stages[0].peak


# kind 7: each message names the argument at fault first, its value and range


@pytest.mark.parametrize("L, p, name, n, allowed", [
    (32, 2, LAST, 40, "at most L - (p-1) = 31"),
    (32, 2, FIRST, 40, "at most L - (p-1) = 31"),
    (32, 4, LAST, 30, "at most L - (p-1) = 29"),
    (80, 8, FIRST, 74, "at most L - (p-1) = 73"),
])
def test_first_or_last_too_large_names_itself(L, p, name, n, allowed):
    with pytest.raises(ValueError, match=rf"^{name}={n} must be {re.escape(allowed)} "
                                         rf"\(L={L}, p={p}\)"):
        split_layers(L, p, **{name: n})


@pytest.mark.parametrize("L, p, name, n, near", [
    (32, 4, LAST, 3, "2 or 5"), (32, 4, FIRST, 3, "2 or 5"), (126, 16, FIRST, 5, "6"),
])
def test_first_or_last_that_leaves_unequal_stages_names_itself(L, p, name, n, near):
    with pytest.raises(ValueError, match=rf"^{name}={n} must leave a multiple of {p - 1} "
                                         rf"layers.*nearest such {name}: {near}$"):
        split_layers(L, p, **{name: n})


@pytest.mark.parametrize("L, p, first, last, message", [
    (32, 2, 5, 20, f"{LAST}=20 must be exactly L - {FIRST} - (p-2) = 27"),
    (32, 4, 5, 20, f"{LAST}=20 must leave a multiple of 2 layers"),
    (8, 3, 4, 4, f"{LAST}=4 must be at most L - {FIRST} - (p-2) = 3"),
    (32, 4, 31, 1, f"{FIRST}=31 must be at most L - (p-1) = 29"),
])
def test_both_given_names_the_one_at_fault(L, p, first, last, message):
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        split_layers(L, p, **{FIRST: first, LAST: last})


@pytest.mark.parametrize("options, message", [
    ({LAST: 5}, f"{LAST}=5 must be a multiple of v=2"),
    ({FIRST: 3}, f"{FIRST}=3 must be a multiple of v=2"),
    ({LAST: 6}, f"{LAST}=6 leaves 13 layers to each of the other 2 stage(s)"),
    (dict(stage_layers=(15, 9, 8)), "stage_layers[0]=15 must be a multiple of v=2"),
    (dict(account_for_loss_in_pipeline_split=True), "v=2 must divide the 11 layers of stage 0"),
])
def test_chunk_messages_name_the_argument(options, message):
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        split_layers(32, 3, 2, **options)


@pytest.mark.parametrize("L, p, options, message", [
    (32, 2, dict(stage_layers=(16, 16), **{LAST: 3}),
     f"stage_layers=(16, 16) cannot be combined with {LAST}=3"),
    (32, 2, {FIRST: 2, "account_for_loss_in_pipeline_split": True},
     f"{FIRST}=2 cannot be combined with account_for_loss_in_pipeline_split=True"),
    (33, 4, dict(account_for_embedding_in_pipeline_split=True),
     "account_for_embedding_in_pipeline_split=True: p=4 must divide L=33 + 1 (embedding) = 34"),
])
def test_split_families_and_accounting_name_their_arguments(L, p, options, message):
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        split_layers(L, p, **options)


# kind 14: the planner opens with defaults valid for every model


@pytest.mark.parametrize("name", list(MODELS))
def test_planner_opens_on_every_model_with_its_defaults(name):
    x = FitPlanner(model=name)
    moe = MODELS[name].num_experts is not None
    values = x.values()
    assert values["sequence_parallel"] is moe  # Megatron-LM: MoE with t > 1 needs it
    assert values["t"] == 2 and 2 in tensor_choices(x.model(), moe)
    for control, value in values.items():
        if hasattr(x.controls[control], "options"):
            assert value in _option_values(x.controls[control].options), control
    assert "GiB" in x.readouts["verdict"].value
    for t in _option_values(x.controls["t"].options):  # every t offered runs
        x.controls["t"].value = t
        assert x.controls["t"].value == t and "GiB" in x.readouts["verdict"].value


@pytest.mark.parametrize("name", list(MOE_PRESETS))
def test_planner_defaults_follow_the_other_arguments(name):
    x = FitPlanner(model=name, sequence_parallel=False)  # t > 1 is not offered then
    assert x.values()["t"] == 1 and x.values()["etp"] == 1
    with pytest.raises(ValueError, match=r"^t=2 is not offered; choose one of 1 \(.*an MoE "
                                         r"model takes t > 1 only with sequence_parallel=True"):
        FitPlanner(model=name, sequence_parallel=False, t=2)


# kind 21: a value not offered because of another control says why, never
# "choose one of" followed by nothing


def test_interleaving_opens_with_its_own_v():
    x = FitPlanner(schedule="interleaved")
    assert (x.values()["v"], x.values()["m"]) == (2, 8)
    assert FitPlanner(schedule="interleaved", p=4, v=4).values()["m"] == 8


@pytest.mark.parametrize("options, message", [
    (dict(schedule="interleaved", p=1), r"^schedule='interleaved' is not offered; choose one of "
     r"gpipe, 1f1b \(at p=1 only schedules with v=1 run: .* choose p among 2, 4, 8, 16"),
    (dict(schedule="interleaved", p=3), r"^schedule='interleaved' is not offered.*at p=3 .*"
     r"choose p among 2, 4, 8, 16"),
    (dict(model="deepseek-v3", schedule="interleaved"),
     r"^schedule='interleaved' is not offered.*dividing L=61; no p offered has them"),
    (dict(schedule="interleaved", v=1), r"^v=1 does not run with schedule='interleaved'; "
     r"choose v among 2, 4, or a schedule that takes v=1 \(1f1b\)$"),
    (dict(v=2), r"^v=2 does not run with schedule='1f1b'; choose v among 1, or a schedule "
     r"that takes v=2 \(interleaved\)$"),
    (dict(schedule="interleaved", m=7), r"^m=7 is not offered; choose one of 2, 4, .*, 32 "
     r"\(the m <= 32 that schedule='interleaved' takes at p=2, v=2: multiples of p\)$"),
])
def test_planner_says_why_a_value_is_not_offered(options, message):
    with pytest.raises(ValueError, match=message):
        FitPlanner(**options)


def test_schedule_explorer_says_why_a_schedule_is_not_offered():
    with pytest.raises(ValueError, match=r"^schedule='interleaved' is not offered; choose one "
                                         r"of .*\(at p=1 only schedules with v=1 run"):
        ScheduleExplorer(p=1, schedule="interleaved")


@pytest.mark.parametrize("value", [8, 3])
def test_an_empty_menu_says_why(value):
    with pytest.raises(ValueError) as caught:
        _dropdown("m", [], value, "the schedule's rules")
    text = str(caught.value)
    assert "choose one of" not in text
    assert text == (f"m={value!r} is not offered: the other arguments leave no m to choose "
                    "(the schedule's rules); change them first")
    with pytest.raises(ValueError, match=r"^loss='cce' is not offered; choose one of "
                                         r"vocab_parallel, torch$"):  # values, not pairs
        _dropdown("loss", [("a", "vocab_parallel"), ("b", "torch")], "cce")


@pytest.mark.parametrize("gpu", [np.array([4]), ["H100 80GB SXM"], None, 3, "H100"])
def test_planner_checks_its_gpu_before_any_menu_reads_it(gpu):
    """The FP8 menu asks whether the GPU runs FP8: an unhashable or unknown
    gpu is refused by the GPU menu's own message first (found by the fuzz
    campaign: a NumPy array reached GPUS.get and raised TypeError)."""
    with pytest.raises(ValueError, match=r"^gpu=.* is not offered; choose one of A100 40GB, "):
        FitPlanner(gpu=gpu)

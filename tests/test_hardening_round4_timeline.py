"""Issue 39, fourth hardening round: the timeline's kinds of wrong number.

Full recomputation in groups of k layers (Megatron-LM's
``TransformerBlock._checkpointed_forward``, ``uniform``: groups of k from the
first layer, the last one smaller when k does not divide the layers), the
default ``recompute_modules`` under FP8, and a pipeline stage without layers.
"""

import itertools

import pytest

import actmem
from actmem import PRESETS, training_memory

P = PRESETS["llama2-7b"]
MIXTRAL = actmem.MOE_PRESETS["mixtral-8x7b"].with_(s=256)
HELD = ("activations", "logits_loss", "transient")


def _peak(model, **options):
    return training_memory(model, recompute="full", **options).stages[0].timeline.peak


@pytest.mark.parametrize("model, options", [
    (P.with_(flash_attention=False), {}), (P, {}), (P, dict(t=2, sequence_parallel=True)),
    (P.with_(flash_attention=True), dict(cp=2)),
    (MIXTRAL, dict(t=2, sequence_parallel=True))])
@pytest.mark.parametrize("k, r", [(2, 1), (3, 1), (3, 2), (4, 3)])
def test_a_smaller_last_group_leaves_the_peak_to_a_whole_group(model, options, k, r):
    # q*k + r layers: the backward of the last whole group holds q-1
    # checkpoints and k rebuilt layers, as the last group of q*k layers does
    for q in (1, 2):
        whole = _peak(model.with_(L=q * k), recompute_num_layers=k, **options)
        more = _peak(model.with_(L=q * k + r), recompute_num_layers=k, **options)
        assert {c: more.by_category[c] for c in HELD} == \
            {c: whole.by_category[c] for c in HELD}
        assert more.label == whole.label + ", in the recomputed group that holds the most"
        assert more.total > whole.total   # r more layers' weights, gradients and Adam states


def test_adding_a_layer_never_lowers_the_peak():
    model = P.with_(flash_attention=False)
    for k in (2, 3, 5):
        peaks = [training_memory(model.with_(L=L), recompute="full",
                                 recompute_num_layers=k).most_loaded.peak
                 for L in range(1, 3 * k + 2)]
        assert peaks == sorted(peaks), (k, peaks)


def test_llama2_7b_without_flash_at_k3_holds_a_whole_group():
    # 32 = 10*3 + 2: the peak is in group 9's backward (layers 27-29): 9
    # checkpoints, 2 rebuilt layers and the last one's rows; the last group
    # (30, 31), all the old answer looked at, holds 10 checkpoints, 1 rebuilt
    # layer and the last one's rows, as the last group of 22 layers at k=2
    model = P.with_(flash_attention=False)
    held = [training_memory(model.with_(L=L), recompute="full", recompute_num_layers=k)
            .most_loaded.timeline.peak.by_category["activations"] for L, k in ((32, 3), (22, 2))]
    full = sum(r.bytes for r in actmem.ledger_rows(model.layer(1, False, "none")))
    checkpoint = sum(r.bytes for r in actmem.ledger_rows(model.layer(1, False, "full")))
    assert held[0] - held[1] == full - checkpoint
    assert full - checkpoint > 1.47 * 2**30


@pytest.mark.parametrize("model", [P, P.with_(flash_attention=False), PRESETS["gpt3-175b"]])
@pytest.mark.parametrize("fp8, t, sequence_parallel", [
    ("hybrid", 1, False), ("e4m3", 2, False), ("hybrid", 2, True), (None, 2, True)])
def test_the_documented_default_recompute_modules_is_core_attn(model, fp8, t,
                                                               sequence_parallel):
    options = dict(t=t, sequence_parallel=sequence_parallel, fp8=fp8, recompute="selective")
    default = training_memory(model, **options)
    named = training_memory(model, recompute_modules=["core_attn"], **options)
    assert default.stages == named.stages
    assert default.stages[0].timeline.events == named.stages[0].timeline.events


def test_fp8_flash_core_attn_rebuilds_the_16_bit_attention_output():
    # the kept FP8 copy of O is not what the recomputed attention returns:
    # O in bf16 (s*b*h*2 bytes) and its softmax statistics (s*b*a*4)
    s, b, h, a = P.s, P.b, P.h, P.a
    run = training_memory(P, fp8="hybrid", recompute="selective",
                          recompute_modules=["core_attn"])
    assert run.stages[0].recompute_working_set == 2 * s * b * h + 4 * s * b * a


@pytest.mark.parametrize("recompute, k", [("none", 1), ("selective", 1), ("full", 1),
                                          ("full", 3)])
@pytest.mark.parametrize("model", [P, P.with_(flash_attention=False), MIXTRAL.with_(L=4)])
def test_a_stage_without_layers_keeps_and_recomputes_nothing(model, recompute, k):
    L = model.L
    for split in ([0, L], [L, 0]):
        run = training_memory(model, p=2, m=4, stage_layers=split, recompute=recompute,
                              recompute_num_layers=k)
        empty = run.stages[split.index(0)]
        assert (empty.layer_activations, empty.recompute_working_set) == (0, 0)
        assert min(min(e.bytes) for e in empty.timeline.events) >= 0


@pytest.mark.parametrize("options", [dict(precision="fp32"), dict(precision="autocast"),
                                     dict(use_torch_fsdp2=True, d=2, gradient_buffer="backward")])
@pytest.mark.parametrize("named", [["core_attn"], ("core_attn",)])
def test_the_default_named_modules_are_taken_wherever_none_is(options, named):
    # recompute_modules=None means ["core_attn"] (Megatron-LM's default): what takes
    # no named modules takes the default written out, with the same numbers
    model = P.with_(flash_attention=False)
    default = training_memory(model, recompute="selective", **options)
    assert training_memory(model, recompute="selective", recompute_modules=named,
                           **options).stages == default.stages
    with pytest.raises(ValueError, match=r"does not model recompute_modules=\['mlp'\]|"
                                         r"recompute_modules=\['mlp'\] with use_torch_fsdp2"):
        training_memory(model, recompute="selective", recompute_modules=["mlp"], **options)

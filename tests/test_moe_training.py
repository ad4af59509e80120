"""MoE in whole training jobs (issue 23, item 1): layers by kind on each stage,
etp != t, and the token dispatch's buffers in the timeline.

Every expected number is derived here by hand from the shapes, following
actmem/run/moments/moe_timeline.py's docstring (Megatron-LM's MoELayer.forward and
MoEAlltoAllTokenDispatcher).
"""

import json

import pytest

from actmem import (MOE_PRESETS, PRESETS, LayerConfig, ModelConfig, activation_memory,
                    expert_data_parallel, model_states, training_memory)
from actmem.views.cli import main
from actmem.views.fit_views import (D_CHOICES, STATES, FitPlanner, expert_choices,
                                    run_arguments, tensor_choices)
from actmem.views.train_cli import verdict
from actmem.run.moments.moe_dispatch import dispatch_buffers, dispatch_gradients
from actmem.run.moments.moe_timeline import (dense_twin, stack_parts, stage_moe_layers,
                                             stage_stacks, virtual_offsets)
from actmem.run.moments.timeline_events import LayerMoments
from actmem.layer.moe_copies import hot_rank_load

S, H, A, E, K, FE = 64, 64, 4, 4, 2, 32
TINY = ModelConfig(s=S, b=1, h=H, a=A, L=4, vocab_size=256, activation="swiglu",
                   ffn_hidden_size=96, num_experts=E, moe_router_topk=K,
                   moe_ffn_hidden_size=FE, moe_layer_freq=(0, 1, 1, 0), norm="rmsnorm",
                   bias=False, tied_embeddings=False, positions="rotary", dropout=False,
                   flash_attention=True)
ROW = 2 * H  # bytes of one bf16 token copy


def moe_layer(t=1, etp=None, **extra):
    return LayerConfig(S, 1, H, A, t, sequence_parallel=t > 1, activation="swiglu",
                       num_experts=E, moe_router_topk=K, moe_ffn_hidden_size=FE, etp=etp,
                       dropout=False, flash_attention=True, **extra)


def test_one_rank_holds_the_permuted_tokens_and_the_experts_output_and_its_unsort():
    R = S * K  # copies this rank sends: its s*b tokens, k each
    assert dispatch_buffers(moe_layer()) == {
        "permuted tokens": R * ROW, "dispatched probabilities": 2 * R,
        "experts' output": R * ROW, "unsorted output": R * ROW}


def test_one_expert_per_rank_sorts_nothing_and_the_all_to_all_output_is_the_experts_input():
    R = S * K
    assert dispatch_buffers(moe_layer(), ep=E) == {
        "permuted tokens": R * ROW, "experts' output": R * ROW, "all-to-all back": R * ROW}


def test_expert_tensor_parallelism_gathers_then_reduce_scatters():
    R, x = S // 2 * K, 2   # t=2: each rank routes its s/t tokens
    assert dispatch_buffers(moe_layer(t=2), ep=2) == {
        "permuted tokens": R * ROW, "all-to-all output": R * ROW,
        "dispatched probabilities": 2 * R, "experts' output": R * x * ROW,
        "unsorted output": R * x * ROW, "reduce-scatter output": R * ROW}


def test_the_allgather_dispatcher_holds_the_gathered_probabilities_until_unpermute():
    """t = 2, ep = 2, etp = t: each rank gathers G = s/t * etp * ep tokens
    and runs the copies of E/ep experts, s/t * k * etp of them."""
    G, copies = S // 2 * 2 * 2, S // 2 * K * 2
    layer = moe_layer(t=2, moe_token_dispatcher_type="allgather")
    assert dispatch_buffers(layer, ep=2) == {
        "gathered probabilities": 2 * G * E, "local routing map": G * E // 2,
        "experts' output": copies * ROW, "unpermuted output": G * ROW}
    fp32 = moe_layer(t=2, moe_token_dispatcher_type="allgather", moe_router_dtype="fp32")
    assert dispatch_buffers(fp32, ep=2) == {   # token_combine's fp32 cast is the busier
        "gathered probabilities": 4 * G * E, "local routing map": G * E // 2,
        "unpermuted output": G * ROW, "cast for the reduce-scatter": 2 * G * ROW}
    assert dispatch_gradients(layer, ep=2)["combine gradients"] == (G + copies) * ROW
    assert dispatch_gradients(fp32, ep=2)["combine gradients"] == 3 * G * ROW


def test_the_allgather_dispatcher_gathers_its_tokens_into_megatron_s_buffer():
    from actmem.run.moments.framework import workspace_bytes
    gather = TINY.with_(moe_token_dispatcher_type="allgather")
    assert actmem_workspace(gather, ep=2) - actmem_workspace(TINY, ep=2) == S * 2 * 2 * H
    assert actmem_workspace(gather, ep=1) == actmem_workspace(TINY, ep=1)  # nothing gathered
    te = workspace_bytes((9, 0))["Transformer Engine cuBLASLt workspace"]
    assert workspace_bytes((9, 0), grouped_gemm=True)[
        "Transformer Engine grouped-GEMM workspaces (4 streams)"] == 4 * te == 4 * 32 * 2**20
    assert workspace_bytes((8, 0), grouped_gemm=True)[
        "Transformer Engine grouped-GEMM workspaces (4 streams)"] == 4 * 4 * 2**20


def actmem_workspace(model, ep, **options):
    from actmem.run.step_setup import step_setup
    from actmem import Job
    return step_setup(Job(model, d=ep, ep=ep, **options)).workspace


def test_grouped_gemm_needs_experts_and_transformer_engine():
    from actmem import Job
    assert actmem_workspace(TINY, 1, moe_grouped_gemm=True) - actmem_workspace(TINY, 1) \
        == 4 * 32 * 2**20
    with pytest.raises(ValueError, match="moe_grouped_gemm=True needs an MoE model"):
        Job(PRESETS["llama2-7b"], moe_grouped_gemm=True)
    with pytest.raises(ValueError, match="moe_grouped_gemm=True needs an MoE model"):
        Job(TINY, moe_grouped_gemm=True, transformer_engine=False)


def test_gelu_experts_have_two_matrices_each():
    from actmem.run.job.parameters import parameter_count
    gelu, swiglu = (parameter_count(TINY.with_(activation=a)) for a in ("gelu", "swiglu"))
    assert swiglu.experts - gelu.experts == E * H * FE  # fc1's second half of SwiGLU


def test_the_backward_holds_the_output_gradient_and_the_largest_pair_of_the_reverse_chain():
    R = S * K
    assert dispatch_gradients(moe_layer()) == {      # unpermute's R, the unsort's R
        "layer output gradient": 2 * S * H, "combine gradients": 2 * R * ROW}
    assert dispatch_gradients(moe_layer(), ep=E) == {  # unpermute's R, all-to-all's R
        "layer output gradient": 2 * S * H, "combine gradients": 2 * R * ROW}
    R2 = S // 2 * K   # t=etp=2, ep=4: R, R, 2R (all-gather): the pair R + 2R
    assert dispatch_gradients(moe_layer(t=2), ep=4)["combine gradients"] == 3 * R2 * ROW


def test_dispatch_refuses_a_dense_layer_and_an_ep_that_does_not_divide_the_experts():
    with pytest.raises(ValueError, match="c must be an MoE LayerConfig"):
        dispatch_buffers(LayerConfig(S, 1, H, A))
    with pytest.raises(ValueError, match="ep=3 must be a positive int dividing num_experts=4"):
        dispatch_buffers(moe_layer(), ep=3)


def layer_bytes(moe, recompute="none", t=1, etp=None):
    model = TINY if moe else dense_twin(TINY)
    extra = {"moe": True, "etp": etp} if moe else {}
    c = model.layer(t, t > 1, recompute, **extra)
    return activation_memory(**vars(c)).total


@pytest.mark.parametrize("p", [1, 2, 4])
def test_each_stage_keeps_its_own_layers_of_each_kind(p):
    r = training_memory(TINY, p=p, m=p)
    pattern = TINY.moe_pattern()
    for i, stage in enumerate(r.stages):
        mine = pattern[i * 4 // p:(i + 1) * 4 // p]
        one_pass = sum(layer_bytes(kind) for kind in mine)
        assert stage.layer_activations == (p - i) * one_pass   # 1F1B: p - i passes


def test_a_model_of_dense_layers_only_runs_as_its_dense_twin():
    zero = TINY.with_(moe_layer_freq=(0, 0, 0, 0))
    for run in ({"p": 2, "m": 4}, {"recompute": "full", "recompute_num_layers": 2},
                {"p": 2, "v": 2, "m": 4, "schedule": "interleaved-zb"}):
        a, b = training_memory(zero, **run), training_memory(dense_twin(TINY), **run)
        assert [s.timeline for s in a.stages] == [s.timeline for s in b.stages]


def test_the_forward_dispatch_event_adds_the_buffers_to_the_rows_alive_then():
    r = training_memory(TINY, m=1, create_attention_mask_in_dataloader=False)
    stage = r.stages[0]
    event = next(e for e in stage.timeline.events if "token dispatch" in e.label)
    before = next(e for e in stage.timeline.events if e.label == "before the step")
    # the last MoE layer is layer 2: layers 0 (dense) and 1 (MoE) kept, layer 2's
    # rows but the dropout mask (none here: no dropout), token ids of the embedding
    moe = TINY.layer(moe=True)
    rows = activation_memory(**vars(moe)).total
    expect = 8 * S + layer_bytes(False) + layer_bytes(True) + rows
    assert event.by_category["activations"] == expect
    assert event.by_category["transient"] == sum(dispatch_buffers(moe).values())
    assert event.total - before.total == expect + sum(dispatch_buffers(moe).values())


def test_the_backward_of_a_last_moe_layer_holds_its_combine_gradients():
    model = TINY.with_(moe_layer_freq=(0, 1, 1, 1))
    stage = training_memory(model, m=1).stages[0]
    event = next(e for e in stage.timeline.events if "MoE combine" in e.label)
    assert event.by_category["transient"] == sum(dispatch_gradients(model.layer(moe=True)).values())
    assert event.by_category["activations"] == 8 * S + layer_bytes(False) + 3 * layer_bytes(True)


def test_etp_other_than_t_takes_its_rows_and_its_states():
    run = dict(t=2, d=2, ep=2, sequence_parallel=True)
    for etp in (1, 2):
        r = training_memory(TINY, etp=etp, **run)
        assert r.stages[0].layer_activations == (2 * layer_bytes(False, t=2)
                                                 + 2 * layer_bytes(True, t=2, etp=etp))
        assert r.stages[0].weights == model_states(TINY, etp=etp, accounting="megatron",
                                                   **{k: run[k] for k in ("t", "d", "ep")}).weights
    one = training_memory(TINY, etp=1, **run).stages[0]
    two = training_memory(TINY, etp=2, **run).stages[0]
    assert one.layer_activations < two.layer_activations and one.weights > two.weights


def test_interleaved_chunks_hold_the_layers_of_their_virtual_stages():
    assert virtual_offsets(((1, 1), (1, 1)), False) == [[0, 2], [1, 3]]
    assert virtual_offsets(((1, 1), (1, 1)), True) == [[0, 3], [1, 2]]
    kinds, pattern, split = {0: "dense", 1: "MoE"}, (0, 1, 1, 0), ((1, 1), (1, 1))
    assert stage_stacks(pattern, split, 0, kinds) == [("dense",), ("MoE",)]
    assert stage_stacks(pattern, split, 1, kinds) == [("MoE",), ("dense",)]
    assert stage_stacks(pattern, split, 1, kinds, v_shaped=True) == [("MoE",), ("MoE",)]
    r = training_memory(TINY, p=2, v=2, m=2, schedule="interleaved")
    one = training_memory(TINY.with_(moe_layer_freq=(0, 1, 0, 1)), p=2, v=2, m=2,
                          schedule="interleaved")
    # stage 1 holds layers 1 and 3: MoE and dense, or two MoE layers
    assert one.stages[1].layer_activations - r.stages[1].layer_activations == (
        layer_bytes(True) - layer_bytes(False)) * (
        r.stages[1].layer_activations // (layer_bytes(True) + layer_bytes(False)))


def test_mixed_layers_under_recomputation_rebuild_the_largest_layer_or_group():
    d = LayerMoments(kept=10, full=30, to_softmax=0, scores=0, checkpoint=4,
                     recompute="full", group=2)
    m = LayerMoments(kept=12, full=50, to_softmax=0, scores=0, checkpoint=4,
                     recompute="full", group=2)
    assert stack_parts((d, m, m), "selective", 1) == (34, 38)
    assert stack_parts((d, m, m), "full", 2) == (8, 30 + 50 - 4)   # the group (d, m)
    assert stack_parts((), "none", 1) == (0, 0)


def test_invalid_expert_sizes_name_the_argument():
    with pytest.raises(ValueError, match="ep=3 must divide num_experts=4"):
        training_memory(TINY, ep=3)
    with pytest.raises(ValueError, match=r"ep\*etp=4 \(ep=2, etp=2\) must divide t\*d=2"):
        training_memory(TINY, t=2, ep=2, etp=2, sequence_parallel=True)


MIXTRAL = MOE_PRESETS["mixtral-8x7b"]


def test_the_planner_offers_expert_sizes_that_divide_the_experts_and_t_times_d():
    assert expert_choices(MIXTRAL, 2, 2) == ([1, 2, 4], [1, 2, 4])
    assert expert_choices(MIXTRAL, 2, 2, ep=4) == ([1, 2, 4], [1])
    assert expert_choices(MIXTRAL, 4, 8, ep=8) == ([1, 2, 4, 8], [1, 2, 4])  # f_e = 14336
    assert expert_choices(PRESETS["llama2-7b"], 8, 8) == ([1], [1])
    assert tensor_choices(MIXTRAL, False) == [1]   # MoE with t > 1 needs sequence parallelism
    assert tensor_choices(MIXTRAL, True) == [1, 2, 4, 8]


def test_every_offered_expert_layout_is_one_the_states_accept():
    for model in MOE_PRESETS.values():
        for t in tensor_choices(model, True):
            for d in D_CHOICES:
                eps, _ = expert_choices(model, t, d)
                for ep in eps:
                    for etp in expert_choices(model, t, d, ep)[1]:
                        assert expert_data_parallel(model, t, d, ep, etp) >= 1


def test_the_planner_runs_an_moe_preset_with_its_expert_sizes():
    x = FitPlanner()
    x.controls["model"].value = "mixtral-8x7b"
    assert x.controls["sequence_parallel"].value is True
    x.controls["ep"].value, x.controls["etp"].value = 4, 1
    values = {**x.values(), "states": STATES[x.values()["states"]]}
    arguments = run_arguments(values)
    assert (arguments["ep"], arguments["etp"]) == (4, 1)
    result = training_memory(x.model(), **arguments)
    assert x.readouts["verdict"].value == verdict(result, gpu=values["gpu"])
    assert "token dispatch" in result.most_loaded.timeline.peak.label


def test_the_train_command_takes_ep_and_etp(capsys):
    main(["train", "--preset", "mixtral-8x7b", "-t", "2", "-d", "4", "--ep", "4", "--etp", "1",
          "--sequence-parallel", "--json"])
    out = json.loads(capsys.readouterr().out)
    r = training_memory(MIXTRAL, t=2, d=4, ep=4, etp=1, sequence_parallel=True)
    assert out["stages"][0]["peak"] == r.stages[0].peak
    assert (out["config"]["ep"], out["config"]["etp"]) == (4, 1)
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--preset", "mixtral-8x7b", "--ep", "3"])
    assert exit_.value.code == 2
    assert "ep=3 must divide num_experts=8; valid ep: 1, 2, 4, 8" in capsys.readouterr().err


def test_the_new_moments_read_in_chinese():
    from actmem.language import chinese
    from actmem.views.fit_figures import event_label
    stage = training_memory(TINY.with_(moe_layer_freq=(0, 1, 1, 1)), m=1).stages[0]
    labels = [e.label for e in stage.timeline.events if "MoE" in e.label]
    assert len(labels) == 2
    assert all("MoE" in event_label(x, chinese) and "micro-batch" not in event_label(x, chinese)
               for x in labels)


def test_interleaved_stages_hold_the_experts_of_their_own_chunks():
    model = TINY.with_(L=12, moe_layer_freq=2)   # MoE layers 0, 2, 4, ...: 1,0,1 | 0,1,0 | ...
    split = ((3, 3), (3, 3))
    assert stage_moe_layers(model.moe_pattern(), split) == (4, 2)   # layers 0-2 and 6-8
    r = training_memory(model, p=2, v=2, m=2, schedule="interleaved")
    for i, n_moe in enumerate((4, 2)):
        states = model_states(model, p=2, accounting="megatron", stage=i, moe_layers=(4, 2))
        assert r.stages[i].weights == states.weights
        assert states.expert_parameters == n_moe * E * 3 * H * FE
    with pytest.raises(ValueError, match=r"moe_layers=\(5, 2\) must give each of the 2 stages"):
        model_states(model, p=2, moe_layers=(5, 2))


def test_the_docstring_example_runs():
    import doctest

    from actmem.run.moments import moe_dispatch
    result = doctest.testmod(moe_dispatch)
    assert result.attempted > 0 and result.failed == 0


def test_one_expert_peaks_at_the_unpermute_beside_its_zeros():
    c = LayerConfig(S, 1, H, A, activation="swiglu", num_experts=1, moe_router_topk=1,
                    moe_router_pre_softmax=True, moe_ffn_hidden_size=FE, dropout=False,
                    flash_attention=True)
    # the permuted tokens and probabilities are the expert's own input (ledger rows)
    assert dispatch_buffers(c) == {"experts' output": S * ROW, "unpermuted output": S * ROW}


def test_full_recomputation_runs_the_dispatch_again_in_the_backward():
    model = TINY.with_(moe_layer_freq=(0, 1, 1, 1))
    stage = training_memory(model, m=1, recompute="full", recompute_num_layers=4).stages[0]
    again = next(e for e in stage.timeline.events if "dispatch, recomputing" in e.label)
    combine = next(e for e in stage.timeline.events if "MoE combine" in e.label)
    moe = model.layer(moe=True)
    # the group's four layers rebuilt, all rows alive (no dropout: none after the block),
    # beside the token ids (the output layer's inputs are freed by then)
    assert again.by_category["activations"] == combine.by_category["activations"]
    assert combine.by_category["activations"] == 8 * S + layer_bytes(False) + 3 * layer_bytes(True)
    assert again.by_category["transient"] == sum(dispatch_buffers(moe).values())
    from actmem.language import chinese
    from actmem.views.fit_figures import event_label
    assert event_label(again.label, chinese).endswith("最后一层的 token 分发，正在重计算")


def test_mixed_model_takes_moe_recompute_modules_on_its_moe_layers_only():
    from dataclasses import asdict
    lite = MOE_PRESETS["deepseek-v2-lite"]  # first layer dense, the rest MoE
    names = ("moe_act",)
    run = training_memory(lite, recompute="selective", recompute_modules=list(names))

    def layer(moe):
        return activation_memory(**asdict(lite.layer(1, False, "selective", moe=moe,
                                                     recompute_modules=names))).total
    pattern = lite.moe_pattern()
    assert run.stages[0].layer_activations == \
        pattern.count(0) * layer(False) + pattern.count(1) * layer(True)
    assert layer(False) == activation_memory(**asdict(lite.layer(
        1, False, "selective", moe=False, recompute_modules=()))).total  # no name applies


def test_a_hot_expert_loads_its_rank_by_the_hand_derivation():
    """E = 8, k = 2, f = 2: the hot expert takes 2 mu, the other seven share
    the rest, 6/7 mu each. One expert per rank (ep = 8): the rank takes 2x;
    two per rank (ep = 4): (2 + 6/7) / 2 = 10/7; ep = 1: every copy stays."""
    assert hot_rank_load(2, 8, 2, 8) == 2.0
    assert hot_rank_load(2, 8, 2, 4) == pytest.approx(10 / 7, rel=1e-15)
    assert hot_rank_load(2, 8, 2, 1) == 1.0
    assert hot_rank_load(4, 8, 2, 8) == 4.0   # E/k: the expert takes every token once
    for bad in (0.5, 4.01, float("nan"), True, "2"):
        with pytest.raises(ValueError, match="moe_hot_expert"):
            hot_rank_load(bad, 8, 2, 8)


def test_a_hot_expert_moves_the_received_rows_and_buffers_only():
    """ep = E = 4, one expert per rank, f = 2: the rank's experts receive
    twice the copies; what it sends (permutation indices, its permuted
    tokens, the all-to-all back) stays its own."""
    R = S * K
    hot = moe_layer(moe_rank_load=2.0)
    rows = {r.key: r.bytes for r in activation_memory(**vars(hot)).rows}
    base = {r.key: r.bytes for r in activation_memory(**vars(moe_layer())).rows}
    for key in ("expert_fc1_input", "expert_fc1_output", "expert_probs", "expert_fc2_input"):
        assert rows[key] == 2 * base[key], key
    for key in ("permute_index", "permute_probs_index", "router_probs", "moe_input"):
        assert rows[key] == base[key], key
    assert dispatch_buffers(hot, ep=E) == {
        "permuted tokens": R * ROW, "experts' output": 2 * R * ROW, "all-to-all back": R * ROW}


def test_the_hot_expert_what_if_raises_the_peak_of_a_job():
    mixtral = MOE_PRESETS["mixtral-8x7b"]
    job = dict(t=2, sequence_parallel=True, p=2, d=4, ep=4, m=8)
    peaks = [max(s.peak for s in training_memory(mixtral, moe_hot_expert=f, **job).stages)
             for f in (1, 2, 4)]
    assert peaks[0] < peaks[1] < peaks[2]
    assert training_memory(mixtral, moe_hot_expert=1.0, **job).stages[0].peak == \
        training_memory(mixtral, **job).stages[0].peak
    with pytest.raises(ValueError, match=r"moe_hot_expert=2 needs an MoE model"):
        training_memory(PRESETS["llama2-7b"], moe_hot_expert=2)
    with pytest.raises(ValueError, match=r"moe_hot_expert=5 must be from 1 \(balanced\) to "
                                         r"E/k=4"):
        training_memory(mixtral, moe_hot_expert=5, **job)
    with pytest.raises(ValueError, match="the imbalance what-if is for dropless routing"):
        training_memory(mixtral.with_(moe_expert_capacity_factor=1.0), moe_hot_expert=2, **job)


def test_a_numpy_hot_expert_is_stored_as_python_s_float():
    import numpy as np
    from actmem import Job
    job = Job(MOE_PRESETS["mixtral-8x7b"], t=2, sequence_parallel=True, d=4, ep=4,
              moe_hot_expert=np.float32(1.5))
    assert type(job.moe_hot_expert) is float and job.moe_hot_expert == 1.5
    with pytest.raises(TypeError, match="moe_grouped_gemm must be True or False, got 'yes'"):
        Job(MOE_PRESETS["mixtral-8x7b"], moe_grouped_gemm="yes")

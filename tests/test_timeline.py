"""The timeline: one exact test per mechanism, and a measured Megatron-LM run."""

import dataclasses
import json
from importlib import resources

import pytest

import actmem
from actmem import PRESETS, ModelConfig, training_memory
from actmem.run.moments.framework import te_cublas_workspace, torch_cublas_workspace, workspace_bytes

MIB = 2**20
GPT = ModelConfig(s=512, b=2, h=256, a=4, L=4, vocab_size=1000)  # stored map, dropout
V = GPT.padded_vocab(1)  # 1024
SBV = 512 * 2 * V
FREED = 2 * 2 * 512 * 2 * 256 + 9 * 512 * 2 + 4 * SBV  # the output layer's inputs,
# the targets and the saved softmax: freed before the layers' backward
TIED = 2 * V * 256  # the tied output weight's bf16 gradient, waiting for the embedding's
UNFUSED = dict(gradient_accumulation_fusion=False)  # weight gradients are tensors
SBH = 512 * 2 * 256
MLP = 2 * SBH + 2 * SBH + 2 * 4 * SBH + 2 * 4 * 256 * 256  # at the MLP's second linear's
# backward: the layer output's and the dropout's gradients, its input's and weight's


def events(result, stage=0):
    return {e.label: e for e in result.stages[stage].timeline.events}


def test_the_loss_holds_the_logits_and_their_fp32_copy():
    r = training_memory(GPT, create_attention_mask_in_dataloader=False)
    e = events(r)
    # Megatron's .float() copy (4 bytes) beside the bf16 logits (2), then the
    # fp32 softmax (4) stays: the loss moment is 2*s*b*V above what stays.
    gap = e["loss of micro-batch 0"].total - e["after the forward of micro-batch 0"].total
    assert gap == 2 * SBV
    assert e["loss of micro-batch 0"].by_category["logits_loss"] == 6 * SBV
    assert r.stages[0].timeline.peak.label == "loss of micro-batch 0"


def test_the_loss_gradient_by_implementation():
    after = "after the forward of micro-batch 0"
    # fused: one chunk's logits (bf16) and their fp32 copy, Liger-Kernel's
    # chunk of ceil(1024 / ceil(V / h)) = 256 tokens; the output layer's
    # input gradient (2sbh) and weight gradient (2Vh), made inside the loss
    fused = (2 + 4) * 256 * V + 2 * 512 * 2 * 256 + 2 * V * 256
    for loss, logits_bytes, extra in (("vocab_parallel", 4, 2 * SBV),   # cast back to bf16
                                      ("torch", 4, 8 * SBV),            # two fp32 gradients
                                      ("torch", 2, 4 * SBV),
                                      ("fused", 4, fused)):
        e = events(training_memory(GPT, loss=loss, logits_bytes=logits_bytes))
        gap = e["loss backward of micro-batch 0"].total - e[after].total
        assert gap == extra, loss
    with pytest.raises(ValueError, match="vocab_parallel.*logits_bytes=4"):
        training_memory(GPT, logits_bytes=2)


def test_gradients_persistent_or_created_in_backward():
    states = actmem.model_states(GPT, accounting="megatron")
    persistent = events(training_memory(GPT, m=2))
    made = events(training_memory(GPT, m=2, gradient_buffer="backward"))
    first = "before the step"
    assert persistent[first].by_category["gradients"] == states.gradients
    assert made[first].by_category["gradients"] == 0
    assert made["after the forward of micro-batch 0"].by_category["gradients"] == 0
    assert made["after the backward of micro-batch 0"].by_category["gradients"] == states.gradients
    with pytest.raises(ValueError, match="gradient_buffer"):
        training_memory(GPT, gradient_buffer="lazy")


def test_workspaces_follow_pytorch_and_transformer_engine():
    assert torch_cublas_workspace((9, 0)) == 32 * MIB
    assert torch_cublas_workspace((8, 0)) == 8 * MIB + 128 * 1024
    assert torch_cublas_workspace((8, 0), ":4096:8") == 32 * MIB
    assert te_cublas_workspace((9, 0)) == 32 * MIB and te_cublas_workspace((8, 0)) == 4 * MIB
    a100 = training_memory(GPT, gpu_memory="A100 80GB", gradient_accumulation_fusion=False)
    start = events(a100)["before the step"].by_category["workspace"]   # no dummy gradients
    assert start == sum(workspace_bytes((8, 0)).values()) == 2 * (8 * MIB + 128 * 1024) + 4 * MIB
    mi300x = events(training_memory(GPT, gpu_memory="MI300X",
                                    gradient_accumulation_fusion=False))["before the step"]
    assert mi300x.by_category["workspace"] == 2 * 128 * MIB  # hipBLAS on gfx942, no TE
    bare = training_memory(GPT, transformer_engine=False)
    assert events(bare)["before the step"].by_category["workspace"] == 64 * MIB
    with pytest.raises(ValueError, match="cublas_workspace_config"):
        torch_cublas_workspace((9, 0), "4096")


def test_the_data_loaders_mask_lives_through_each_forward_on_data_stages():
    on = training_memory(GPT, p=2, m=2)
    off = training_memory(GPT, p=2, m=2, create_attention_mask_in_dataloader=False)
    mask = 2 * 512 * 512
    scores = "forward of micro-batch 1: attention scores beside the softmax"
    for stage in (0, 1):
        gap = events(on, stage)[scores].total - events(off, stage)[scores].total
        assert gap == mask
    label = "end of the forward of micro-batch 1, its batch still loaded"
    assert events(on)[label].by_category["transient"] == mask


def test_scores_beside_the_softmax_and_the_softmax_gradient():
    r = training_memory(GPT, create_attention_mask_in_dataloader=False, **UNFUSED)
    e = events(r)
    layer = actmem.activation_memory(512, 2, 256, 4)
    rows = {row.key: row.bytes for row in layer.rows}
    upto = list(rows)[:list(rows).index("softmax_output") + 1]
    scores = rows["softmax_output"]  # the map, 2 bytes per element: 2*a*s*s*b
    assert scores == 2 * 4 * 512 * 512 * 2
    start = e["before the step"].total
    forward = e["forward of micro-batch 0: attention scores beside the softmax"].total
    embedding = 8 * 512 * 2 + 512 * 2 * 256  # token ids, dropout mask
    assert forward - start == embedding + 3 * layer.total + sum(rows[k] for k in upto) + scores
    backward = e["backward of micro-batch 0: softmax gradient"]
    held = e["after the forward of micro-batch 0"].total
    assert backward.total - held == (2 * scores - (layer.total - sum(rows[k] for k in upto))
                                     - FREED + TIED)


def test_full_recomputation_rebuilds_a_layer_from_its_checkpoint():
    flash = GPT.with_(flash_attention=True)
    r = training_memory(flash, recompute="full", create_attention_mask_in_dataloader=False,
                        **UNFUSED)
    e = events(r)
    full = actmem.activation_memory(512, 2, 256, 4, flash_attention=True).total
    checkpoint = 2 * 512 * 2 * 256
    gap = (e["backward of micro-batch 0: last layer, recomputing"].total
           - e["after the forward of micro-batch 0"].total)
    assert gap == full - checkpoint - FREED + TIED  # the checkpoint is the layer's input
    assert r.stages[0].recompute_working_set == full - checkpoint
    # the loss and the recomputed layer never coexist: the peak is the
    # recomputed layer's MLP backward, beside its gradients (MLP below)
    loss = e["loss of micro-batch 0"].total
    mlp = e["backward of micro-batch 0: the last layer's MLP"].total
    assert mlp - e["after the forward of micro-batch 0"].total == gap + MLP
    assert r.stages[0].peak == mlp > loss
    assert r.stages[0].peak < loss + r.stages[0].recompute_working_set  # not a sum


def test_peak_is_an_event_and_at_most_the_sum_of_parts_plus_transients():
    r = training_memory(PRESETS["llama2-7b"], t=2, p=2, d=2, m=8, gpu_memory="A100 80GB")
    for stage in r.stages:
        assert stage.peak == max(e.total for e in stage.timeline.events)
        assert stage.needed == stage.peak + stage.reserve
    assert r.margin == 81920 * MIB - r.most_loaded.needed


def test_megatron_lm_gpt3_7b_tp4_measured_on_h100():
    data = json.loads(resources.files("actmem").joinpath("data/megatron_runs.json").read_text())
    run = data["runs"]["gpt3_7b_tp4_pp1_memory_speed"]
    r = training_memory(ModelConfig(**run["model"]), gpu_memory=run["gpu"], **run["run"],
                        reserve=0)   # the allocator's own figure: no reserve
    stage = r.stages[0]   # launched without gradient accumulation fusion: no dummy gradients
    measured = run["mem_max_allocated_bytes"]
    # parts: states exact, activations within 0.1 %; the sum is 2.3 % low
    assert stage.total == 55_817_191_424
    # the peak: + bf16 logits beside their fp32 copy (2sbV/t), the 128 MiB mask,
    # 96 MiB of workspaces
    assert stage.peak == 55_817_191_424 + 1_077_936_128 + 128 * MIB + 96 * MIB
    assert abs(stage.peak - measured) / measured < 0.001
    assert stage.timeline.peak.label == "loss of micro-batch 0"
    after = stage.timeline.events[0].total   # before the step: states and workspaces
    assert abs(after - run["mem_allocated_bytes"]) / run["mem_allocated_bytes"] < 0.001


def test_megatron_lm_gpt3_7b_pp4_interleaved_last_stage_within_2_percent():
    data = json.loads(resources.files("actmem").joinpath("data/megatron_runs.json").read_text())
    run = data["runs"]["gpt3_7b_tp1_pp4_memory_speed"]
    r = training_memory(ModelConfig(**run["model"]), gpu_memory=run["gpu"], **run["run"],
                        reserve=0)   # the allocator's own figure: no reserve
    stage = r.stages[run["stage"]]
    measured = run["mem_max_allocated_bytes"]
    assert abs(stage.peak - measured) / measured < 0.02
    assert stage.timeline.peak.label == "loss of micro-batch 0, chunk 7"
    # the sum of parts misses the loss's copies and buffers: 4.5 % low
    assert (measured - stage.total) / measured > 0.04


MAP = 2 * 4 * 512 * 512  # b*a*s*s elements of one attention map
BF16_LAYER = actmem.activation_memory(512, 2, 256, 4).total


def test_fp32_doubles_every_16_bit_row_and_keeps_16_bytes_per_parameter():
    r = training_memory(GPT, precision="fp32", loss="torch", gradient_buffer="backward",
                        create_attention_mask_in_dataloader=False)
    n = actmem.parameter_count(GPT, vocab=V)
    stage = r.stages[0]
    assert (stage.weights, stage.gradients, stage.optimizer) == (4 * n, 4 * n, 8 * n)
    masks = MAP + 2 * SBH   # the 1-byte dropout masks stay 1 byte
    layer = 2 * (BF16_LAYER - masks) + masks
    e = events(r)
    after = e["after the forward of micro-batch 0"].by_category
    assert after["activations"] == 8 * 1024 + SBH + 4 * layer + 4 * SBH + 4 * SBH + 9 * 1024
    assert after["logits_loss"] == 4 * SBV           # the saved fp32 log-probs
    # fp32 logits and the log-probs: .float() of fp32 logits is the same tensor
    assert e["loss of micro-batch 0"].by_category["logits_loss"] == 8 * SBV
    # the tied output weight's fp32 gradient waits for the embedding's
    softmax = e["backward of micro-batch 0: softmax gradient"].by_category
    assert softmax["gradients"] == 4 * V * 256   # .grad is made in this backward


def test_autocast_rows_follow_pytorchs_op_lists_and_cached_weight_copies():
    kw = dict(precision="autocast", loss="torch", create_attention_mask_in_dataloader=False)
    n = actmem.parameter_count(GPT, vocab=V)
    weights = 2 * 12 * 256 * 256    # one layer's linear weights, bf16 copies
    biases = 2 * 7 * 256            # the QKV and fc1 biases (column-parallel)
    output = 2 * V * 256            # the tied output layer's weight
    for device, fused, extra in (("cuda", True, 4 * SBH + 2 * MAP),   # fp32 norms, softmax
                                 ("cuda", False, 8 * SBH + 2 * MAP),  # 3 casts of the input
                                 ("cpu", False, 8 * SBH)):            # CPU: softmax bf16
        r = training_memory(GPT, autocast_device=device, fused_projections=fused, **kw)
        e = events(r)
        stage = r.stages[0]
        assert stage.weights == 4 * n and stage.optimizer == 8 * n
        after = e["after the forward of micro-batch 0"].by_category
        # fp32 final norm input (the residual stream), bf16 output layer input
        assert after["activations"] == (8 * 1024 + SBH + 4 * (BF16_LAYER + extra)
                                        + 4 * SBH + 2 * SBH + 9 * 1024)
        assert after["weights"] == 4 * n + 4 * weights + output      # saved by the linears
        loss = e["loss of micro-batch 0"].by_category
        assert loss["weights"] == 4 * n + 4 * (weights + biases) + output  # still cached
        # bf16 logits, their fp32 copy and the fp32 log-probs
        assert loss["logits_loss"] == (2 + 4 + 4) * SBV


def test_the_tied_output_weights_gradient_waits_only_beside_the_embedding():
    label = "backward of micro-batch 0: softmax gradient"
    untied = GPT.with_(tied_embeddings=False)
    for model, p, stage, extra in ((GPT, 1, 0, TIED), (untied, 1, 0, 0), (GPT, 2, 1, 0)):
        r = training_memory(model, p=p, **UNFUSED)
        grads = events(r, stage)[label].by_category["gradients"]
        assert grads == r.stages[stage].gradients + extra


def test_gradient_accumulation_fusion_makes_no_weight_gradient_tensors():
    """Megatron-LM's default adds weight gradients into main_grad inside the
    GEMM: no tied gradient waits, the MLP's moment has no weight gradient;
    Transformer Engine keeps one dummy per weight shape instead."""
    fused, unfused = (events(training_memory(GPT, gradient_accumulation_fusion=f))
                      for f in (None, False))
    mlp = "backward of micro-batch 0: the last layer's MLP"
    # QKV 768 x 256, proj 256 x 256, fc1 1024 x 256 (the output layer's shape too), fc2
    dummies = 2 * 256 * (768 + 256 + 1024 + 1024)
    assert unfused[mlp].total - fused[mlp].total == TIED + 2 * 4 * 256 * 256 - dummies
    with pytest.raises(ValueError, match="gradient_accumulation_fusion=True contradicts"):
        training_memory(GPT, gradient_buffer="backward", gradient_accumulation_fusion=True)
    with pytest.raises(TypeError, match="gradient_accumulation_fusion"):
        training_memory(GPT, gradient_accumulation_fusion="yes")


def test_precision_options_refuse_what_contradicts():
    with pytest.raises(ValueError, match="precision.*'fp64'"):
        training_memory(GPT, precision="fp64")
    with pytest.raises(ValueError, match="precision='fp32' does not model logits_bytes=2 .*fp32 logits"):
        training_memory(GPT, precision="fp32", logits_bytes=2, loss="torch")
    with pytest.raises(ValueError, match="loss_chunk_tokens=64 is for loss='fused'"):
        training_memory(GPT, loss_chunk_tokens=64)
    with pytest.raises(ValueError, match="autocast_device.*'tpu'"):
        training_memory(GPT, precision="autocast", autocast_device="tpu")
    with pytest.raises(ValueError, match="loss_chunk_tokens"):
        training_memory(GPT, loss="fused", loss_chunk_tokens=0)


def test_steady_state_moments_repeat_with_each_micro_batch_named():
    """The moments inside a pass are kept by the state they depend on
    (``_Step.moments``): in 1F1B's steady state every micro-batch's loss
    moment has the same bytes, and each event still names its own."""
    r = training_memory(GPT, p=2, m=6, create_attention_mask_in_dataloader=False)
    line = r.stages[1].timeline.events  # the last stage: F0 B0 F1 B1 ...
    losses = [e for e in line if e.label.startswith("loss of micro-batch")]
    assert [e.label for e in losses] == [f"loss of micro-batch {j}" for j in range(6)]
    assert [e.op for e in losses] == [f"F{j}" for j in range(6)]
    assert len({e.bytes for e in losses}) == 1
    first = events(training_memory(GPT, p=2, m=1, create_attention_mask_in_dataloader=False), 1)
    assert losses[0].bytes == first["loss of micro-batch 0"].bytes


def test_negative_bytes_alive_is_refused_as_a_fault():
    """Events are made unchecked; the one method that makes their bytes
    refuses a negative count, naming the categories."""
    from actmem.run.moments.timeline import LayerMoments, Pass, stage_timeline
    layer = LayerMoments(kept=100, full=100, to_softmax=0, scores=0, checkpoint=0,
                         recompute="none", group=1)
    with pytest.raises(ValueError, match=r"negative bytes alive \(\{'weights': 0, .*"
                                         r"'logits_loss': -10.*a fault of actmem"):
        stage_timeline(actmem.simulate_schedule("1f1b", 1, 1), 0,
                       states={"weights": 0, "gradients": 0, "optimizer": 0},
                       persistent_gradients=True, workspace=0, passes=[Pass(last=True)],
                       layers=[1], layer=layer, loss={"forward": 0, "backward": 0, "saved": 10},
                       mask=0)


@pytest.mark.parametrize("schedule, p, v", [("1f1b", 2, 1), ("interleaved", 2, 2), ("zbv", 2, 2)])
def test_the_peak_is_found_before_the_events_are_made(schedule, p, v):
    """A planner's readouts need only the peaks: ``training_memory`` finds
    each stage's without making its events, which are made when first read;
    the peak is then the first event with the largest total, the same object."""
    r = training_memory(GPT, p=p, m=4, v=v, schedule=schedule)
    for stage in r.stages:
        line = stage.timeline
        assert "events" not in vars(line)   # not made yet
        peak = line.peak
        assert "events" not in vars(line)
        largest = max(e.total for e in line.events)
        first = next(e for e in line.events if e.total == largest)
        assert first is peak and stage.peak == largest
        assert line.events is line.events   # made once
        again = dataclasses.replace(line, stage=stage.stage)   # a checked, plain record
        assert again == line and again.peak == peak

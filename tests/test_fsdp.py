"""FSDP2 (training_memory's use_torch_fsdp2): sizes, events, refusals, and
the measured step on 2 gloo ranks (actmem.measure.fsdp)."""

import pytest

from actmem import PRESETS, training_memory
from actmem.run.model_states.fsdp import fsdp2, layer_tensors, padded, root_tensors
from actmem.run.job.model import ModelConfig
from actmem.run.job.parameters import parameter_count

SMALL = ModelConfig(s=16, b=1, h=128, a=4, L=4, vocab_size=1000, flash_attention=True,
                    dropout=False, tied_embeddings=False)
CPU = dict(loss="torch", gradient_buffer="backward", fused_projections=False,
           autocast_device="cpu", create_attention_mask_in_dataloader=False,
           transformer_engine=False, cublas_workspace_config=":0:0")


def run(model=SMALL, **kw):
    return training_memory(model, **{**CPU, "d": 2, "use_torch_fsdp2": True, **kw})


def test_padding_is_per_parameter_along_dim0():
    assert padded(5, 15, 2) == 18          # 5 rows of 3 -> 6 rows
    assert padded(4096, 4096 * 11008, 8) == 4096 * 11008
    assert padded(7, 7, 4) == 8


@pytest.mark.parametrize("name", ["llama2-7b", "llama2-70b", "llama3-8b"])
def test_layer_tensors_are_the_parameter_count(name):
    model = PRESETS[name]
    count = parameter_count(model)
    assert sum(n for _, n in layer_tensors(model)) == count.per_layer
    root = count.embedding + count.positions + count.output_layer + count.final_norm
    extra = (model.padded_vocab(1) - model.vocab_size) * model.h * (2 - model.tied_embeddings)
    assert sum(n for _, n in root_tensors(model)) == root + extra


def test_states_are_fp32_shards_of_the_padded_parameters():
    f = fsdp2(SMALL, 2)
    layer = 12 * 128 * 128 + 13 * 128                  # q,k,v,proj,fc1,fc2 + biases, 2 norms
    root = 2 * 1024 * 128 + 16 * 128 + 2 * 128          # word, output, positions, final norm
    assert (f.layer, f.root) == (layer, root)
    shard = (4 * layer + root) // 2
    assert f.states == {"weights": 4 * shard, "gradients": 4 * shard, "optimizer": 8 * shard}
    stage = run().stages[0]
    assert (stage.weights, stage.gradients, stage.optimizer) == (4 * shard, 4 * shard, 8 * shard)
    odd = fsdp2(ModelConfig(s=16, b=1, h=128, a=4, L=1, vocab_size=1000, max_positions=17,
                            tied_embeddings=False), 2)
    assert odd.root - odd.root_unpadded == 128        # 17 position rows padded to 18


def test_peak_holds_the_running_and_the_prefetched_layer():
    f = fsdp2(SMALL, 2)
    peak = run().stages[0].timeline.peak
    assert peak.label == "backward of micro-batch 0: the second layer's gradients made"
    # root + layer 1's parameters + layer 0's all-gather output + layer 2's reduce-scatter input
    assert peak.by_category["transient"] == (2 * f.root + 2 * 2 * f.layer + 4 * f.layer)
    # layers 3 and 2's fp32 shards + the output layer's and final norm's bf16 gradients + layer 1's
    assert peak.by_category["gradients"] == (2 * 4 * f.layer // 2 + 2 * (1024 * 128 + 256)
                                             + 2 * f.layer_unpadded)


def test_reshard_after_forward_false_keeps_every_layer_gathered():
    f = fsdp2(SMALL, 2)
    line = {e.label: e for e in run(reshard_after_forward=False).stages[0].timeline.events}
    resharded = {e.label: e for e in run().stages[0].timeline.events}
    name = "after the forward of micro-batch 0"
    assert line[name].total - resharded[name].total == 4 * 2 * f.layer
    assert resharded[name].by_category["transient"] == 2 * f.root


@pytest.mark.parametrize("kw, name", [
    (dict(p=2), "p=2"), (dict(t=2), "t=2"), (dict(zero_stage=3, accounting="zero"), "zero_stage"),
    (dict(gradient_buffer="persistent"), "gradient_buffer"),
    (dict(distributed_optimizer=True), "distributed_optimizer"),
    (dict(precision="fp32", logits_bytes=4), "precision"),
    (dict(fp8="e4m3"), "fp8"),
])
def test_refusals_name_the_argument(kw, name):
    with pytest.raises(ValueError, match=name):
        run(**kw)


def test_refusals_of_the_model_and_the_flags():
    with pytest.raises(ValueError, match="tied_embeddings=True"):
        run(ModelConfig(s=16, b=1, h=128, a=4, L=4, vocab_size=1000))
    with pytest.raises(ValueError, match="reshard_after_forward=False"):
        training_memory(SMALL, reshard_after_forward=False)
    with pytest.raises(TypeError, match="use_torch_fsdp2"):
        training_memory(SMALL, use_torch_fsdp2="yes")


def test_measured_on_two_gloo_ranks():
    """FSDPMemTracker's peak on each rank within 1 % of the timeline's, at
    the same moment: the sharded parameters and the gathered bytes exact."""
    pytest.importorskip("torch", reason="the measurement needs torch (pip install -e '.[measure]')")
    from actmem.measure.fsdp import MODEL, measure_fsdp

    assert ModelConfig(**MODEL) == SMALL
    f = fsdp2(SMALL, 2)
    measured = measure_fsdp(runs=((True, True), (False, True)))
    for (reshard, _), ranks in measured.items():
        peak = run(reshard_after_forward=reshard).stages[0].timeline.peak
        layers = 1 if reshard else 3   # the second (1) / second-to-last (2) layer's moment
        for rank in ranks:
            assert abs(rank["peak"] - peak.total) / peak.total < 0.01
            got = rank["categories"]
            assert got["sharded_parameters"] == peak.by_category["weights"]
            assert got["unsharded_parameters"] == 2 * f.root + layers * 2 * f.layer
            assert got.get("all_gather", 0) == 2 * f.layer * reshard   # the prefetched layer 0


def test_every_fsdp2_event_has_a_chinese_label():
    from actmem.translations import ZH
    import re
    templates = {re.sub(r"micro-batch \d+", "{name}", e.label)
                 for layers in (1, 2, 3, 5) for reshard in (True, False)
                 for e in run(SMALL.with_(L=layers), m=2, reshard_after_forward=reshard)
                 .stages[0].timeline.events}
    assert not sorted(t for t in templates if t not in ZH)

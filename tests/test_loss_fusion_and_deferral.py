"""Megatron-LM's --cross-entropy-loss-fusion (the compiled vocab-parallel loss)
and --defer-embedding-wgrad-compute, each against a hand count of the tensors
the code keeps (actmem.run.moments.framework, actmem.run.moments.deferred_wgrad)."""

import pytest

from actmem import Job, ModelConfig, loss_bytes, training_memory
from actmem.run.moments.timeline_events import CATEGORIES

GPT = ModelConfig(s=512, b=2, h=256, a=4, L=4, vocab_size=1000)   # V padded to 1024 at t=1
LOGITS = 512 * 2 * 1024
BASE = ["--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "4",
        "--seq-length", "512", "--max-position-embeddings", "512", "--micro-batch-size", "2",
        "--global-batch-size", "16", "--tokenizer-type", "NullTokenizer", "--vocab-size", "1000",
        "--bf16", "--pipeline-model-parallel-size", "2"]


def test_the_compiled_loss_holds_an_fp32_clone_in_its_backward():
    plain = loss_bytes("vocab_parallel", LOGITS, 1024)
    fused = loss_bytes("vocab_parallel", LOGITS, 1024, cross_entropy_loss_fusion=True)
    # forward: bf16 logits + their fp32 copy; saved: the fp32 softmax;
    # backward: softmax + the index_put's fp32 clone + the bf16 gradient
    assert plain == {"forward": 6 * LOGITS, "saved": 4 * LOGITS, "backward": 6 * LOGITS}
    assert fused == {"forward": 6 * LOGITS, "saved": 4 * LOGITS, "backward": 10 * LOGITS}
    for loss in ("torch", "fused"):
        with pytest.raises(ValueError, match=f"cross_entropy_loss_fusion=True .*loss='{loss}'"):
            loss_bytes(loss, LOGITS, 1024, cross_entropy_loss_fusion=True)


def test_only_the_loss_backward_moves_on_the_timeline():
    plain, fused = (training_memory(GPT, m=2, cross_entropy_loss_fusion=f).stages[0].timeline
                    for f in (False, True))
    moved = {a.label: b.total - a.total for a, b in zip(plain.events, fused.events)
             if b.total != a.total}
    assert moved == {"loss backward of micro-batch 0": 4 * LOGITS,
                     "loss backward of micro-batch 1": 4 * LOGITS}
    with pytest.raises(ValueError, match="cross_entropy_loss_fusion=True with precision='fp16'"):
        training_memory(GPT, precision="fp16", cross_entropy_loss_fusion=True)


@pytest.mark.parametrize("limit, held_after", [(2, (1, 2, 2, 2)), (0, (1, 2, 3, 4)),
                                               (9, (1, 2, 3, 4))])
def test_deferred_microbatches_keep_their_pairs_until_the_flush(limit, held_after):
    plain, deferred = (training_memory(GPT, p=2, m=4, reserve=0,
                                       defer_embedding_wgrad_compute=d, wgrad_deferral_limit=k)
                       for d, k in ((False, 0), (True, limit)))
    assert plain.stages[0].timeline.events == deferred.stages[0].timeline.events
    pair = {"activations": 2 * 512 * 2 * 256, "logits_loss": 2 * LOGITS}  # input, logits' grad
    held = 0
    for a, b in zip(plain.stages[1].timeline.events, deferred.stages[1].timeline.events):
        if a.label.startswith("after the backward of micro-batch "):
            held = held_after[int(a.label.rsplit(" ", 1)[1])]
        if a.label == "optimizer step":
            held = 0   # drained at the flush
        extra = dict(zip(CATEGORIES, (y - x for x, y in zip(a.bytes, b.bytes))))
        assert extra == {c: held * pair.get(c, 0) for c in CATEGORIES}, a.label


def test_sequence_parallelism_keeps_the_drains_gather_buffers():
    t = 2
    plain, deferred = (training_memory(GPT, t=t, p=2, m=4, sequence_parallel=True, reserve=0,
                                       defer_embedding_wgrad_compute=d) for d in (False, True))
    workspace = CATEGORIES.index("workspace")
    first, optimizer = (deferred.stages[1].timeline.events[i] for i in (0, -1))
    gathered = 2 * (2 * 512 * 2 * 256)   # "mpu_0" and "mpu_1": s*b*h bf16 each
    assert first.bytes[workspace] - plain.stages[1].timeline.events[0].bytes[workspace] == gathered
    assert optimizer.bytes[workspace] - plain.stages[1].timeline.events[-1].bytes[workspace] == \
        gathered


@pytest.mark.parametrize("options, named", [
    (dict(p=1, defer_embedding_wgrad_compute=True), "p=1"),
    (dict(p=2, defer_embedding_wgrad_compute=True, gradient_accumulation_fusion=False),
     "gradient fusion False"),
    (dict(p=2, m=4, defer_embedding_wgrad_compute=True, schedule="gpipe"), "schedule='gpipe'"),
    (dict(p=2, wgrad_deferral_limit=2), "wgrad_deferral_limit=2 limits"),
])
def test_the_deferral_is_refused_where_megatron_lm_refuses_it(options, named):
    with pytest.raises(ValueError, match=named):
        training_memory(GPT, **options)


def test_megatron_lms_flags_reach_the_job():
    job = Job.from_megatron_args(BASE + ["--cross-entropy-loss-fusion",
                                         "--defer-embedding-wgrad-compute",
                                         "--wgrad-deferral-limit", "2"], world_size=4)
    assert (job.cross_entropy_loss_fusion, job.defer_embedding_wgrad_compute,
            job.wgrad_deferral_limit) == (True, True, 2)
    assert Job.from_megatron_args(BASE + ["--wgrad-deferral-limit", "2"],
                                  world_size=4).wgrad_deferral_limit == 0   # read with it only
    with pytest.raises(ValueError, match="--cross-entropy-fusion-impl te: actmem models native"):
        Job.from_megatron_args(BASE + ["--cross-entropy-fusion-impl", "te"], world_size=4)


def test_the_compiled_loss_is_refused_in_a_container_it_is_not_modelled_for():
    argv = BASE + ["--cross-entropy-loss-fusion"]
    with pytest.raises(ValueError, match=r"--cross-entropy-loss-fusion True: refused in NGC's "
                                         r"PyTorch container 25.09"):
        Job.from_megatron_args(argv, world_size=4, env={"NVIDIA_PYTORCH_VERSION": "25.09"})
    job = Job.from_megatron_args(argv, world_size=4, env={"NVIDIA_PYTORCH_VERSION": "25.11"})
    assert job.cross_entropy_loss_fusion

"""Megatron-FSDP (--use-megatron-fsdp, issue 43): its buckets, states and
timeline against hand derivations from Megatron-LM d98e8a64's
param_and_grad_buffer.py and megatron_fsdp.py, and one of Megatron-LM's CI
runs as launched (actmem/data/megatron_runs.json) against its measured peak."""

import pytest

from actmem import Job, ModelConfig, training_memory
from actmem.run.model_states.megatron_fsdp import UNIT_FLOOR, MegatronFSDP, megatron_fsdp
from actmem.run.model_states.megatron_fsdp_buckets import chunk_factor, layout, model_buckets
from actmem.run.job.megatron_args import ci_runs
from actmem.run.step_setup import step_setup

RUN = ci_runs()["gpt3_mcore_te_tp2_zp_z3_resume_fsdp_dtensor"]
MEASURED = RUN["mem_max_allocated_bytes"]   # its golden values' on an H100: 1,469,652,992
# the CI run's model: GPT-2's vocabulary (50257, padded to 50432 at t=2), h=512, 12 layers
GPT = ModelConfig(s=1024, b=4, h=512, a=8, L=12, vocab_size=50257, flash_attention=True,
                  max_positions=1024)
LAYER = 1_581_056   # one layer's bucket at t=2, d=4 (below)
OUTSIDE = 13_436_928   # the tables' and the final norm's bucket


def launched(*extra: str) -> Job:
    launch = RUN["launch"]
    return Job.from_megatron_args(launch["argv"] + list(extra), world_size=launch["world_size"],
                                  env=launch["env"], gpu=RUN["gpu"])


def test_the_launch_is_read_as_megatron_fsdp_with_fp32_gradients():
    job = launched()
    assert (job.use_megatron_fsdp, job.distributed_optimizer, job.t, job.d, job.m) == \
        (True, True, 2, 4, 2)
    assert job.megatron_fsdp_main_grads_dtype == "fp32" and job.ddp_bucket_size is None


def test_the_ci_run_meets_its_measured_peak_within_one_percent():
    peak = training_memory(launched()).stages[-1].peak
    assert abs(peak - MEASURED) / MEASURED < 0.01
    # the distributed optimizer alone would be 7.6 % above it
    ddp = training_memory(launched().with_(use_megatron_fsdp=False,
                                           megatron_fsdp_main_grads_dtype="auto"))
    assert ddp.stages[-1].peak / MEASURED - 1 > 0.07


def test_a_layers_bucket_is_padded_to_d_times_its_chunk_factor():
    # at t=2 one layer holds Q/K/V 768 x 512, the projection 512 x 256, fc1 1024 x 512 and
    # fc2 512 x 1024 (1,572,864 elements), and 4,864 elements of biases and LayerNorms.
    # Row sizes 1024, 512, 256: the chunk factor is 1024 (each size is a multiple of it),
    # so the bucket is 1,577,728 padded to a multiple of 4 x 1024.
    matrices = [(768 * 512, 512), (512 * 256, 256), (1024 * 512, 512), (512 * 1024, 1024)]
    assert chunk_factor(matrices + [(4864, 1)]) == 1024
    buckets = model_buckets(GPT, 2, 4)
    assert [b.size for b in buckets[1:]] == [LAYER] * 12 == [-(-1_577_728 // 4096) * 4096] * 12
    # outside the layers: the word table 25216 x 512, positions 1024 x 512 (rows of 512)
    # and the final norm's 1,024 elements, padded to a multiple of 4 x 512
    assert buckets[0].size == OUTSIDE == -(-(25216 * 512 + 1024 * 512 + 1024) // 2048) * 2048
    assert [b.shard for b in buckets[:2]] == [OUTSIDE // 4, LAYER // 4]
    assert buckets[0].early and buckets[0].late and not buckets[1].early


def test_the_layout_rounds_a_size_up_to_the_chunk_and_fills_the_gap():
    # build_data_parallel_buffer_index with cf = 8 on two ranks: 20 takes 24 (a gap of 4 at
    # 20..24), 16 has no remainder to pair, the fragment of 3 fills 20..23; 16 at 24..40;
    # 40 padded to 48, so the first rank's 24 hold 23 parameters
    assert layout([20, 16], [3], 8, 2) == (48, 23)
    assert layout([20, 12], [], 8, 2) == (32, 16)   # 12 pairs: its 4 in 20..24, 8 in 24..32
    # 13's remainder 5 and 20's 4 exceed 8: no pair; 13 at 0..13, 20 at 16..36, 40 padded
    # to 48; the first rank's 24 hold 13 + 8
    assert layout([13, 20], [], 8, 2) == (48, 21)


def test_the_states_are_the_shards_and_the_outside_bucket_gathered():
    job = Job(GPT, t=2, d=4, m=2, distributed_optimizer=True, use_megatron_fsdp=True,
              megatron_fsdp_main_grads_dtype="fp32")
    shards = OUTSIDE // 4 + 12 * LAYER // 4
    assert shards == 8_102_400
    f = megatron_fsdp(step_setup(job))
    assert f.states == {"weights": 2 * shards + 2 * OUTSIDE, "gradients": 4 * shards,
                        "optimizer": 4 * shards + 8 * shards}   # fp32 main weights, Adam
    assert f.unit == UNIT_FLOOR   # twice a layer's 1,577,728 is far below the floor
    bf16 = job.with_(megatron_fsdp_main_grads_dtype="auto")
    assert megatron_fsdp(step_setup(bf16)).states["gradients"] == 2 * shards
    assert megatron_fsdp(step_setup(bf16)).optimizer_copies == 4 * shards


def small_unit() -> MegatronFSDP:
    # unit 4,000,000 elements: prefetch 2,000,000, i.e. two layers of 1,581,056
    return MegatronFSDP(model_buckets(GPT, 2, 4), 12, 4_000_000, 4)


def test_the_prefetch_gathers_until_half_the_unit_is_reached():
    f = small_unit()
    assert f.forward_gathered(0) == 2 * 3 * LAYER    # layer 0, and 1 + 2 >= 2,000,000
    assert f.forward_gathered(5) == 2 * 3 * LAYER
    assert f.forward_gathered(10) == 2 * 2 * LAYER   # only layer 11 is left to prefetch
    assert f.forward_gathered(11) == 2 * LAYER
    assert f.backward_gathered(11) == 2 * 3 * LAYER and f.backward_gathered(0) == 2 * LAYER
    assert f.step_gathered == 2 * 2 * LAYER   # the embedding's hook: layers 0 and 1
    assert MegatronFSDP(f.buckets, 12, UNIT_FLOOR, 4).forward_gathered(0) == 2 * 12 * LAYER


def test_gradient_buckets_wait_until_the_queue_exceeds_the_unit():
    at, end = small_unit().gradient_buckets
    # the outside bucket is made by the final norm's gradient and waits for the table's;
    # a layer's bucket joins the queue once reduced; before a bucket joins, the oldest
    # leave while the queue holds more than 4,000,000 (three layers: 4,743,168)
    assert at[11] == 4 * (OUTSIDE + LAYER)
    assert at[10] == 4 * (OUTSIDE + 2 * LAYER) and at[9] == 4 * (OUTSIDE + 3 * LAYER)
    assert at[8] == at[0] == 4 * (OUTSIDE + 4 * LAYER)
    assert end == 4 * (OUTSIDE + 3 * LAYER)
    at, end = MegatronFSDP(small_unit().buckets, 12, UNIT_FLOOR, 4).gradient_buckets
    assert end == 4 * (OUTSIDE + 12 * LAYER)   # nothing leaves below the floor


def test_the_timeline_adds_the_gathered_layers_and_the_gradient_buckets():
    job = launched()
    events = {e.label: e for e in training_memory(job).stages[-1].timeline.events}
    plain = {e.label: e for e in training_memory(
        job.with_(suggested_communication_unit_size=UNIT_FLOOR)).stages[-1].timeline.events}
    end = events["backward of micro-batch 0: end of the backward, before its gradient buckets "
                 "are freed (Megatron-FSDP)"]
    after = events["after the backward of micro-batch 0"]
    assert end.by_category["gradients"] - after.by_category["gradients"] == \
        4 * (OUTSIDE + 12 * LAYER)
    mlp = events["backward of micro-batch 0: the last layer's MLP"].by_category
    # every layer gathered again by the last layer's hook, counted with the weights
    assert mlp["weights"] - after.by_category["weights"] == 2 * 12 * LAYER
    assert events["optimizer step"].by_category["weights"] - \
        after.by_category["weights"] == 2 * 12 * LAYER
    assert plain.keys() == events.keys()


@pytest.mark.parametrize("extra, message", [
    (["--megatron-fsdp-version", "2"], r"--megatron-fsdp-version 2 with --use-megatron-fsdp"),
    (["--data-parallel-sharding-strategy", "optim_grads"],
     r"--data-parallel-sharding-strategy optim_grads with --use-megatron-fsdp"),
    (["--megatron-fsdp-main-params-dtype", "bf16"], r"--megatron-fsdp-main-params-dtype bf16"),
    (["--megatron-fsdp-grad-comm-dtype", "bf16"], r"--megatron-fsdp-grad-comm-dtype bf16 with "
     r"--megatron-fsdp-main-grads-dtype fp32"),
    (["--ddp-num-buckets", "4"], r"--ddp-num-buckets 4 with --use-megatron-fsdp"),
    (["--fsdp-double-buffer"], r"--fsdp-double-buffer True: refused"),
    (["--pipeline-model-parallel-size", "2"], r"p=2 with use_megatron_fsdp=True"),
    (["--recompute-granularity", "full", "--recompute-method", "uniform"],
     r"full_recomputation=True with use_megatron_fsdp=True"),
])
def test_what_megatron_fsdp_is_not_modelled_with_is_refused_by_name(extra, message):
    with pytest.raises(ValueError, match=message):
        launched(*extra)


def test_the_bucket_size_cuts_the_outside_parameters_with_overlap():
    assert launched("--overlap-grad-reduce").ddp_bucket_size == 40_000_000   # max(40M, 1M d)
    cut = launched("--overlap-grad-reduce", "--ddp-bucket-size", "1000000")
    buckets = megatron_fsdp(step_setup(cut)).buckets
    # the table alone reaches 1,000,000; positions and the final norm (525,312) close the
    # group: made by the final norm's gradient, ready after the positions'
    outside = [b for b in buckets if b.unit is None]
    assert [(b.early, b.late) for b in outside] == [(False, True), (True, True)]


@pytest.mark.parametrize("options, message", [
    (dict(megatron_fsdp_main_grads_dtype="fp32"), r"megatron_fsdp_main_grads_dtype='fp32' is "
     r"Megatron-FSDP's; it needs use_megatron_fsdp=True"),
    (dict(ddp_bucket_size=10**6), r"ddp_bucket_size=1000000 is Megatron-FSDP's"),
    (dict(use_megatron_fsdp=True), r"distributed_optimizer=False with use_megatron_fsdp=True"),
    (dict(use_megatron_fsdp=True, distributed_optimizer=True, megatron_fsdp_main_grads_dtype=
          "fp16"), r"megatron_fsdp_main_grads_dtype must be one of 'auto', 'fp32', 'bf16'"),
    (dict(use_megatron_fsdp=True, distributed_optimizer=True, fp8="e4m3"),
     r"fp8='e4m3' with use_megatron_fsdp=True"),
    (dict(use_megatron_fsdp=True, distributed_optimizer=True,
          suggested_communication_unit_size=0), r"suggested_communication_unit_size"),
])
def test_a_job_s_megatron_fsdp_options_are_checked(options, message):
    with pytest.raises((TypeError, ValueError), match=message):
        Job(GPT, t=2, d=4, **options)

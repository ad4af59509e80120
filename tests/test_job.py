"""The Job record (issue 43): one record for a job, validated once, and
training_memory's two ways in giving the same numbers."""

import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import actmem
from actmem import Job, PRESETS, training_memory
from actmem.run.job.job import GROUPS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import golden  # noqa: E402

P = PRESETS["llama2-7b"]


def test_every_option_of_training_memory_is_a_field_in_one_group():
    grouped = [name for names in GROUPS.values() for name in names]
    assert sorted(grouped) == sorted(f for f in actmem.job.FIELDS)
    assert len(grouped) == len(set(grouped)) == 60


@pytest.fixture(scope="module")
def calls():
    with gzip.open(golden.GOLDEN, "rt", encoding="utf-8") as f:
        return [case["call"] for case in json.load(f)["cases"]]


def test_a_job_and_its_keywords_give_the_same_numbers(calls):
    # every golden call (the notebooks', their planners' settings, every
    # preset and schedule): the three ways in, one result
    for text in calls[::7]:
        model, options = eval(text, {"ModelConfig": actmem.ModelConfig})
        by_keywords = training_memory(model, **options)
        job = Job(model, **options)
        assert training_memory(job) == by_keywords
        assert training_memory(Job(model), **options) == by_keywords
        assert job.with_() == job and job.changed() == options


def test_changes_to_a_job_are_a_changed_copy():
    job = Job(P, t=2, p=2, d=2, m=8)
    changed = job.with_(recompute="full", m=4)
    assert (job.recompute, job.m, changed.recompute, changed.m, changed.t) == \
        ("none", 8, "full", 4, 2)
    assert training_memory(job, recompute="full", m=4) == training_memory(changed)
    with pytest.raises(ValueError, match="recompute must be one of"):
        job.with_(recompute="some")


def test_a_job_is_checked_when_it_is_built_in_training_memorys_order():
    with pytest.raises(ValueError, match=r"p=3 must divide L=32"):
        Job(P, p=3)
    with pytest.raises(TypeError, match="model must be a ModelConfig"):
        Job("llama2-7b")
    with pytest.raises(ValueError, match="p=3 must divide L=32"):
        Job(P, t=3, p=3)   # the split before the layer's own checks
    with pytest.raises(ValueError, match="t=3 must divide a=32"):
        Job(P, t=3)   # the layer's own checks, at once, not at training_memory
    with pytest.raises(ValueError, match="accounting must be one of"):
        Job(P, accounting="x")   # the states' own checks
    with pytest.raises(TypeError, match=r"unknown keyword argument tp; it takes .*\bt\b"):
        Job(P, tp=2)
    with pytest.raises(TypeError, match=r"training_memory\(\) got unknown keyword argument pp"):
        training_memory(Job(P), pp=2)
    with pytest.raises(TypeError, match=r"Job.with_\(\) got unknown keyword argument tp"):
        Job(P).with_(tp=2)
    with pytest.raises(TypeError, match=r"training_memory\(\) got unknown keyword argument model"):
        training_memory(Job(P), model=P)   # the model of a job: job.with_(model=...)
    assert Job(P, t=2).with_(model=P.with_(s=2048)).model.s == 2048


def test_numpy_scalars_become_plain_numbers():
    job = Job(P, t=np.int64(2), reserve=np.float64(0.05), gpu_memory="A100 80GB")
    assert type(job.t) is int and type(job.reserve) is float
    assert job == Job(P, t=2, reserve=0.05, gpu_memory="A100 80GB")


def test_the_repr_groups_the_options_and_keys_every_one():
    job = Job(P, t=2, p=2, d=2, m=8, recompute="full", gpu_memory="A100 80GB")
    assert repr(job) == (
        "Job(model=PRESETS['llama2-7b'],\n"
        "    t=2, p=2, d=2,  # parallelism\n"
        "    m=8,  # schedule\n"
        "    recompute='full',  # recomputation\n"
        "    gpu_memory='A100 80GB')  # gpu")
    assert repr(Job(P)) == "Job(model=PRESETS['llama2-7b'])"
    other = P.with_(s=2048, source="")
    assert repr(Job(other)) == (
        "Job(model=ModelConfig(s=2048, b=1, h=4096, a=32, L=32, vocab_size=32000, "
        "ffn_hidden_size=11008, activation='swiglu', dropout=False, flash_attention=True, "
        "norm='rmsnorm', bias=False, tied_embeddings=False, positions='rotary'))")
    names = {"Job": Job, "ModelConfig": actmem.ModelConfig, "PRESETS": PRESETS,
             "MOE_PRESETS": actmem.MOE_PRESETS}
    for built in (job, Job(other, cp=2, recompute="full"), Job(actmem.MOE_PRESETS["mixtral-8x7b"],
                                                              t=2, sequence_parallel=True)):
        assert eval(repr(built), names) == built   # the repr builds the same job
    # two jobs differ in their repr exactly when they differ
    assert repr(job.with_(recompute_num_layers=1)) == repr(job)
    assert repr(job.with_(recompute_num_layers=2)) != repr(job)
    assert repr(Job(P, sequence_parallel=False)) == repr(Job(P))


OPTIONS = dict(
    t=[1, 2, 3, 4, 8], p=[1, 2, 3, 4], d=[1, 2, 4], ep=[1, 2, 4], etp=[None, 1, 2],
    m=[1, 2, 4, 8], schedule=["gpipe", "1f1b", "interleaved", "zbv", "interleaved-zb"],
    v=[1, 2, 3], sequence_parallel=[False, True], recompute=["none", "selective", "full", "x"],
    recompute_num_layers=[1, 2, 3], accounting=["zero", "megatron", "x"],
    zero_stage=[0, 1, 3, 4], distributed_optimizer=[False, True], logits_bytes=[2, 4],
    reserve=[0, 0.1], gpu_memory=[None, "A100 80GB", "H100 80GB SXM"],
    loss=["vocab_parallel", "torch", "fused"], gradient_buffer=["persistent", "backward"],
    precision=["bf16", "fp32", "autocast"], cp=[1, 2, 4], cp_comm_type=["p2p", "a2a"],
    fp8=[None, "e4m3"], recompute_modules=[None, ["core_attn"], ["mlp"], ["moe"]],
    cpu_offloading_num_layers=[0, 1], use_torch_fsdp2=[False, True],
    loss_chunk_tokens=[None, 1024], decoder_first_pipeline_num_layers=[None, 4, 8])


def test_a_job_that_is_built_can_be_computed():
    import random
    import warnings
    rng, built = random.Random(0), 0
    models = [P, actmem.MOE_PRESETS["mixtral-8x7b"], P.with_(flash_attention=False),
              PRESETS["gpt2-large"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # sequence parallelism at t = 1
        for _ in range(1500):
            options = {k: rng.choice(v) for k, v in OPTIONS.items() if rng.random() < 0.25}
            try:
                job = Job(rng.choice(models), **options)
            except (TypeError, ValueError):
                continue
            training_memory(job)   # raises nothing
            built += 1
    assert built > 150

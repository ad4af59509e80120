"""The default reserve (actmem.run.reserve): its parts derived by hand for a
single GPU, a t=2 p=2 d=2 job and an MoE job; reserve=0 is the bare peak; the
CLI prints the parts beside the peak, in English and Chinese."""

import pytest

import actmem
from actmem import PRESETS, MOE_PRESETS, training_memory
from actmem.run.reserve import Communicator, allocator_gap, communicators, nccl_buffers
from actmem.views.cli import main
from actmem.views.train_cli import verdict

MIB, GIB = 2**20, 2**30
L7 = PRESETS["llama2-7b"]
CONTEXT, SLACK = 512 * MIB, 20 * MIB
DRIVER = {"A100 80GB": 768 * MIB, "H100 80GB SXM": 550 * MIB}   # nvidia-smi's total less CUDA's
RING_TREE = 16 * 2 * 10 * MIB   # a collective communicator: 16 channels x ring and tree
NVLS = 256 * MIB                # NVLink SHARP on an H100 SXM, groups of > 2 GPUs
PEER = 32 * 10 * MIB            # a send/receive peer over NVLink: 32 channels


def gap(peak, percent=10):
    return -(-peak * percent // 100) + SLACK   # rounded up, plus one 20 MiB segment


def test_one_gpu_has_a_context_and_an_allocator_gap_and_no_nccl():
    r = training_memory(L7, gpu_memory="A100 80GB")
    stage = r.stages[0]
    parts = stage.reserve_parts
    assert parts.communicators == () and parts.nccl == 0
    assert parts.cuda_context == CONTEXT and parts.allocator == gap(stage.peak)
    assert parts.driver == DRIVER["A100 80GB"]
    assert stage.reserve == parts.total == DRIVER["A100 80GB"] + CONTEXT + gap(stage.peak)
    assert stage.needed == stage.peak + stage.reserve
    expandable = training_memory(L7, gpu_memory="A100 80GB", expandable_segments=True)
    assert expandable.stages[0].reserve_parts.allocator == gap(stage.peak, 3)
    assert expandable.stages[0].peak == stage.peak


def test_t2_p2_d2_on_h100_counts_four_communicators():
    r = training_memory(L7, t=2, p=2, d=2, m=8, gpu_memory="H100 80GB SXM")
    for stage in r.stages:   # LLaMA's embeddings are not tied: no embedding group
        parts = stage.reserve_parts
        assert parts.communicators == ("tensor", "data", "gradient norm", "pipeline")
        # tensor (2), data (2), gradient norm over t*p = 4 GPUs (NVLS), one pipeline peer
        assert parts.nccl == RING_TREE + RING_TREE + (RING_TREE + NVLS) + PEER == 1536 * MIB
        assert stage.reserve == DRIVER["H100 80GB SXM"] + CONTEXT + 1536 * MIB + gap(stage.peak)
    bare = training_memory(L7, t=2, p=2, d=2, m=8, gpu_memory="H100 80GB SXM", reserve=0)
    assert [s.peak for s in bare.stages] == [s.peak for s in r.stages]
    assert bare.margin - r.margin == r.most_loaded.reserve


def test_the_middle_stages_have_two_peers_and_the_ends_the_embedding_group():
    job = actmem.Job(PRESETS["gpt2-large"], p=4, m=4, gpu_memory="A100 80GB")
    assert job.model.tied_embeddings
    names = [tuple(c.name for c in communicators(job, i)) for i in range(4)]
    ends, middle = ("gradient norm", "pipeline", "embedding"), ("gradient norm", "pipeline")
    assert names == [ends, middle, middle, ends]   # gradient norm: over t*p = 4 GPUs
    assert [nccl_buffers(communicators(job, i), "A100 80GB") for i in range(4)] == \
        [RING_TREE + 2 * PEER + RING_TREE] + [RING_TREE + 2 * PEER] * 2 + \
        [RING_TREE + 2 * PEER + RING_TREE]


def test_an_moe_job_adds_the_expert_groups():
    job = actmem.Job(MOE_PRESETS["mixtral-8x7b"], t=2, d=4, ep=4, sequence_parallel=True,
                     gpu_memory="H100 80GB SXM")
    used = communicators(job, 0)
    # expert data-parallel size t*d/(ep*etp) = 8/8 = 1: no group
    assert used == (Communicator("tensor", 2), Communicator("data", 4),
                    Communicator("gradient norm", 2), Communicator("expert", 4, 3),
                    Communicator("expert tensor", 2), Communicator("expert gradient norm", 8))
    assert nccl_buffers(used, "H100 80GB SXM") == (
        RING_TREE + (RING_TREE + NVLS) + RING_TREE + 3 * PEER + RING_TREE
        + (RING_TREE + NVLS)) == 3072 * MIB
    assert nccl_buffers(used, "A100 80GB") == 3072 * MIB - 2 * NVLS   # no NVLS on Ampere


def test_peers_beyond_one_node_use_two_channels():
    # 15 all-to-all peers: 7 in the 8-GPU node (32 channels), 8 over the network (2)
    assert nccl_buffers((Communicator("expert", 16, 15),), "H200") == (7 * 32 + 8 * 2) * 10 * MIB


def test_the_allocator_gap_is_at_most_what_the_gpu_has():
    assert allocator_gap(10**12) == 10**11 + SLACK
    assert allocator_gap(10**12, limit=5 * GIB) == 5 * GIB
    r = training_memory(PRESETS["1t"], t=8, gpu_memory="L4")   # a peak far above the GPU
    stage = r.stages[0]
    assert stage.reserve == actmem.GPUS["L4"].memory and not r.fits


def test_reserve_zero_and_sizes_give_no_parts():
    for options in (dict(gpu_memory="A100 80GB", reserve=0), dict(gpu_memory="80GiB"),
                    dict(), dict(gpu_memory="A100 80GB", reserve=2 * GIB)):
        stage = training_memory(L7, **options).stages[0]
        assert stage.reserve_parts is None
        assert stage.reserve == options.get("reserve", 0)


@pytest.mark.parametrize("options, error, message", [
    (dict(reserve="estimate"), ValueError, r"reserve='estimate': give 'default'"),
    (dict(reserve=[1]), TypeError, r"reserve"),
    (dict(expandable_segments="yes"), TypeError, r"expandable_segments"),
])
def test_bad_reserves_are_named(options, error, message):
    with pytest.raises(error, match=message):
        training_memory(L7, gpu_memory="A100 80GB", **options)


CASE = ["train", "--preset", "llama2-7b", "-t", "2", "-p", "2", "-d", "2", "-m", "8",
        "--gpu-memory", "H100 80GB SXM"]


def test_the_cli_prints_the_parts_beside_the_peak(capsys):
    r = training_memory(L7, t=2, p=2, d=2, m=8, gpu_memory="H100 80GB SXM")
    assert main(CASE) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[10].split() == ["driver-reserved", "550", "550"]
    assert out[11].split() == ["CUDA", "context", "512", "512"]
    assert out[12].split() == ["NCCL", "buffers", "1536", "1536"]
    assert out[13].split() == ["allocator", "gap"] + [
        f"{gap(s.peak) / MIB:.2f}" for s in r.stages]
    top = r.most_loaded
    allocator = round(gap(top.peak) / GIB, 2)
    assert f"' + reserve {round(top.reserve / GIB, 2)} GiB (driver 0.54, CUDA context 0.5, NCCL 1.5, " \
           f"allocator {allocator} GiB), of 79.65 GiB (H100 80GB SXM)" in out[-1]
    assert main([*CASE, "--reserve", "0"]) == 0
    assert "reserve" not in capsys.readouterr().out.splitlines()[-1]


def test_the_verdict_names_the_parts_in_chinese():
    r = training_memory(L7, t=2, p=2, d=2, m=8, gpu_memory="H100 80GB SXM")
    actmem.set_language("zh")
    try:
        line = verdict(r, gpu="H100 80GB SXM")
    finally:
        actmem.set_language("en")
    assert "（驱动 0.54，CUDA 上下文 0.5，NCCL 1.5，分配器 " in line and "预留" in line


def test_the_driver_part_is_nvidia_smis_total_less_cudas():
    """Published CUDA totals (PyTorch's 'total capacity'): H100 80GB 79.11 GiB of
    81559 MiB; a GPU with none published takes the largest gap of the others."""
    from actmem.run.reserve import DRIVER, DRIVER_UNKNOWN, driver_reserved
    assert 81559 * MIB - driver_reserved("H100 80GB SXM") == pytest.approx(79.11 * GIB, abs=MIB)
    assert 81920 * MIB - driver_reserved("A100 80GB") == pytest.approx(79.25 * GIB, abs=MIB)
    assert driver_reserved("H200") == DRIVER_UNKNOWN == max(DRIVER.values()) == 768 * MIB

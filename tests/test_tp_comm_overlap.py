"""Megatron-LM's --tp-comm-overlap: Transformer Engine's Userbuffers GEMM
workspaces in PyTorch's allocator (transformer_engine/pytorch/cpp_extensions/
gemm.py: get_cublas_workspace(ub=True)), the Userbuffers outside it."""

import pytest

from actmem import PRESETS, Job, training_memory
from actmem.run.moments.framework import workspace_bytes

MiB = 2**20
JOB = dict(t=2, sequence_parallel=True, gpu_memory="H100 80GB SXM")


def test_three_userbuffers_gemm_workspaces_join_the_persistent_ones():
    plain = workspace_bytes((9, 0))
    overlap = workspace_bytes((9, 0), tp_comm_overlap=True)
    assert overlap == {**plain, "Transformer Engine Userbuffers GEMM workspaces (3 streams)":
                       3 * 32 * MiB}
    assert workspace_bytes((9, 0), transformer_engine=False, tp_comm_overlap=True) == \
        workspace_bytes((9, 0), transformer_engine=False)


def test_the_peak_grows_by_the_workspaces_at_every_moment():
    llama = PRESETS["llama2-7b"]
    plain, overlap = (training_memory(llama, **JOB, tp_comm_overlap=on, reserve=0).stages[0]
                      for on in (False, True))
    assert overlap.peak - plain.peak == 3 * 32 * MiB
    assert [e.total - f.total for e, f in zip(overlap.timeline.events, plain.timeline.events)] \
        == [3 * 32 * MiB] * len(plain.timeline.events)


@pytest.mark.parametrize("options", [dict(sequence_parallel=False),
                                     dict(transformer_engine=False)])
def test_without_te_or_sequence_parallelism_it_is_refused_by_name(options):
    with pytest.raises(ValueError, match="tp_comm_overlap=True needs transformer_engine=True "
                                         "and sequence_parallel=True"):
        Job(PRESETS["llama2-7b"], **{**JOB, **options}, tp_comm_overlap=True)


def test_a_launch_reads_it_and_its_neutral_companions():
    base = ["--num-layers", "2", "--hidden-size", "256", "--num-attention-heads", "4",
            "--seq-length", "512", "--max-position-embeddings", "512", "--micro-batch-size",
            "2", "--global-batch-size", "16", "--tokenizer-type", "NullTokenizer",
            "--vocab-size", "1024", "--bf16", "--tensor-model-parallel-size", "2",
            "--sequence-parallel", "--tp-comm-overlap", "--tp-comm-overlap-cfg", "ub.yaml",
            "--no-tp-comm-bulk-dgrad"]
    assert Job.from_megatron_args(base, world_size=2).tp_comm_overlap is True

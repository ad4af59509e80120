"""--pipeline-model-parallel-layout (issue 42: uneven pipelines given as a
layout), read as Megatron-LM's pipeline_parallel_layer_layout.py reads it."""

import pytest

from actmem import Job, split_layers, training_memory
from actmem.run.job.megatron_layout import layout_stage_layers, layout_stages

BASE = ["--num-layers", "16", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "64", "--max-position-embeddings", "64", "--micro-batch-size", "1",
        "--global-batch-size", "8", "--tokenizer-type", "NullTokenizer", "--vocab-size", "1000",
        "--bf16", "--pipeline-model-parallel-size", "2"]
PROXY = "Et*3|(tt|)*6tmL"
"""The layout of Megatron-LM's DeepSeek-V3 proxy CI run
gpt3_mcore_te_tp2_pp2_ep4_etp1_selective_recompute_experimental."""


def test_the_string_unrolls_as_megatron_lms_docstring_example():
    assert layout_stages("Ettt|(tt|)*29,m|L") == ["Ettt"] + ["tt"] * 29 + ["m", "L"]
    assert layout_stages("E|t*3|L") == ["E", "ttt", "L"]


def test_virtual_stage_k_is_chunk_k_over_p_of_rank_k_mod_p():
    # flat stages: Ettt, tt x 6, tmL; rank 0 takes 0, 2, 4, 6 and rank 1 takes 1, 3, 5, 7
    assert layout_stage_layers(PROXY, 2, 16, 1) == (4, ((3, 2, 2, 2), (2, 2, 2, 1)))
    assert layout_stage_layers("E|t*4|t*4|L", 2, 8, None) == (2, ((0, 4), (4, 0)))


@pytest.mark.parametrize("layout, p, mtp, message", [
    ("Et*8|t*8|m|L", 2, 1, r"MTP modules must follow the decoder layers in the last "
                           r"virtual stage.*mtp_standalone"),
    ("Et*15|t*2L", 2, None, r"it holds 17 decoder layers and 0 MTP modules"),
    ("Et*14|tL", 2, None, r"it holds 15 decoder layers.*--num-layers 16"),
    ("tEt*14|tL", 2, None, r"E must open it and L close it"),
    ("Et*15|tx|L", 3, None, r"unknown letters \['x'\]"),
    ("Et*15|t|L", 2, None, r"its 3 virtual stages must be a multiple of p=2"),
    ("Et*15|tmtL", 2, 1, r"it holds 17 decoder layers"),
])
def test_a_layout_megatron_lm_refuses_or_actmem_does_not_model_is_named(layout, p, mtp, message):
    with pytest.raises(ValueError, match=r"--pipeline-model-parallel-layout .*" + message):
        layout_stage_layers(layout, p, 16, mtp)


def test_a_launch_takes_its_chunks_and_their_layers_from_the_layout():
    job = Job.from_megatron_args(BASE + ["--pipeline-model-parallel-layout", PROXY,
                                         "--mtp-num-layers", "1"], world_size=2)
    assert (job.v, job.schedule, job.stage_layers) == (4, "interleaved",
                                                        ((3, 2, 2, 2), (2, 2, 2, 1)))
    with pytest.raises(ValueError, match="--num-virtual-stages-per-pipeline-rank with "
                                         "--pipeline-model-parallel-layout: Megatron-LM takes"):
        Job.from_megatron_args(BASE + ["--pipeline-model-parallel-layout", "Et*8|t*8L",
                                       "--num-virtual-stages-per-pipeline-rank", "2"],
                               world_size=2)


def test_chunk_counts_split_the_layers_as_given_and_the_loss_chunk_runs_the_modules():
    assert split_layers(16, 2, 4, stage_layers=((3, 2, 2, 2), (2, 2, 2, 1))) == (
        (3, 2, 2, 2), (2, 2, 2, 1))
    with pytest.raises(ValueError, match=r"stage_layers=\(\(3, 2, 2, 2\), \(2, 2, 2\)\) per "
                                         r"chunk must be p=2 tuples of v=4 ints"):
        split_layers(16, 2, 4, stage_layers=((3, 2, 2, 2), (2, 2, 2)))
    job = Job.from_megatron_args(BASE + ["--pipeline-model-parallel-layout", PROXY,
                                         "--mtp-num-layers", "1"], world_size=2)
    plain = job.with_(model=job.model.with_(mtp_num_layers=None))
    one, none = (training_memory(j).stages[1].layer_activations for j in (job, plain))
    assert one > none   # the last chunk's one decoder layer and its module

"""Transformer Engine's FlashAttention backend keeps the attention output
twice (actmem/layer/flash_copy.py): the row, where it goes, and which
launches run it. Hand derivations in the paper's symbols; the measured
check is the A100 run of tests/test_megatron_args.py."""

import pytest

from actmem import Job, LayerConfig, activation_memory, coefficients
from actmem.layer.flash_copy import te_runs_flash_attn

S, B, H, A, T = 2048, 2, 1024, 16, 2
COPY = 2 * S * B * H // T   # bytes: s*b*a*d elements over t ranks, 2 bytes each


def layer(**options):
    return activation_memory(S, B, H, A, t=T, flash_attention=True, **options)


def test_the_copy_is_one_more_output_projection_input():
    plain, copied = layer(), layer(flash_output_copy=True)
    assert copied.total - plain.total == COPY
    keys = [r.key for r in copied.rows]
    assert keys.index("flash_output") == keys.index("proj_input") - 1
    # the intermediate term: 24 sbh/t becomes 26 sbh/t, the others unchanged
    assert coefficients(plain)["intermediate"] == 24
    assert coefficients(copied)["intermediate"] == 26
    assert coefficients(copied)["fixed"] == coefficients(plain)["fixed"]


def test_one_sequence_per_micro_batch_makes_no_copy():
    # b = 1: flash-attn's (1, s, a*d) output, transposed to sbhd, is already contiguous
    # (a size-1 dimension's stride does not count), so contiguous() returns it. Megatron-LM's
    # CI run gpt3_7b_tp1_pp4 (b = 1) measures the same peak on A100 (flash-attn) and H100
    # (cuDNN): 60.49 GB and 60.72 GB; with the copy actmem was 2.9 % high on A100.
    plain = activation_memory(S, 1, H, A, t=T, flash_attention=True)
    copied = activation_memory(S, 1, H, A, t=T, flash_attention=True, flash_output_copy=True)
    assert copied.rows == plain.rows


def test_contiguous_copies_a_transposed_output_only_when_b_is_more_than_one():
    torch = pytest.importorskip("torch")
    for b, copies in ((1, False), (2, True)):
        flash_out = torch.empty(b, 16, 8)   # (b, s, a*d), flash-attn's layout
        sbhd = flash_out.transpose(0, 1).contiguous()   # what TE's FlashAttention returns
        assert (sbhd.data_ptr() != flash_out.data_ptr()) is copies


def test_the_copy_splits_with_the_heads_and_follows_the_head_width():
    wide = activation_memory(S, B, H, A, t=T, flash_attention=True, kv_channels=128,
                             flash_output_copy=True)
    row = next(r for r in wide.rows if r.key == "flash_output")
    assert row.bytes == 2 * S * B * A * 128 // T


@pytest.mark.parametrize("options", [dict(recompute="selective"),
                                     dict(recompute="selective", recompute_modules=("core_attn",)),
                                     dict(fp8="hybrid"),
                                     dict(lora_rank=8, lora_targets=("linear_qkv",))])
def test_where_the_projection_keeps_no_copy_of_its_own_it_adds_nothing(options):
    # recomputed core attention keeps neither; FP8 keeps the FP8 copy beside
    # flash-attn's 16-bit output (already the row proj_input); a frozen
    # output projection keeps no input
    assert layer(flash_output_copy=True, **options).total == layer(**options).total


def test_a_lora_adapter_on_the_projection_reads_the_copy():
    options = dict(lora_rank=8, lora_targets=("linear_proj",))
    assert layer(flash_output_copy=True, **options).total - layer(**options).total == COPY


@pytest.mark.parametrize("comm, extra", [("p2p", COPY // 2), ("allgather", COPY // 2),
                                         ("a2a", 0)])
def test_context_parallel_keeps_it_unless_the_output_is_kept_before_the_all_to_all(comm, extra):
    def cp2(**options):
        return activation_memory(S, B, H, A, t=T, flash_attention=True, cp=2,
                                 cp_comm_type=comm, **options)
    assert cp2(flash_output_copy=True).total - cp2().total == extra


def test_the_copy_needs_flash_attention():
    with pytest.raises(ValueError, match="flash_output_copy=True needs flash_attention=True"):
        LayerConfig(S, B, H, A, flash_output_copy=True)
    with pytest.raises(TypeError, match="flash_output_copy"):
        LayerConfig(S, B, H, A, flash_attention=True, flash_output_copy="yes")


@pytest.mark.parametrize("backend, env, cc, deterministic, flash", [
    ("auto", {}, (8, 0), False, True),       # below Hopper TE prefers flash-attn
    ("auto", {}, (9, 0), False, False),      # Hopper: FusedAttention preferred
    ("auto", {}, (9, 0), True, False),
    ("auto", {}, (10, 0), False, False),
    ("auto", {}, (10, 0), True, True),       # Blackwell: no deterministic FusedAttention
    ("auto", {"NVTE_FUSED_ATTN": "0"}, (9, 0), False, True),
    ("auto", {"NVTE_FLASH_ATTN": "0"}, (8, 0), False, False),
    ("flash", {}, (9, 0), False, True),
    ("fused", {}, (8, 0), True, False),
])
def test_which_backend_transformer_engine_runs(backend, env, cc, deterministic, flash):
    assert te_runs_flash_attn(backend, env, cc, deterministic) is flash


LAUNCH = ["--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "4",
          "--seq-length", "512", "--max-position-embeddings", "512", "--micro-batch-size", "2",
          "--global-batch-size", "16", "--tokenizer-type", "NullTokenizer", "--vocab-size",
          "1000", "--bf16"]


@pytest.mark.parametrize("gpu, extra, env, copy", [
    ("A100 80GB", [], {}, True),
    ("H100 80GB SXM", [], {}, False),
    ("GB200", [], {}, False),
    ("GB200", ["--deterministic-mode"], {}, True),
    ("GB200", [], {"NVTE_ALLOW_NONDETERMINISTIC_ALGO": "0"}, True),
    ("H100 80GB SXM", ["--attention-backend", "flash"], {}, True),
    ("A100 80GB", ["--attention-backend", "fused"], {}, False),
    ("A100 80GB", ["--transformer-impl", "local"], {}, False),
])
def test_a_launch_runs_flash_attn_as_transformer_engine_decides(gpu, extra, env, copy):
    job = Job.from_megatron_args(LAUNCH + extra, world_size=8, env=env, gpu=gpu)
    assert job.model.flash_output_copy is copy


def test_deterministic_mode_sets_the_cublas_workspace_megatron_lm_sets():
    # megatron/training/determinism.py: CUBLAS_WORKSPACE_CONFIG=:4096:8 by setdefault
    job = Job.from_megatron_args(LAUNCH + ["--deterministic-mode"], world_size=8, gpu="A100 80GB")
    assert job.cublas_workspace_config == ":4096:8"
    given = Job.from_megatron_args(LAUNCH + ["--deterministic-mode"], world_size=8,
                                   env={"CUBLAS_WORKSPACE_CONFIG": ":16:8"}, gpu="A100 80GB")
    assert given.cublas_workspace_config == ":16:8"
    assert Job.from_megatron_args(LAUNCH, world_size=8).cublas_workspace_config is None

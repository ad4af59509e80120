"""Megatron-LM's unfused rotary embedding (--no-rope-fusion) keeps cos and sin
in every layer (actmem/layer/rope.py): hand derivations from rope_utils.py."""

import pytest

from actmem import Job, LayerConfig, ModelConfig, activation_memory, ledger_rows, training_memory

S, B, H, A = 2048, 2, 1024, 16
D = H // A
ROWS = 4 * S * D * 2   # cos and sin for Q and for K, (s, 1, 1, d) each, bf16


@pytest.mark.parametrize("options", [{}, {"t": 4}, {"t": 4, "sequence_parallel": True},
                                     {"recompute": "selective"}, {"kv_channels": 128}])
def test_each_layer_keeps_four_position_tensors_whole_on_every_rank(options):
    d = options.get("kv_channels", D)
    plain = activation_memory(S, B, H, A, flash_attention=True, **options)
    unfused = activation_memory(S, B, H, A, flash_attention=True, unfused_rope=True, **options)
    assert unfused.total - plain.total == 4 * S * d * 2   # no b, no /t, not split along s


def test_full_recomputation_and_context_parallelism():
    full = dict(flash_attention=True, recompute="full")
    assert activation_memory(S, B, H, A, unfused_rope=True, **full).total == \
        activation_memory(S, B, H, A, **full).total
    cp = dict(flash_attention=True, cp=2)
    assert activation_memory(S, B, H, A, unfused_rope=True, **cp).total - \
        activation_memory(S, B, H, A, **cp).total == ROWS // 2   # the rank's s/cp positions


def test_only_rotary_positions_rotate():
    rotary = ModelConfig(s=512, b=2, h=256, a=4, L=4, vocab_size=1000, positions="rotary",
                         flash_attention=True)
    learned = rotary.with_(positions="learned")
    assert rotary.with_(apply_rope_fusion=False).layer().unfused_rope
    assert not learned.with_(apply_rope_fusion=False).layer().unfused_rope
    mla = LayerConfig(S, B, H, A, flash_attention=True, multi_latent_attention=True,
                      q_lora_rank=None, unfused_rope=True)   # rotates its d_r = 64 columns
    assert {r.key: r.bytes for r in ledger_rows(mla)}["rope_cos_sin"] == 4 * S * 64 * 2
    with pytest.raises(TypeError, match="apply_rope_fusion"):
        rotary.with_(apply_rope_fusion="no")


LAUNCH = ["--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "4",
          "--seq-length", "512", "--max-position-embeddings", "512", "--micro-batch-size", "2",
          "--global-batch-size", "16", "--tokenizer-type", "NullTokenizer", "--vocab-size",
          "1000", "--bf16", "--position-embedding-type", "rope"]


def test_a_launch_with_no_rope_fusion():
    fused = Job.from_megatron_args(LAUNCH, world_size=1)
    unfused = Job.from_megatron_args(LAUNCH + ["--no-rope-fusion"], world_size=1)
    assert fused.model.apply_rope_fusion and not unfused.model.apply_rope_fusion
    held = [training_memory(job.with_(reserve=0)).stages[0].layer_activations
            for job in (unfused, fused)]
    assert held[0] - held[1] == 4 * (4 * 512 * 64 * 2)   # 4 layers, one micro-batch held
    learned = [a for a in LAUNCH if a not in ("--position-embedding-type", "rope")]
    assert Job.from_megatron_args(learned + ["--no-rope-fusion"], world_size=1).model.\
        apply_rope_fusion   # nothing rotates: the field keeps its default
    with pytest.raises(ValueError, match="--no-rope-fusion with --rotary-percent 0.5"):
        Job.from_megatron_args(LAUNCH + ["--no-rope-fusion", "--rotary-percent", "0.5"],
                               world_size=1)

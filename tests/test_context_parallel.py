"""Context parallelism (issue 23, item 2): rows per rank, validation, model states."""

import re

import pytest

from actmem import LayerConfig, activation_memory, ledger_rows, model_states
from actmem.layer.context_parallel import A2A_OUTPUT, CP_COMM_TYPES, SOURCES
from actmem.run.job.presets import MOE_PRESETS, PRESETS

LLAMA = dict(s=8192, b=1, h=4096, a=32, kv_heads=8, ffn_hidden_size=14336,
             activation="swiglu", dropout=False, flash_attention=True)
"""LLaMA-3-8B's layer (Meta's config: h 4096, 32 heads, 8 KV heads, f 14336)."""


def rows(**options):
    return {r.key: r.bytes for r in activation_memory(**{**LLAMA, **options}).rows}


def test_p2p_rows_are_the_rank_tokens_by_hand():
    """cp=4: 2048 tokens per rank; bf16 rows 2*2048*width, lse fp32 4*a*2048."""
    got = rows(cp=4)
    n, h, kv, f = 2048, 4096, 1024, 14336
    assert got == {"attn_norm_input": 2 * n * h, "qkv_input": 2 * n * h,
                   "query": 2 * n * h, "key": 2 * n * kv, "value": 2 * n * kv,
                   "softmax_lse": 4 * 32 * n, "proj_input": 2 * n * h,
                   "mlp_norm_input": 2 * n * h, "fc1_input": 2 * n * h,
                   "swiglu_gate": 2 * n * f, "swiglu_up": 2 * n * f, "fc2_input": 2 * n * f}


@pytest.mark.parametrize("options", [
    dict(t=4, sequence_parallel=True),
    dict(t=2, recompute="selective"),
    dict(recompute="full"),
    dict(dropout=True),
])
def test_p2p_and_allgather_equal_the_layer_on_s_over_cp(options):
    cp = 8
    local = rows(**{**options, "s": LLAMA["s"] // cp})
    assert rows(cp=cp, **options) == local
    assert rows(cp=cp, cp_comm_type="allgather", **options) == local


def test_rows_keep_the_global_tensor_over_t_times_cp_ranks():
    for row in activation_memory(**LLAMA, t=2, cp=4).rows:
        assert row.ranks in (4, 8)
        assert row.bytes * row.ranks == row.global_bytes
    sources = {r.key: r.source for r in activation_memory(**LLAMA, cp=4).rows}
    assert sources["query"] == SOURCES["p2p"]
    assert "get_batch_on_this_cp_rank" in sources["fc1_input"]


def test_a2a_keeps_the_output_before_the_all_to_all_back():
    p2p, a2a = rows(t=2, cp=4), rows(t=2, cp=4, cp_comm_type="a2a")
    assert a2a.pop(A2A_OUTPUT) == 2 * 8192 * 4096 // (2 * 4)
    assert a2a == p2p
    keys = [r.key for r in activation_memory(**LLAMA, cp=4, cp_comm_type="a2a").rows]
    assert keys.index(A2A_OUTPUT) == keys.index("proj_input") - 1
    hier = rows(t=2, cp=4, cp_comm_type="a2a+p2p", hierarchical_context_parallel_sizes=(2, 2))
    assert hier == rows(t=2, cp=4, cp_comm_type="a2a")


@pytest.mark.parametrize("recompute", ["selective", "full"])
def test_a2a_output_goes_with_the_recomputed_attention(recompute):
    assert rows(cp=4, cp_comm_type="a2a", recompute=recompute) == rows(cp=4, recompute=recompute)


def test_moe_routes_each_rank_own_tokens():
    """Capacity is computed from the rank's s*b/(t*cp) tokens (get_capacity)."""
    moe = dict(s=4096, b=1, h=1024, a=16, t=2, sequence_parallel=True, activation="swiglu",
               flash_attention=True, num_experts=8, moe_router_topk=2,
               moe_expert_capacity_factor=1.3)
    local = {r.key: r.bytes for r in activation_memory(**{**moe, "s": 1024}).rows}
    assert {r.key: r.bytes for r in activation_memory(**moe, cp=4).rows} == local


def test_cp_one_changes_nothing():
    assert ledger_rows(LayerConfig(**LLAMA)) == ledger_rows(LayerConfig(**LLAMA, cp=1))
    assert rows(cp=1, cp_comm_type="a2a") == rows()


@pytest.mark.parametrize("options, words", [
    (dict(cp=3), "s=8192 must be divisible by 2*cp=6"),
    (dict(cp=4, flash_attention=False), "cp=4 needs flash_attention=True"),
    (dict(cp=4, cp_comm_type="ring"), "cp_comm_type must be one of 'p2p', 'a2a'"),
    (dict(cp=16, cp_comm_type="a2a"), "cp=16 must divide a/t=32 and kv_heads/t=8"),
    (dict(cp=4, t=4, cp_comm_type="a2a"), "cp=4 must divide a/t=8 and kv_heads/t=2"),
    (dict(cp=4, cp_comm_type="a2a+p2p"), "needs hierarchical_context_parallel_sizes"),
    (dict(cp=4, cp_comm_type="a2a+p2p", hierarchical_context_parallel_sizes=(2, 4)),
     "must multiply to cp=4"),
    (dict(cp=16, t=8, cp_comm_type="a2a+p2p", hierarchical_context_parallel_sizes=(2, 8)),
     "hierarchical_context_parallel_sizes[0]=2 must divide a/t=4 and kv_heads/t=1"),
    (dict(cp=4, hierarchical_context_parallel_sizes=(2, 2)), "is for cp_comm_type='a2a+p2p'"),
    (dict(s=40, cp=4, t=8, sequence_parallel=True), "s/cp=10 (s=40, cp=4) must be divisible by t=8"),
    (dict(cp=0), "cp must be a positive integer"),
])
def test_refused_with_the_argument_and_what_is_allowed(options, words):
    with pytest.raises(ValueError) as err:
        activation_memory(**{**LLAMA, **options})
    assert words in str(err.value)


def test_cp_must_be_an_int():
    with pytest.raises(TypeError, match="cp must be a positive integer"):
        LayerConfig(**LLAMA, cp=2.0)


def test_megatron_list_of_hierarchical_sizes_is_accepted():
    c = LayerConfig(**LLAMA, cp=4, cp_comm_type="a2a+p2p",
                    hierarchical_context_parallel_sizes=[2, 2])
    assert c.hierarchical_context_parallel_sizes == (2, 2)
    assert set(CP_COMM_TYPES) == {"p2p", "a2a", "allgather", "a2a+p2p"}


def test_distributed_optimizer_shards_over_d_times_cp():
    model = PRESETS["llama3-8b"]
    plain = model_states(model, accounting="megatron", distributed_optimizer=True)
    cp8 = model_states(model, cp=8, accounting="megatron", distributed_optimizer=True)
    assert (cp8.weights, cp8.gradients) == (plain.weights, plain.gradients)
    assert cp8.optimizer == -(-12 * plain.parameters // 8)
    assert cp8 == model_states(model, d=8, accounting="megatron", distributed_optimizer=True)
    assert model_states(model, d=2, cp=4, zero_stage=3).weights == -(-2 * plain.parameters // 8)


def test_expert_states_shard_over_t_cp_d_over_ep_etp():
    model = MOE_PRESETS["mixtral-8x7b"]
    got = model_states(model, t=2, d=2, cp=2, ep=8, etp=1, accounting="megatron",
                       distributed_optimizer=True)
    e_d = 2 * 2 * 2 // 8
    dense = got.parameters - got.expert_parameters
    assert got.optimizer == -(-12 * dense // 4) + -(-12 * got.expert_parameters // e_d)
    with pytest.raises(ValueError, match="must divide t\\*cp\\*d=4"):
        model_states(model, t=1, d=2, cp=2, ep=8, etp=1)


def test_training_memory_runs_each_rank_on_s_over_cp_tokens():
    """p2p and allgather: a rank is the model on s/cp tokens, its states over d*cp."""
    from actmem import training_memory
    model, run = PRESETS["llama3-8b"].with_(s=65536), dict(
        t=8, sequence_parallel=True, accounting="megatron", distributed_optimizer=True,
        create_attention_mask_in_dataloader=False)
    ref = training_memory(model.with_(s=8192), d=8, **run).stages[0]
    for kind in ("p2p", "allgather"):
        got = training_memory(model, cp=8, cp_comm_type=kind, **run).stages[0]
        assert got.parts == ref.parts and got.peak == ref.peak


def test_training_memory_keeps_the_mask_rows_of_the_rank_queries():
    """get_batch_on_this_cp_rank splits the b*s*s mask along the queries only."""
    from actmem import training_memory
    from actmem.run.moments.timeline import CATEGORIES
    model, at = PRESETS["llama3-8b"].with_(s=16384), CATEGORIES.index("transient")
    events = [training_memory(model, t=8, sequence_parallel=True, cp=4,
                              create_attention_mask_in_dataloader=mask).stages[0].timeline.events
              for mask in (False, True)]
    assert max(y.bytes[at] - x.bytes[at] for x, y in zip(*events)) == 16384 // 4 * 16384


@pytest.mark.parametrize("options, words", [
    (dict(cp=8, precision="autocast"), "precision='autocast' does not model cp=8"),
    (dict(cp=6), "s=65536 must be divisible by 2*cp=12"),
    (dict(cp=True), "cp must be a positive integer"),
])
def test_training_memory_refuses_before_any_work(options, words):
    from actmem import training_memory
    with pytest.raises((TypeError, ValueError), match=re.escape(words)):
        training_memory(PRESETS["llama3-8b"].with_(s=65536), **options)


def test_training_memory_keeps_learned_positions_whole():
    from actmem import training_memory
    gpt = PRESETS["gpt2-large"].with_(flash_attention=True)
    assert (training_memory(gpt, cp=2).stages[0].weights
            == training_memory(gpt).stages[0].weights)


@pytest.mark.parametrize("t, sp, kind", [(1, False, "p2p"), (8, True, "p2p"), (2, True, "a2a"),
                                         (1, False, "allgather")])
def test_valid_sizes_are_exactly_those_layer_config_accepts(t, sp, kind):
    from actmem.layer.context_parallel import valid_context_parallel_sizes
    s = 384
    offered = valid_context_parallel_sizes(s, 32, t, kv_heads=8, sequence_parallel=sp,
                                           cp_comm_type=kind)
    accepted = []
    for cp in range(1, s + 1):
        try:
            LayerConfig(s, 1, 4096, 32, t, sequence_parallel=sp, kv_heads=8, cp=cp,
                        flash_attention=True, cp_comm_type=kind)
            accepted.append(cp)
        except ValueError:
            pass
    assert offered == accepted and len(offered) > 2


def test_docstring_examples():
    import doctest

    from actmem.layer import context_parallel
    result = doctest.testmod(context_parallel)
    assert result.attempted > 0 and result.failed == 0


def test_a2a_output_has_the_projection_input_width():
    """With multi-latent attention the output is a*v_head_dim wide, not h."""
    got = {r.key: r.bytes for r in activation_memory(
        8192, 1, 4096, 32, 2, flash_attention=True, multi_latent_attention=True, dropout=False,
        cp=4, cp_comm_type="a2a").rows}
    assert got[A2A_OUTPUT] == got["proj_input"] == 2 * 8192 * 32 * 128 // (2 * 4)


def test_training_memory_a2a_keeps_one_output_more_per_layer():
    from actmem import training_memory
    model = PRESETS["llama3-8b"].with_(s=65536)
    row = 2 * 65536 // 8 * 4096  # t=1: the whole hidden width of a rank's s/8 tokens
    for recompute, kept, working in (("none", row, 0), ("selective", 0, row), ("full", 0, row)):
        p2p, a2a = (training_memory(model, cp=8, cp_comm_type=kind, recompute=recompute,
                                    create_attention_mask_in_dataloader=False).stages[0]
                    for kind in ("p2p", "a2a"))
        assert a2a.layer_activations - p2p.layer_activations == model.L * kept
        assert a2a.recompute_working_set - p2p.recompute_working_set == working
        assert a2a.peak > p2p.peak if recompute == "none" else a2a.peak >= p2p.peak


def test_training_memory_a2a_is_for_dense_models():
    from actmem import training_memory
    with pytest.raises(ValueError, match="modelled in training_memory for dense models"):
        training_memory(MOE_PRESETS["mixtral-8x7b"].with_(flash_attention=True), t=2,
                        sequence_parallel=True, ep=8, d=4, cp=2, cp_comm_type="a2a")


def test_a2a_output_stays_unless_core_attn_is_recomputed():
    layer = dict(s=4096, b=1, h=4096, a=32, flash_attention=True, cp=2, cp_comm_type="a2a",
                 recompute="selective")
    keys = {mods: {r.key for r in activation_memory(**layer, recompute_modules=mods).rows}
            for mods in (None, (), ("core_attn",), ("mlp",))}
    assert "attn_output_a2a" not in keys[None] | keys[("core_attn",)]
    assert "attn_output_a2a" in keys[()] & keys[("mlp",)]  # () recomputes nothing

"""Mixture of experts (issue 23, item 1): the MoE rows, parameters, model states, errors.

Every expected number is derived here from the shapes, by hand, as the
rows' docstrings (actmem/layer/moe.py) and Megatron-LM's code state them.
"""

import pytest

import actmem
from actmem import MOE_PRESETS, activation_memory, model_states, parameter_count, training_memory
from actmem.layer.moe import DENSE_MLP_ROWS, NEEDED_FOR, SOURCES

S, B, H, A, E, K, FE = 2048, 1, 4096, 32, 8, 2, 14336
N = S * B
MOE = dict(activation="swiglu", num_experts=E, moe_router_topk=K, moe_ffn_hidden_size=FE)
MIXTRAL = MOE_PRESETS["mixtral-8x7b"]

MOE_ROWS = {  # key: (bytes per element, placement, group, bytes at t=1)
    "moe_input": (2, "replicated", "fixed", 2 * N * H),
    "router_topk_indices": (8, "replicated", "fixed", 8 * N * K),
    "router_probs": (4, "replicated", "fixed", 4 * N * K),
    "permute_probs_index": (8, "replicated", "fixed", 8 * N * E),
    "permute_index": (8, "replicated", "fixed", 8 * N * K),
    "expert_fc1_input": (2, "expert-routed", "intermediate", 2 * N * K * H),
    "expert_fc1_output": (2, "expert-routed", "intermediate", 2 * 2 * N * K * FE),
    "expert_probs": (2, "expert-routed", "intermediate", 2 * N * K),
    "expert_fc2_input": (2, "expert-routed", "intermediate", 2 * N * K * FE),
}


def rows(**options):
    return {r.key: r for r in activation_memory(S, B, H, A, **{**MOE, **options}).rows}


def test_moe_rows_replace_the_dense_mlp_at_t1():
    dense = activation_memory(S, B, H, A, activation="swiglu").rows
    moe = rows()
    keys = [r.key for r in dense if r.key not in DENSE_MLP_ROWS]
    at = keys.index("mlp_norm_input") + 1
    assert list(moe) == keys[:at] + list(MOE_ROWS) + keys[at:]
    for key, (bpe, placement, group, nbytes) in MOE_ROWS.items():
        r = moe[key]
        assert (r.bytes_per_element, r.placement, r.group, r.bytes) == (
            bpe, placement, group, nbytes), key
        assert r.block == "MoE" and r.needed_for == NEEDED_FOR[key] == NEEDED_FOR[key].strip()
        assert r.source == SOURCES[key] and ".py: " in r.source
    assert all(moe[k] == r for k, r in ((r.key, r) for r in dense) if k in moe
               and k not in MOE_ROWS)


def test_shared_experts_add_their_swiglu_rows_split_over_t():
    fs = 2816
    one = rows(moe_shared_expert_intermediate_size=fs)
    four = rows(moe_shared_expert_intermediate_size=fs, t=4, sequence_parallel=True)
    assert one["shared_fc1_output"].bytes == 2 * 2 * N * fs
    assert one["shared_fc2_input"].bytes == 2 * N * fs
    assert four["shared_fc1_output"].bytes == 2 * 2 * N * fs // 4
    assert four["shared_fc2_input"].placement == "hidden-split"


@pytest.mark.parametrize("t, etp", [(4, None), (4, 1), (4, 2), (2, 4)])
def test_sequence_parallel_splits_router_rows_and_etp_gathers_the_copies(t, etp):
    r = rows(t=t, sequence_parallel=True, etp=etp)
    x = t if etp is None else etp
    for key in ("moe_input", "router_topk_indices", "router_probs", "permute_probs_index",
                "permute_index"):
        assert r[key].bytes == MOE_ROWS[key][3] // t and r[key].placement == "sequence-split"
    # each rank: N/t tokens x k copies, all-gathered over etp, width f_e/etp
    assert r["expert_fc1_input"].bytes == 2 * (N // t) * K * x * H
    assert r["expert_probs"].bytes == 2 * (N // t) * K * x
    assert r["expert_fc1_output"].bytes == 2 * (N // t) * K * x * 2 * FE // x
    assert r["expert_fc2_input"].bytes == 2 * (N // t) * K * FE


def test_recomputation_and_dropout_act_on_moe_rows_as_on_the_others():
    assert list(rows(recompute="full")) == ["layer_input"]
    selective = rows(recompute="selective")
    assert set(MOE_ROWS) <= set(selective) and "softmax_output" not in selective
    assert "mlp_out_dropout_mask" not in rows(dropout=False)


@pytest.mark.parametrize("factor, pad, copies", [
    (1.0, False, N * K),      # balanced share N*k/E = 512 fits the capacity 512: no drop
    (0.5, False, E * 256),    # capacity 256 below the share: each expert keeps 256
    (1.25, True, E * 640),    # padded to capacity ceil(512 * 1.25) = 640, exactly
    (8, True, E * N),         # capacity 4096 above the 2048 tokens: every token, every expert
])
def test_capacity_factor_caps_or_pads_the_routed_copies(factor, pad, copies):
    r = rows(moe_expert_capacity_factor=factor, moe_pad_expert_input_to_capacity=pad)
    assert r["router_capacity_mask"].bytes == N * E  # bool, the probabilities' mask
    assert r["expert_fc1_input"].bytes == 2 * copies * H
    assert r["expert_fc1_output"].bytes == 2 * 2 * copies * FE
    assert r["expert_fc2_input"].bytes == 2 * copies * FE
    assert r["permute_index"].bytes == 8 * copies
    assert r["permute_probs_index"].bytes == (8 * copies if pad else 8 * N * E)


def test_the_load_balancing_loss_keeps_the_softmax_over_all_experts():
    r = rows(moe_aux_loss_coeff=0.01)
    assert r["router_aux_scores"].bytes == 4 * N * E  # fp32, every expert's probability
    assert list(r).index("router_aux_scores") == list(r).index("router_probs") + 1
    four = rows(moe_aux_loss_coeff=0.01, t=4, sequence_parallel=True)
    assert four["router_aux_scores"].bytes == 4 * N * E // 4
    assert "router_aux_scores" not in rows()  # Megatron-LM's default coefficient 0


def test_mixtral_parameter_count_is_the_published_one():
    # Jiang et al. 2024, Table 1; the Hugging Face safetensors total of Mixtral-8x7B-v0.1
    count = parameter_count(MIXTRAL)
    attention = 2 * H * H + 2 * H * 1024
    per_layer = attention + E * 3 * H * FE + E * H + 2 * H
    assert count == 32 * per_layer + 2 * 32000 * H + H == 46_702_792_704
    assert (count.moe_layers, count.per_moe_layer, count.experts) == (32, per_layer,
                                                                      E * 3 * H * FE)


def test_deepseek_moe_parameter_count_is_the_published_one():
    # deepseek-ai/deepseek-moe-16b-base: 16,375,728,128 (safetensors total, "16.4B")
    m = MOE_PRESETS["deepseek-moe-16b"]
    h, attention, norms = 2048, 4 * 2048 * 2048, 2 * 2048
    dense = attention + 3 * h * 10944 + norms
    moe = attention + 64 * 3 * h * 1408 + 3 * h * 2816 + 64 * h + norms
    assert m.moe_pattern() == (0,) + (1,) * 27
    assert parameter_count(m) == dense + 27 * moe + 2 * 102400 * h + h == 16_375_728_128


def test_expert_states_are_sharded_over_ep_etp_and_the_expert_data_parallel_group():
    # per MoE layer: attention over t, router (E x h) and two RMSNorms whole;
    # stage 0 also holds the embedding of the vocabulary padded to 128*t: 32256
    dense_stage0 = 8 * ((2 * H * H + 2 * H * 1024) // 4 + E * H + 2 * H) + 32256 * H // 4
    experts = 8 * E * 3 * H * FE // (8 * 4)  # 8 layers, E/ep experts, width / etp (= t)
    for d, e_d in ((8, 1), (16, 2)):
        s = model_states(MIXTRAL, t=4, p=4, d=d, ep=8, accounting="megatron",
                         distributed_optimizer=True, stage=0)
        assert (s.parameters, s.expert_parameters) == (dense_stage0 + experts, experts)
        assert s.weights == 2 * s.parameters and s.gradients == 4 * s.parameters
        assert s.optimizer == -(-12 * dense_stage0 // d) + 12 * experts // e_d
        assert actmem.expert_data_parallel(MIXTRAL, 4, d, 8) == e_d
    zero = model_states(MIXTRAL, t=2, d=4, ep=2, etp=1, zero_stage=3)
    experts = 32 * E * 3 * H * FE // 2
    assert zero.expert_parameters == experts
    assert zero.weights == -(-2 * (zero.parameters - experts) // 4) + 2 * experts // 4


def test_training_memory_takes_ep_and_the_moe_rows():
    run = dict(t=4, p=4, d=8, m=8, sequence_parallel=True, accounting="megatron",
               distributed_optimizer=True)
    r = training_memory(MIXTRAL, ep=8, **run)
    layer = actmem.activation_memory(
        **{k: v for k, v in vars(MIXTRAL.layer(4, True)).items()}).total
    assert r.stages[0].layer_activations == 4 * 8 * layer  # 1F1B: p passes x L/p layers
    assert r.stages[3].weights == model_states(MIXTRAL, ep=8, stage=3, **{
        k: run[k] for k in ("t", "p", "d", "accounting", "distributed_optimizer")}).weights


@pytest.mark.parametrize("call, message", [
    (lambda: activation_memory(S, B, H, A, **{**MOE, "moe_router_topk": 9}),
     r"moe_router_topk=9 must be between 1 and num_experts=8"),
    (lambda: activation_memory(S, B, H, A, **{**MOE, "t": 2}),
     r"num_experts=8 with t=2 needs sequence_parallel=True"),
    (lambda: activation_memory(S, B, H, A, **{**MOE, "moe_aux_loss_coeff": 0.01,
                                              "moe_router_load_balancing_type": "sinkhorn"}),
     r"moe_aux_loss_coeff=0.01 with moe_router_load_balancing_type='sinkhorn'"),
    (lambda: activation_memory(S, B, H, A, **{**MOE, "moe_expert_capacity_factor": 1.0,
                                              "moe_router_load_balancing_type": "sinkhorn"}),
     r"capacity works with aux_loss, seq_aux_loss, global_aux_loss or none only"),
    (lambda: activation_memory(S, B, H, A, **{**MOE, "moe_expert_capacity_factor": 1.0,
                                              "moe_token_dispatcher_type": "allgather"}),
     r"moe_token_dispatcher_type='allgather': actmem counts token dropping"),
    (lambda: activation_memory(S, B, H, A, **{**MOE, "moe_token_dispatcher_type": "deepep"}),
     r"moe_token_dispatcher_type must be one of 'alltoall', 'allgather', 'flex', got 'deepep'"),
    (lambda: activation_memory(S, B, H, A, **{**MOE, "moe_router_load_balancing_type": 1}),
     r"moe_router_load_balancing_type must be one of 'aux_loss'.*got 1"),
    (lambda: activation_memory(S, B, H, A, **{**MOE, "moe_router_dtype": "bf16"}),
     r"moe_router_dtype must be None \(the activations' bf16\), 'fp32' or 'fp64', got 'bf16'"),
    (lambda: activation_memory(S, B, H, A, moe_router_dtype="fp32"),
     r"moe_router_dtype='fp32' needs num_experts"),
    (lambda: activation_memory(S, B, H, A, moe_ffn_hidden_size=128),
     r"moe_ffn_hidden_size=128 needs num_experts"),
    (lambda: activation_memory(S, B, H, A, **{**MOE, "etp": 3}),
     r"etp=3 must divide moe_ffn_hidden_size=14336; valid etp: 1, 2, 4, 7"),
    (lambda: activation_memory(S, B, H, A, **MOE, moe_pad_expert_input_to_capacity=True),
     r"moe_pad_expert_input_to_capacity=True needs moe_expert_capacity_factor"),
    (lambda: activation_memory(S, B, H, A, **MOE, moe_expert_capacity_factor=0),
     r"moe_expert_capacity_factor must be None \(dropless\) or a finite number > 0, got 0"),
    (lambda: activation_memory(S, B, H, A, **MOE, moe_expert_capacity_factor=float("inf")),
     r"moe_expert_capacity_factor must be None"),
    (lambda: activation_memory(S, B, H, A, **MOE, moe_aux_loss_coeff=-0.01),
     r"moe_aux_loss_coeff must be a finite number >= 0 \(0: no load-balancing loss\), "
     r"got -0.01"),
    (lambda: activation_memory(S, B, H, A, moe_aux_loss_coeff=0.01),
     r"moe_aux_loss_coeff=0.01 needs num_experts"),
    (lambda: model_states(MIXTRAL, ep=3), r"ep=3 must divide num_experts=8; valid ep: 1, 2, 4, 8"),
    (lambda: model_states(MIXTRAL, t=2, d=2, ep=8),
     r"ep\*etp=16 \(ep=8, etp=2\) must divide t\*d=4"),
    (lambda: model_states(actmem.PRESETS["llama2-7b"], ep=2),
     r"ep=2, etp=None: expert parallelism needs an MoE model"),
    (lambda: model_states(10**9, ep=2), r"a bare parameter count has no experts"),
    (lambda: MIXTRAL.with_(moe_layer_freq=(1, 0)), r"tuple of L=32 zeros .* and ones"),
    (lambda: MIXTRAL.with_(bias=True), r"bias=True: the MoE layers are counted without biases"),
])
def test_invalid_moe_input_names_the_argument_and_what_is_allowed(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_gelu_experts_states_shard_as_the_dense_part_does_to_the_byte():
    """Megatron-LM's default MoE (GeLU experts, 2 h f_e each): the attention
    over t, router (E x h) and the two LayerNorms (weight and bias) whole on
    each tensor-parallel rank, the experts over ep and etp, and the
    distributed optimizer shards the dense part over d and the experts over
    the expert data-parallel group t*d/(ep*etp)."""
    h, L, f, vocab = 512, 4, 2048, 50304
    gelu = actmem.ModelConfig(s=1024, b=4, h=h, a=8, L=L, vocab_size=vocab, bias=False,
                              num_experts=8, moe_router_topk=1,
                              moe_router_load_balancing_type="sinkhorn",
                              moe_token_dispatcher_type="allgather", flash_attention=True)
    t, d, ep = 2, 4, 2
    etp, e_d = t, t * d // (ep * t)
    attention, router, norms = 4 * h * h // t, 8 * h, 2 * 2 * h
    experts = L * (8 // ep) * 2 * h * f // etp
    padded = 50432   # the vocabulary padded to a multiple of 128 * t = 256
    dense = L * (attention + router + norms) + padded * h // t + 1024 * h + 2 * h
    s = model_states(gelu, t=t, d=d, ep=ep, accounting="megatron", distributed_optimizer=True)
    assert (s.parameters, s.expert_parameters) == (dense + experts, experts)
    assert (s.weights, s.gradients) == (2 * s.parameters, 4 * s.parameters)
    assert s.optimizer == -(-12 * dense // d) + 12 * experts // e_d


def test_allgather_and_sinkhorn_rows_at_t2_by_hand():
    """t = etp = 2 under sequence parallelism: the router's rows split along
    s, the all-gather dispatcher's over the gathered s*b*etp/t tokens."""
    r = rows(t=2, sequence_parallel=True, moe_token_dispatcher_type="allgather",
             moe_router_load_balancing_type="sinkhorn", moe_router_topk=1,
             moe_router_dtype="fp32")
    n = N // 2   # a rank's tokens
    assert r["router_sinkhorn_scores"].bytes == 4 * n * E      # sigmoid in the fp32 logits
    assert r["router_routing_map"].bytes == n * E
    assert r["permute_index"].bytes == 8 * n * 1 * 2          # k = 1 copy, gathered over etp
    assert r["dispatch_local_probs"].bytes == 4 * n * 2 * E   # fp32 over the gathered tokens
    assert r["dispatch_local_map"].bytes == n * 2 * E
    assert r["expert_probs"].bytes == 4 * n * 2
    assert "router_topk_indices" not in r and "permute_probs_index" not in r

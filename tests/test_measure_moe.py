"""The reference MoE layer's saved tensors against the MoE ledger rows, on CPU.

Small layer (s=32, b=2, h=64, a=4, SwiGLU) with 4 experts; one rank, so every
routed copy stays local and the expert rows are exact whatever the routing.
Skipped without torch unless CI is set (then torch must be there).
"""

import os

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("torch", reason="torch is not installed: "
                        "pip install torch==2.13.0 --index-url "
                        "https://download.pytorch.org/whl/cpu")

import torch  # noqa: E402

from actmem import LayerConfig, activation_memory  # noqa: E402
from actmem.layer.moe import DENSE_MLP_ROWS  # noqa: E402
from actmem.measure.compare import compare  # noqa: E402
from actmem.measure.layer import layer_input  # noqa: E402
from actmem.measure.moe import (ReferenceMoELayer, SwiGLU, WeightedSwiGLU,  # noqa: E402
                                measure_moe)
from actmem.measure.moe_parallel import measure_expert_parallel  # noqa: E402

s, b, h, a = 32, 2, 64, 4
N = s * b
BASE = dict(s=s, b=b, h=h, a=a, activation="swiglu", num_experts=4, moe_ffn_hidden_size=96)
VARIANTS = {
    "top2_shared": dict(moe_router_topk=2, moe_shared_expert_intermediate_size=64),
    "top1": dict(moe_router_topk=1, moe_router_pre_softmax=True),
    "top3_no_dropout": dict(moe_router_topk=3, dropout=False),
    "selective": dict(moe_router_topk=2, recompute="selective"),
    "full": dict(moe_router_topk=2, recompute="full"),
    "capacity_no_drop": dict(moe_router_topk=2, moe_expert_capacity_factor=2.0),
    "capacity_drop": dict(moe_router_topk=2, moe_expert_capacity_factor=0.5),
    "aux_loss": dict(moe_router_topk=2, moe_aux_loss_coeff=0.01),
    "capacity_padded": dict(moe_router_topk=2, moe_expert_capacity_factor=1.3,
                            moe_pad_expert_input_to_capacity=True),
    "gelu_shared": dict(activation="gelu", moe_router_topk=2,
                        moe_shared_expert_intermediate_size=64),
    "sinkhorn_top1": dict(activation="gelu", moe_router_topk=1,
                          moe_router_load_balancing_type="sinkhorn"),
    "sinkhorn_top2": dict(moe_router_topk=2, moe_router_load_balancing_type="sinkhorn"),
    "allgather": dict(moe_router_topk=2, moe_token_dispatcher_type="allgather"),
    "allgather_sinkhorn_gelu": dict(activation="gelu", moe_router_topk=1,
                                    moe_router_load_balancing_type="sinkhorn",
                                    moe_token_dispatcher_type="allgather"),
    "router_fp32": dict(moe_router_topk=2, moe_router_dtype="fp32"),
    "router_fp32_allgather": dict(activation="gelu", moe_router_topk=2,
                                  moe_router_dtype="fp32", moe_token_dispatcher_type="allgather"),
    "sinkhorn_top1_fp32": dict(activation="gelu", moe_router_topk=1, moe_router_dtype="fp32",
                               moe_router_load_balancing_type="sinkhorn"),
    "pre_softmax_groups": dict(moe_router_topk=2, moe_router_pre_softmax=True,
                               moe_router_num_groups=2, moe_router_group_topk=1),
    "softmax_groups_aux": dict(moe_router_topk=2, moe_router_num_groups=2,
                               moe_router_group_topk=2, moe_aux_loss_coeff=0.01),
    "sigmoid_top1": dict(moe_router_topk=1, moe_router_score_function="sigmoid"),
    "sigmoid_aux_fp32": dict(moe_router_topk=3, moe_router_score_function="sigmoid",
                             moe_aux_loss_coeff=0.01, moe_router_dtype="fp32"),
    "sigmoid_groups": dict(moe_router_topk=2, moe_router_score_function="sigmoid",
                           moe_router_num_groups=2, moe_router_group_topk=1),
    "permute_fusion": dict(moe_router_topk=2, moe_permute_fusion=True,
                           moe_shared_expert_intermediate_size=64),
    "permute_fusion_gelu_capacity": dict(activation="gelu", moe_router_topk=3,
                                         moe_permute_fusion=True,
                                         moe_expert_capacity_factor=0.5),
    "deepseek_router": dict(moe_router_topk=2, moe_router_score_function="sigmoid",
                            moe_router_enable_expert_bias=True, moe_router_num_groups=2,
                            moe_router_group_topk=1, moe_aux_loss_coeff=0.01,
                            moe_router_load_balancing_type="seq_aux_loss"),
}
LAYERNORM_STATS = 2 * 2 * (N * 2)
"""Two LayerNorms x (mean, rstd) x s*b bfloat16 elements (CPU), as test_measure."""


@pytest.fixture(scope="module")
def measured():
    return {name: compare(measure_moe(LayerConfig(**{**BASE, **extra})))
            for name, extra in VARIANTS.items()}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_moe_row_is_measured_exactly(measured, name):
    c = measured[name]
    assert all(r.exact for r in c.rows), [r for r in c.rows if not r.exact]
    config = LayerConfig(**{**BASE, **VARIANTS[name]})
    assert c.measured_rows_total == c.ledger_total == activation_memory(
        **vars(config)).total


def test_the_moe_rows_bytes_by_hand(measured):
    k, E, fe, fs = 2, 4, 96, 64
    rows = {r.key: r.measured_bytes for r in measured["top2_shared"].rows}
    assert {key: rows[key] for key in rows if key.startswith(("router", "permute", "expert",
                                                              "shared", "moe"))} == {
        "moe_input": 2 * N * h, "router_topk_indices": 8 * N * k, "router_probs": 4 * N * k,
        "permute_probs_index": 8 * N * E, "permute_index": 8 * N * k,
        "expert_fc1_input": 2 * N * k * h, "expert_fc1_output": 2 * 2 * N * k * fe,
        "expert_probs": 2 * N * k, "expert_fc2_input": 2 * N * k * fe,
        "shared_fc1_output": 2 * 2 * N * fs, "shared_fc2_input": 2 * N * fs}
    assert not set(DENSE_MLP_ROWS) & set(rows)


@pytest.mark.parametrize("name", ["top2_shared", "top1", "top3_no_dropout", "selective",
                                  "capacity_drop", "capacity_padded", "gelu_shared",
                                  "sinkhorn_top1", "sinkhorn_top2", "allgather",
                                  "allgather_sinkhorn_gelu", "router_fp32",
                                  "router_fp32_allgather", "sinkhorn_top1_fp32",
                                  "pre_softmax_groups", "sigmoid_top1", "sigmoid_groups",
                                  "permute_fusion", "permute_fusion_gelu_capacity"])
def test_the_only_extras_are_the_layernorm_statistics(measured, name):
    extras = measured[name].extras
    assert [e.storage.saved_by[0].split(".")[0] for e in extras] == [
        "NativeLayerNormBackward0"] * 4
    assert measured[name].extras_total == LAYERNORM_STATS


def test_the_router_rows_of_each_score_function_by_hand(measured):
    """topk_routing_with_score_function (moe_utils.py) on N tokens, E = 4:
    the softmax before top-k keeps its fp32 scores over all E and the
    indices; the sigmoid keeps its fp32 scores, the indices and, for k > 1,
    the k chosen scores and their sum; groups add an N x E bool mask unless
    an expert bias picks the experts (its top-k is dropped at once); the
    load-balancing loss adds the sigmoid over all E again and its sum."""
    E = 4

    def router(name):
        return {r.key: r.measured_bytes for r in measured[name].rows
                if r.key.startswith("router")}
    assert router("top1") == {"router_topk_indices": 8 * N, "router_scores": 4 * N * E}
    assert router("pre_softmax_groups") == {"router_topk_indices": 8 * N * 2,
                                            "router_scores": 4 * N * E,
                                            "router_group_mask": N * E}
    assert router("sigmoid_top1") == {"router_topk_indices": 8 * N, "router_scores": 4 * N * E}
    assert router("sigmoid_groups") == {
        "router_topk_indices": 8 * N * 2, "router_scores": 4 * N * E,
        "router_probs": 4 * N * 2, "router_score_sums": 4 * N, "router_group_mask": N * E}
    assert router("deepseek_router") == {
        "router_topk_indices": 8 * N * 2, "router_scores": 4 * N * E,
        "router_probs": 4 * N * 2, "router_score_sums": 4 * N,
        "router_aux_scores": 4 * N * E, "router_aux_sums": 4 * N}
    extras = sorted(e.storage.saved_by[0].split(".")[0] for e in measured["deepseek_router"].extras)
    assert extras == ["AuxLossAutoScalerBackward", "MulBackward0"] + [
        "NativeLayerNormBackward0"] * 4   # the 0-d loss and the E token counts


def test_the_fused_permutation_keeps_int32_row_maps(measured):
    """Transformer Engine's moe_permute_with_probs: an int32 row map of
    N x (2E + 1), which moe_unpermute saves again; the two sorts by local
    expert one int32 entry per routed copy each; no int64 index."""
    E, k = 4, 2
    rows = {r.key: r.measured_bytes for r in measured["permute_fusion"].rows}
    assert (rows["permute_row_id_map"], rows["sort_row_id_map"]) == (4 * N * (2 * E + 1),
                                                                      2 * 4 * N * k)
    assert "permute_index" not in rows and "permute_probs_index" not in rows


def test_the_fused_functions_differentiate_as_the_unfused_ones():
    from actmem.measure.moe_functions import FusedPermute, FusedSort, FusedUnpermute
    gen = torch.Generator().manual_seed(5)
    n, E, hid = 6, 3, 2
    routing_map = torch.rand(n, E, generator=gen) > 0.4
    x = torch.randn(n, hid, dtype=torch.float64, generator=gen, requires_grad=True)
    p = torch.randn(n, E, dtype=torch.float64, generator=gen, requires_grad=True)

    def fused(x, p):
        y, w, row_map = FusedPermute.apply(x, p, routing_map)
        counts = routing_map.sum(dim=0).tolist()
        y, w, _ = FusedSort.apply(y, w, counts, [2, 0, 1])
        y = y * w.unsqueeze(-1)
        y, _, _ = FusedSort.apply(y, None, [counts[i] for i in (2, 0, 1)], [1, 2, 0])
        return FusedUnpermute.apply(y, row_map)
    assert torch.allclose(fused(x, p), x * (p * routing_map).sum(dim=1, keepdim=True))
    assert torch.autograd.gradcheck(fused, (x, p))


def test_gelu_experts_keep_their_output_for_the_probabilities(measured):
    fe, fs, k = 96, 64, 2
    rows = {r.key: r.measured_bytes for r in measured["gelu_shared"].rows}
    assert {key: rows[key] for key in rows if key.startswith(("expert", "shared"))} == {
        "expert_fc1_input": 2 * N * k * h, "expert_fc1_output": 2 * N * k * fe,
        "expert_act_output": 2 * N * k * fe, "expert_probs": 2 * N * k,
        "expert_fc2_input": 2 * N * k * fe,
        "shared_fc1_output": 2 * N * fs, "shared_fc2_input": 2 * N * fs}


def test_sinkhorn_keeps_every_score_and_the_routing_map(measured):
    E = 4
    top1 = {r.key: r for r in measured["sinkhorn_top1"].rows}
    assert (top1["router_sinkhorn_scores"].measured_bytes,
            top1["router_sinkhorn_scores"].measured_dtype) == (2 * N * E, "bfloat16")  # sigmoid
    assert top1["router_routing_map"].measured_bytes == N * E  # bool
    assert "router_topk_indices" not in top1 and "router_probs" not in top1
    top2 = {r.key: r for r in measured["sinkhorn_top2"].rows}
    assert (top2["router_sinkhorn_scores"].measured_bytes,
            top2["router_sinkhorn_scores"].measured_dtype) == (4 * N * E, "float32")  # softmax
    fp32 = {r.key: r.measured_bytes for r in measured["sinkhorn_top1_fp32"].rows}
    assert fp32["router_sinkhorn_scores"] == 4 * N * E  # sigmoid in the logits' fp32


def test_the_allgather_dispatcher_keeps_masked_select_inputs(measured):
    E, k = 4, 2
    rows = {r.key: r.measured_bytes for r in measured["allgather"].rows}
    assert "permute_probs_index" not in rows
    assert (rows["permute_index"], rows["dispatch_local_probs"],
            rows["dispatch_local_map"]) == (8 * N * k, 2 * N * E, N * E)
    fp32 = {r.key: r.measured_bytes for r in measured["router_fp32_allgather"].rows}
    assert (fp32["dispatch_local_probs"], fp32["expert_probs"]) == (4 * N * E, 4 * N * k)


def test_an_fp32_router_keeps_fp32_probabilities_only(measured):
    rows = {r.key: r.measured_bytes for r in measured["router_fp32"].rows}
    bf16 = {r.key: r.measured_bytes for r in measured["top2_shared"].rows}
    assert rows["expert_probs"] == 2 * bf16["expert_probs"] == 4 * N * 2
    assert rows["moe_input"] == 2 * N * h  # the router saves its bf16 input, not a copy


def test_capacity_padding_gives_each_expert_exactly_its_capacity(measured):
    capacity = 42  # ceil(64 tokens * 2 / 4 experts * 1.3)
    rows = {r.key: r.measured_bytes for r in measured["capacity_padded"].rows}
    assert rows["expert_fc1_input"] == 2 * 4 * capacity * h
    assert rows["permute_index"] == rows["permute_probs_index"] == 8 * 4 * capacity
    assert rows["router_capacity_mask"] == N * 4  # bool


def test_the_load_balancing_loss_adds_its_softmax_and_two_tiny_extras(measured):
    c = measured["aux_loss"]
    rows = {r.key: r for r in c.rows}
    assert rows["router_aux_scores"].measured_bytes == 4 * N * 4  # fp32 over 4 experts
    assert rows["router_aux_scores"].measured_dtype == "float32"
    tiny = [(e.storage.saved_by[0], e.storage.dtype, e.storage.nbytes) for e in c.extras
            if not e.storage.saved_by[0].startswith("NativeLayerNorm")]
    assert tiny == [("MulBackward0.other", "int64", 8 * 4),  # tokens per expert
                    ("AuxLossAutoScalerBackward.saved_tensors", "float32", 4)]  # the loss


def test_full_recomputation_keeps_only_the_layer_input(measured):
    c = measured["full"]
    assert [r.key for r in c.rows] == ["layer_input"] and c.extras == ()
    assert c.measured_rows_total == 2 * N * h


def test_routing_is_uneven_yet_the_copies_are_n_times_k():
    config = LayerConfig(**BASE, **VARIANTS["top2_shared"])
    layer = ReferenceMoELayer(config)
    tokens = layer.norm2(layer_input(config)).view(-1, h)
    _, routing_map = layer._route(tokens)
    counts = routing_map.sum(dim=0).tolist()
    assert sum(counts) == N * 2 and len(set(counts)) > 1  # not balanced, still N*k copies


def test_two_expert_parallel_ranks_average_to_the_ledger():
    """ep = 2 on two gloo processes: every row but the routed copies' is exact
    on each rank; the copies each rank's experts receive depend on the
    router, but their mean over the ranks is the ledger's N*k (each copy sent
    is received once), so the expert rows average to the ledger exactly."""
    config = LayerConfig(**BASE, **VARIANTS["top2_shared"])
    ranks = measure_expert_parallel(config, 2)
    checks = [compare(m) for m, _, _ in ranks]
    expert = {"expert_fc1_input", "expert_fc1_output", "expert_probs", "expert_fc2_input"}
    for c, (_, received, trained) in zip(checks, ranks):
        assert trained and c.extras_total == LAYERNORM_STATS
        assert all(r.exact for r in c.rows if r.key not in expert)
        rows = {r.key: r.measured_bytes for r in c.rows}
        assert rows["expert_fc1_input"] == 2 * received * h
        assert rows["expert_fc2_input"] == 2 * received * 96
    assert sum(received for _, received, _ in ranks) == 2 * N * 2
    for key in expert:
        measured = [next(r for r in c.rows if r.key == key) for c in checks]
        assert sum(r.measured_bytes for r in measured) == 2 * measured[0].ledger_bytes, key


def test_the_fused_functions_have_the_gradients_of_their_formulas():
    gen = torch.Generator().manual_seed(0)
    y = torch.randn(5, 6, dtype=torch.float64, generator=gen, requires_grad=True)
    w = torch.rand(5, 1, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(SwiGLU.apply, (y,))
    assert torch.autograd.gradcheck(WeightedSwiGLU.apply, (y, w))


def test_the_layer_trains_every_expert_that_got_tokens():
    config = LayerConfig(**BASE, **VARIANTS["top2_shared"])
    layer = ReferenceMoELayer(config)
    x = layer_input(config)
    layer(x).float().sum().backward()
    assert x.grad is not None and layer.router.grad.abs().sum() > 0
    assert all(layer.fc1.grad[e].abs().sum() > 0 for e in range(4))


def test_the_reference_refuses_what_it_does_not_measure():
    with pytest.raises(ValueError, match="needs num_experts and t = etp = 1"):
        ReferenceMoELayer(LayerConfig(s, b, h, a, activation="swiglu"))
    with pytest.raises(ValueError, match="needs num_experts and t = etp = 1"):
        ReferenceMoELayer(LayerConfig(**BASE, etp=2))

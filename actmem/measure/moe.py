"""A reference mixture-of-experts layer in plain PyTorch, in Megatron-LM's order.

The attention block is :class:`.layer.ReferenceLayer`'s; the MLP is replaced
by Megatron-LM's MoE layer (``megatron/core/transformer/moe/``) on one rank
(t = ep = etp = 1), operation by operation on the default training path:

1. router: ``logits = x W_r^T`` in the router's dtype, scored and
   picked by :func:`.router.route` (by default top-k of the logits and
   the softmax of the k scores in fp32), cast back, scattered into an
   N x E probability map (``moe_utils.py``: RouterGatingLinearFunction,
   topk_routing_with_score_function); or Sinkhorn's (``router.py``:
   sinkhorn_load_balancing);
2. permutation 1 (``moe_utils.py``: permute, unfused): the routing map's
   argsort picks each expert's tokens; ``index_select`` copies them (the
   all-gather dispatcher then picks the probabilities with
   ``masked_select`` and has no permutation 2);
3. permutation 2 (``token_dispatcher.py``: sort_chunks_by_idxs, unfused
   split and cat), with the expert-parallel all-to-all and the etp
   all-gather being no-ops on one rank;
4. experts one by one (``experts.py``: SequentialMLP order; TEGroupedMLP
   saves the same bytes): fc1, the weighted SwiGLU that saves only its
   input and the probabilities (:class:`WeightedSwiGLU`, as
   ``fused_bias_swiglu.py``: WeightedSwiGLUFunction) or GeLU times the
   probabilities (the unfused path), fc2;
5. unpermutation: ``scatter_add_`` of the copies into their tokens
   (``moe_utils.py``: unpermute);
6. shared experts: fc1, fused SwiGLU (:class:`SwiGLU`), fc2, added.

Each tensor the ledger counts is tagged with :func:`.saved.named` under its
row key of :mod:`actmem.layer.moe`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..layer.config import LayerConfig
from .layer import ReferenceLayer, dropout
from .run import Measurement, recorded
from .moe_functions import (AuxLossAutoScaler, FusedPermute, FusedSort, FusedUnpermute,
                            RouterGating, SwiGLU, WeightedSwiGLU, sinkhorn)
from .router import aux_scores, route
from .saved import block, named


class ReferenceMoELayer(ReferenceLayer):
    """One GPT layer whose MLP is a mixture of experts, on one rank.

    Args:
        config: a layer with ``num_experts`` (t = 1, etp 1 or None).
        mask, seed, dtype: as :class:`.layer.ReferenceLayer`.

    Raises:
        ValueError: ``config`` has no experts, or t > 1 (the expert-parallel
            and tensor-parallel collectives are not measured).
    """

    def __init__(self, config: LayerConfig, *, mask="bool", seed=0, dtype=torch.bfloat16):
        if config.num_experts is None or config.t != 1 or config.expert_t != 1:
            raise ValueError(f"ReferenceMoELayer needs num_experts and t = etp = 1, got "
                             f"num_experts={config.num_experts}, t={config.t}, "
                             f"etp={config.etp}")
        super().__init__(config, 0, mask=mask, seed=seed, dtype=dtype)
        self.first_expert = 0
        E, h, f, fs = (config.num_experts, config.h, config.f_e,
                       config.moe_shared_expert_intermediate_size)
        gen = torch.Generator().manual_seed(seed + 1)

        def weight(*shape):
            return nn.Parameter((torch.randn(*shape, generator=gen) * shape[-2] ** -0.5)
                                .to(dtype))
        glu = 2 if config.activation == "swiglu" else 1
        self.router = weight(h, E)
        self.fc1, self.fc2 = weight(E, h, glu * f), weight(E, f, h)
        self.shared = (weight(h, glu * fs), weight(fs, h)) if fs else ()
        for i, w in enumerate(self.shared):
            self.register_parameter(f"shared{i}", w)

    def _mlp(self, x, seed):
        with block("mlp_norm"):
            y = named("moe_input", self.norm2(x))
        with block("moe"):
            shared = self._shared_experts(y)  # Megatron-LM: shared experts before routing
            out = self._moe(y.view(-1, y.shape[-1])).view_as(y)
            if shared is not None:
                out = out + shared
            if seed is None:
                return out
            return dropout(out, seed, "mlp_out_dropout_mask", self.mask)

    def _shared_experts(self, y):
        if not self.shared:
            return None
        z = _activation(self.config.activation, y @ self.shared[0], "shared_fc1_output")
        return named("shared_fc2_input", z) @ self.shared[1]

    def _moe(self, tokens):
        probs, routing_map = self._route(tokens)
        if self.config.moe_permute_fusion:
            return self._fused(tokens, probs, routing_map)
        if self.config.moe_pad_expert_input_to_capacity:
            index, permuted_probs, counts = self._permute_padded(probs, routing_map)
        elif self.config.moe_token_dispatcher_type == "allgather":
            return self._allgather(tokens, probs, routing_map)
        else:
            n = tokens.shape[0]
            flat = routing_map.T.contiguous().reshape(-1).argsort(descending=True, stable=True)
            flat = named("permute_probs_index", flat)[:int(routing_map.sum())]
            index = named("permute_index", flat % n)
            permuted_probs = probs.T.contiguous().reshape(-1)[flat]
            counts = routing_map.sum(dim=0).tolist()
        x, w, local, back = self._dispatch(tokens.index_select(0, index), permuted_probs,
                                           counts)
        outputs = self._combine(self._experts(named("expert_fc1_input", x),
                                              named("expert_probs", w), local), back)
        return self._unpermute(tokens, index, outputs)

    def _fused(self, tokens, probs, routing_map):
        """The all-to-all dispatcher with ``--moe-permute-fusion`` on one
        rank: Transformer Engine's permute, the sort by local expert and its
        inverse (E > 1 local experts; an identity order here), unpermute."""
        x, w, row_id_map = FusedPermute.apply(tokens, probs, routing_map)
        named("permute_row_id_map", row_id_map)
        counts = routing_map.sum(dim=0).tolist()
        order = range(len(counts))
        x, w, sort_map = FusedSort.apply(x, w, counts, order)
        named("sort_row_id_map", sort_map)
        outputs = self._experts(named("expert_fc1_input", x), named("expert_probs", w), counts)
        outputs, _, unsort_map = FusedSort.apply(outputs, None, counts, order)
        named("sort_row_id_map", unsort_map)
        return FusedUnpermute.apply(outputs, row_id_map)

    def _allgather(self, tokens, probs, routing_map):
        """The all-gather dispatcher on one rank (its gathers are no-ops):
        permute by the local routing map without probabilities, then pick
        the probabilities with ``masked_select`` (``token_dispatcher.py``:
        MoEAllGatherTokenDispatcher.dispatch_postprocess)."""
        local_map, local_probs = routing_map.contiguous(), probs.contiguous()
        n, counts = tokens.shape[0], local_map.sum(dim=0).tolist()
        flat = local_map.T.contiguous().reshape(-1).argsort(descending=True, stable=True)
        index = named("permute_index", flat[:sum(counts)] % n)
        w = named("dispatch_local_probs", local_probs.T.contiguous()).masked_select(
            named("dispatch_local_map", local_map.T.contiguous()))
        outputs = self._experts(named("expert_fc1_input", tokens.index_select(0, index)),
                                named("expert_probs", w), counts)
        return self._unpermute(tokens, index, outputs)

    @staticmethod
    def _unpermute(tokens, index, outputs):
        combined = torch.zeros_like(tokens)
        return combined.scatter_add_(0, index.unsqueeze(1).expand(-1, tokens.shape[1]),
                                     outputs)

    def _route(self, tokens):
        c = self.config
        dtype = {None: tokens.dtype, "fp32": torch.float32, "fp64": torch.float64}[
            c.moe_router_dtype]
        logits = RouterGating.apply(tokens, self.router, dtype)
        if c.moe_router_load_balancing_type == "sinkhorn":
            return self._sinkhorn(logits)
        probs, top = route(c, logits)
        probs = torch.zeros_like(logits).scatter(1, top, probs)
        routing_map = torch.zeros_like(logits).int().scatter(1, top, 1).bool()
        if c.moe_expert_capacity_factor is not None:
            probs, routing_map = self._drop(probs, routing_map)
        if c.moe_router_load_balancing_type != "none" and c.moe_aux_loss_coeff > 0:
            probs = AuxLossAutoScaler.apply(probs, self._aux_loss(logits))
        return probs, routing_map

    def _sinkhorn(self, logits):
        """``router.py``: TopKRouter.sinkhorn_load_balancing in training."""
        k = self.config.moe_router_topk
        with torch.no_grad():
            _, top = torch.topk(sinkhorn(logits.float()), k=k, dim=1)
        if k == 1:
            scores = named("router_sinkhorn_scores", torch.sigmoid(logits))
        else:  # the fp32 softmax is kept, its cast back is what is multiplied
            scores = named("router_sinkhorn_scores", torch.softmax(
                logits, dim=-1, dtype=torch.float32)).type_as(logits)
        routing_map = named("router_routing_map",
                            torch.zeros_like(scores).int().scatter(1, top, 1).bool())
        return scores * routing_map, routing_map

    def _aux_loss(self, logits):
        """The switch load-balancing loss on one rank (``moe_utils.py``:
        compute_routing_scores_for_aux_loss, switch_load_balancing_loss_func):
        the scores over all experts (:func:`.router.aux_scores`), their own
        top-k routing map (on
        detached scores: the values are discarded, see :meth:`_drop`), the
        tokens per expert, E * coeff / (k * n^2) * sum(P_i * count_i)."""
        c, n = self.config, logits.shape[0]
        scores = aux_scores(c, logits)
        _, top = torch.topk(scores.detach(), c.moe_router_topk, dim=1)
        counts = torch.zeros_like(logits).int().scatter(1, top, 1).bool().sum(dim=0)
        scale = c.num_experts * c.moe_aux_loss_coeff / (c.moe_router_topk * n * n)
        return torch.sum(scores.sum(dim=0) * counts) * scale

    def _capacity(self, n):
        c = self.config
        return math.ceil((n * c.moe_router_topk / c.num_experts) * c.moe_expert_capacity_factor)

    def _drop(self, probs, routing_map):
        """apply_router_token_dropping (drop_policy "probs"). Its top-k over
        the tokens runs on detached probabilities here: in Megatron-LM that
        node's values are discarded, so the node and its indices are freed at
        once, which the recorder (it keeps every saved tensor) would not see."""
        n, capacity = probs.shape[0], self._capacity(probs.shape[0])
        if capacity > n:
            mask = torch.ones_like(probs).bool()
        else:
            _, index = torch.topk(probs.detach(), k=capacity, dim=0, sorted=False)
            mask = torch.zeros_like(probs).scatter(0, index, 1).bool()
        if not self.config.moe_pad_expert_input_to_capacity:
            mask = torch.logical_and(routing_map, mask)
        return probs * named("router_capacity_mask", mask), mask

    def _permute_padded(self, probs, routing_map):
        """permute with drop_and_pad: each expert's first ``capacity`` tokens
        of the (padded) routing map, probabilities gathered by flat index."""
        n, E = probs.shape
        rows = routing_map.to(torch.int8).T.contiguous()
        chosen = rows.argsort(dim=-1, descending=True, stable=True)[:, :self._capacity(n)]
        chosen = chosen.contiguous()
        flat = named("permute_probs_index",
                     (torch.arange(E).unsqueeze(-1) * n + chosen).view(-1))
        permuted_probs = probs.T.contiguous().view(-1).index_select(0, flat)
        return (named("permute_index", chosen.view(-1)), permuted_probs,
                [chosen.shape[1]] * E)

    def _dispatch(self, tokens, probs, counts):
        """One rank (ep = etp = 1): the all-to-all and the all-gather are
        no-ops, permutation 2 (sort_chunks_by_idxs) copies. Returns the
        experts' tokens, probabilities, tokens per local expert and what
        :meth:`_combine` needs."""
        return (torch.cat(torch.split(tokens, counts)), torch.cat(torch.split(probs, counts)),
                counts, None)

    def _combine(self, outputs, back):
        return outputs

    def _expert_linear(self, x, weight, key):
        """One expert's linear, ``x @ weight``, saving ``x`` as row ``key``."""
        return named(key, x) @ weight

    def _experts(self, tokens, probs, counts):
        outs = []
        for e, (x, w) in enumerate(zip(torch.split(tokens, counts),
                                       torch.split(probs, counts)), start=self.first_expert):
            y = self._expert_linear(x, self.fc1[e], "expert_fc1_input")
            if self.config.activation == "swiglu":
                z = WeightedSwiGLU.apply(named("expert_fc1_output", y), w.unsqueeze(-1))
            else:  # experts.py: the unfused activation with probabilities
                act = _activation(self.config.activation, y, "expert_fc1_output")
                z = (named("expert_act_output", act) * w.unsqueeze(-1)).to(y.dtype)
            outs.append(self._expert_linear(z, self.fc2[e], "expert_fc2_input"))
        return torch.cat(outs)


def _activation(activation: str, y, name: str):
    """The activation of fc1's output ``y``, the tensor it saves named
    ``name``: SwiGLU's and GeLU's input, squared ReLU's ReLU output
    (``megatron/core/activations.py``: ``torch.pow(F.relu(x), 2)``)."""
    if activation == "swiglu":
        return SwiGLU.apply(named(name, y))
    if activation == "squared_relu":
        return torch.pow(named(name, F.relu(y)), 2)
    return F.gelu(named(name, y))


def measure_moe(config: LayerConfig, mask: str = "bool") -> Measurement:
    """One forward pass of :class:`ReferenceMoELayer`, every saved storage
    recorded (as :func:`.run.measure_layer`); set it against the ledger with
    :func:`.compare.compare`.

    Raises:
        ValueError: see :class:`ReferenceMoELayer`.
    """
    layer = ReferenceMoELayer(config, mask=mask)
    return recorded(layer, config, mask)

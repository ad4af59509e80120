"""The reference MoE layer on ep real expert-parallel ranks (gloo, CPU).

Megatron-LM's all-to-all dispatcher (``token_dispatcher.py``:
MoEAlltoAllTokenDispatcher, t = etp = 1) between ep processes: each rank
routes its own tokens, exchanges the tokens-per-expert counts
(``preprocess``), sends each expert's copies to the rank that holds it
(``token_dispatch``, an autograd all-to-all as ``tensor_parallel``'s
``all_to_all``), sorts what it received by local expert (permutation 2,
``sort_chunks_by_idxs``), runs its E/ep experts, and undoes all of it
(``combine_preprocess``, ``token_combine``, unpermute).

The ledger's expert rows are expectations under balanced routing; a real
router is not balanced, but every copy sent is received once, so the mean
over the ep ranks of each expert row's bytes equals the ledger's exactly
(:func:`measure_expert_parallel`).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..layer.config import LayerConfig
from .launch import on_ranks
from .layer import layer_input
from .moe import ReferenceMoELayer
from .run import Measurement
from .saved import Recorder


class AllToAll(torch.autograd.Function):
    """``dist.all_to_all_single`` along dim 0 with its mirror as backward;
    saves no tensor (``megatron/core/tensor_parallel/mappings.py``: _AllToAll)."""

    @staticmethod
    def forward(ctx, x, received, sent):
        ctx.splits = (received, sent)
        out = x.new_empty((sum(received), *x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), received, sent)
        return out

    @staticmethod
    def backward(ctx, grad):
        received, sent = ctx.splits
        out = grad.new_empty((sum(sent), *grad.shape[1:]))
        dist.all_to_all_single(out, grad.contiguous(), sent, received)
        return out, None, None


class ExpertParallelMoELayer(ReferenceMoELayer):
    """:class:`.moe.ReferenceMoELayer` on rank ``rank`` of an ep-rank
    process group, holding experts ``rank*E/ep`` to ``(rank+1)*E/ep - 1``.

    Raises:
        ValueError: as the reference layer; ep not dividing num_experts, a
            bad rank, or ``moe_permute_fusion`` (measured on one rank only).
    """

    def __init__(self, config: LayerConfig, ep: int, rank: int, **kwargs):
        super().__init__(config, **kwargs)
        if config.num_experts % ep or not 0 <= rank < ep or config.moe_permute_fusion:
            raise ValueError(f"need ep dividing num_experts={config.num_experts}, "
                             f"0 <= rank < ep and the unfused permutation, got ep={ep}, "
                             f"rank={rank}, moe_permute_fusion={config.moe_permute_fusion}")
        self.ep, self.local = ep, config.num_experts // ep
        self.first_expert = rank * self.local
        self.received = 0

    def _dispatch(self, tokens, probs, counts):
        ep, local = self.ep, self.local
        sent_per_expert = torch.tensor(counts)
        got = torch.empty_like(sent_per_expert)  # (source rank, local expert)
        dist.all_to_all_single(got, sent_per_expert)
        sent = sent_per_expert.view(ep, local).sum(1).tolist()
        received = got.view(ep, local).sum(1).tolist()
        x, w = AllToAll.apply(tokens, received, sent), AllToAll.apply(probs, received, sent)
        chunks, order = got.tolist(), [s * local + e for e in range(local) for s in range(ep)]
        x, w = (torch.cat([torch.split(y, chunks)[i] for i in order]) for y in (x, w))
        self.received = len(x)
        return x, w, got.view(ep, local).sum(0).tolist(), (chunks, order, sent, received)

    def _combine(self, outputs, back):
        chunks, order, sent, received = back
        pieces = torch.split(outputs, [chunks[i] for i in order])
        by_source = [pieces[order.index(i)] for i in range(len(order))]
        return AllToAll.apply(torch.cat(by_source), sent, received)


def _measure_rank(rank: int, config: LayerConfig, ep: int) -> tuple[Measurement, int, bool]:
    layer = ExpertParallelMoELayer(config, ep, rank)
    x = layer_input(config, seed=1 + rank)  # each rank its own tokens
    with Recorder(layer.parameters()) as rec:
        out = layer(x)
    measurement = Measurement(config, rank, "bool", rec.storages(out))
    out.float().sum().backward()  # through both all-to-alls
    mine = range(layer.first_expert, layer.first_expert + layer.local)
    trained = x.grad is not None and all(layer.fc1.grad[e].abs().sum() > 0 for e in mine)
    return measurement, layer.received, bool(trained)


def measure_expert_parallel(config: LayerConfig, ep: int
                            ) -> list[tuple[Measurement, int, bool]]:
    """One forward pass on each of ``ep`` gloo ranks: (what rank r saved,
    the routed copies its experts received, whether the backward pass
    reached its input and every local expert), rank 0 first.

    Raises:
        ValueError: see :class:`ExpertParallelMoELayer`.
    """
    return on_ranks(_measure_rank, ep, config, ep)

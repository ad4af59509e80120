"""The reference layer with context parallelism on cp real ranks (gloo, CPU).

Each rank holds Megatron-LM's two load-balanced chunks of the sequence,
chunks r and 2cp-1-r of 2*cp (``megatron/core/utils.py``:
_get_batch_on_this_cp_rank_per_sequence_balancing), and runs
:class:`.layer.ReferenceLayer` on its s/cp tokens; only the core attention
talks to the other ranks, in one of two autograd functions that save what
Transformer Engine saves (``transformer_engine/pytorch/attention/
dot_product_attention/context_parallel.py``, bf16, no FP8):

* :class:`RingAttention` (``cp_comm_type="p2p"``, AttnFuncWithCPAndKVP2P):
  K and V go round the ring (send to rank+1, receive from rank-1) while each
  rank merges its queries' partial outputs by their log-sum-exp; it saves
  Q, the last step's K and V, the output and the fp32 log-sum-exp. Its
  backward sends K, V and their gradients round the ring again. TE sends K
  and V as one concatenated buffer; here they travel as two (same bytes),
  so each is its ledger row.
* :class:`UlyssesAttention` (``"a2a"``, AttnFuncWithCPAndQKVOA2A): an
  all-to-all turns s/cp tokens of all heads into all s tokens of a/cp
  heads, attention runs on the whole sequence, and an all-to-all turns the
  output back; it saves Q, K, V after the first all-to-all, the output
  before the second (``out_part``) and the log-sum-exp.

Attention is exact (causal by global token position, fp32 softmax
statistics) and written out forward and backward, so
:func:`context_parallel_error` can check that cp ranks compute what one
rank computes on the whole sequence. These two functions are written for the saved
tensors and the exact result, not to hold TE's transient buffers (TE keeps
all cp ring buffers in ``p2p_comm_buffers`` and every step's output until
it merges them; :class:`RingAttention` merges as it goes and sends K and V
as two tensors; the all-to-alls here make no head-major copies to keep), so
the exchange buffers of :mod:`actmem.run.moments.cp_timeline` are checked by hand
arithmetic against TE's code (``tests/test_cp_timeline.py``), not measured
here. Attention dropout is not modelled
(TE regenerates it from rng states; the ledger keeps no row for it).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist
from torch.utils.checkpoint import checkpoint

from ..layer.config import LayerConfig
from ..layer.context_parallel import A2A_OUTPUT
from .launch import on_ranks
from .layer import ReferenceLayer, _heads, dropout, layer_input
from .run import Measurement
from .saved import Recorder, block, named

MEASURED = ("p2p", "a2a")
"""The comm types measured here."""


def chunk_positions(s: int, cp: int, rank: int) -> torch.Tensor:
    """Token positions rank ``rank`` holds: chunks rank and 2cp-1-rank of
    2*cp chunks of s/(2cp) tokens (int64, ascending)."""
    n = s // (2 * cp)
    return torch.cat([torch.arange(rank * n, (rank + 1) * n),
                      torch.arange((2 * cp - 1 - rank) * n, (2 * cp - rank) * n)])


def _scores(q, k, q_pos, k_pos):
    """fp32 scores (b, a, n, m), causal by position; k's g heads serve a/g each."""
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    scores = q.float() @ k.float().transpose(-2, -1) * q.shape[-1] ** -0.5
    return scores.masked_fill(q_pos[:, None] < k_pos[None, :], float("-inf"))


def _block(q, k, v, q_pos, k_pos):
    """Partial output (fp32) and log-sum-exp of queries q over keys k."""
    scores = _scores(q, k, q_pos, k_pos)
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.nan_to_num(torch.exp(scores - lse[..., None]))  # rows with no key: 0
    v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    return probs @ v.float(), lse


def _merge(out, lse, out_b, lse_b):
    """Two partial attentions of the same queries, merged by log-sum-exp."""
    if out is None:
        return out_b, lse_b
    new = torch.logaddexp(lse, lse_b)
    scale = torch.nan_to_num(torch.exp(lse - new))[..., None]
    scale_b = torch.nan_to_num(torch.exp(lse_b - new))[..., None]
    return out * scale + out_b * scale_b, new


def _block_grad(q, k, v, q_pos, k_pos, d_out, lse, delta):
    """FlashAttention's backward for one block: dQ, dK, dV (fp32, dK and
    dV summed over the query heads each key/value head serves)."""
    group = q.shape[1] // k.shape[1]
    probs = torch.exp(_scores(q, k, q_pos, k_pos) - lse[..., None])
    d_v = probs.transpose(-2, -1) @ d_out
    d_p = d_out @ v.repeat_interleave(group, dim=1).float().transpose(-2, -1)
    d_s = probs * (d_p - delta[..., None]) * q.shape[-1] ** -0.5
    d_q = d_s @ k.repeat_interleave(group, dim=1).float()
    d_k = d_s.transpose(-2, -1) @ q.float()
    b, a, m, d = d_k.shape
    return (d_q, d_k.view(b, a // group, group, m, d).sum(2),
            d_v.view(b, a // group, group, m, d).sum(2))


def _shift(tensors, rank: int, cp: int, by: int = 1):
    """Send each tensor to rank+by, receive the same shapes from rank-by."""
    if by % cp == 0:
        return list(tensors)
    tensors = [x.contiguous() for x in tensors]
    got = [torch.empty_like(x) for x in tensors]
    requests = [dist.isend(x, (rank + by) % cp, tag=i) for i, x in enumerate(tensors)]
    requests += [dist.irecv(x, (rank - by) % cp, tag=i) for i, x in enumerate(got)]
    for request in requests:
        request.wait()
    return got


def _to_tokens(x):
    """(b, a, n, d) -> (b, n, a*d), the layout the output projection reads."""
    b, a, n, d = x.shape
    return x.transpose(1, 2).reshape(b, n, a * d)


class RingAttention(torch.autograd.Function):
    """p2p: Q stays, K and V go round the ring of cp ranks (module docstring)."""

    @staticmethod
    def forward(ctx, q, k, v, rank, positions):
        cp, mine = len(positions), positions[rank]
        k_buf, v_buf, owner, out, lse = k.contiguous(), v.contiguous(), rank, None, None
        for step in range(cp):
            out, lse = _merge(out, lse, *_block(q, k_buf, v_buf, mine, positions[owner]))
            if step < cp - 1:
                k_buf, v_buf = _shift((k_buf, v_buf), rank, cp)
                owner = (owner - 1) % cp
        out = _to_tokens(out).to(q.dtype)
        ctx.save_for_backward(q, named("key", k_buf), named("value", v_buf), out,
                              named("softmax_lse", lse))
        ctx.rank, ctx.positions = rank, positions
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k_buf, v_buf, out, lse = ctx.saved_tensors
        rank, positions = ctx.rank, ctx.positions
        cp, (b, a, n, d) = len(positions), q.shape
        d_out = grad.view(b, n, a, d).transpose(1, 2).float()
        delta = (d_out * out.view(b, n, a, d).transpose(1, 2).float()).sum(-1)
        d_q, d_k, d_v = 0, torch.zeros(k_buf.shape), torch.zeros(v_buf.shape)
        owner = (rank + 1) % cp  # the saved buffer came cp-1 steps round the ring
        for step in range(cp):
            g_q, g_k, g_v = _block_grad(q, k_buf, v_buf, positions[rank], positions[owner],
                                        d_out, lse, delta)
            d_q, d_k, d_v = d_q + g_q, d_k + g_k, d_v + g_v
            if step < cp - 1:
                k_buf, v_buf, d_k, d_v = _shift((k_buf, v_buf, d_k, d_v), rank, cp)
                owner = (owner - 1) % cp
        d_k, d_v = _shift((d_k, d_v), rank, cp, by=(owner - rank) % cp)  # home to the owner
        return d_q.to(q.dtype), d_k.to(q.dtype), d_v.to(q.dtype), None, None


def _all_to_all(x, cp: int):
    """(cp, ...) -> (cp, ...): slice j goes to rank j, slice j comes from rank j."""
    x = x.contiguous()
    got = torch.empty_like(x)
    dist.all_to_all_single(got, x)
    return got


def _scatter_heads(x, cp: int):
    """(b, heads, n, d) on each rank -> (b, heads/cp, cp*n, d): all tokens of
    this rank's heads, tokens in rank order."""
    b, heads, n, d = x.shape
    parts = _all_to_all(x.reshape(b, cp, heads // cp, n, d).transpose(0, 1), cp)
    return parts.permute(1, 2, 0, 3, 4).reshape(b, heads // cp, cp * n, d)


def _gather_heads(x, cp: int):
    """The inverse of :func:`_scatter_heads`: (b, heads/cp, cp*n, d) -> (b, heads, n, d)."""
    b, part, tokens, d = x.shape
    n = tokens // cp
    parts = _all_to_all(x.reshape(b, part, cp, n, d).permute(2, 0, 1, 3, 4), cp)
    return parts.transpose(0, 1).reshape(b, cp * part, n, d)


class UlyssesAttention(torch.autograd.Function):
    """a2a: all-to-all over heads, attention on the whole sequence (module docstring)."""

    @staticmethod
    def forward(ctx, q, k, v, rank, positions):
        cp, every = len(positions), torch.cat(positions)
        q_all, k_all, v_all = (_scatter_heads(x, cp) for x in (q, k, v))
        out, lse = _block(q_all, k_all, v_all, every, every)
        out_part = out.to(q.dtype)
        ctx.save_for_backward(named("query", q_all), named("key", k_all), named("value", v_all),
                              named(A2A_OUTPUT, out_part), named("softmax_lse", lse))
        ctx.cp, ctx.every = cp, every
        return _to_tokens(_gather_heads(out_part, cp))

    @staticmethod
    def backward(ctx, grad):
        q_all, k_all, v_all, out_part, lse = ctx.saved_tensors
        cp, (b, part, _, d) = ctx.cp, q_all.shape
        n = grad.shape[1]
        d_out = _scatter_heads(grad.view(b, n, cp * part, d).transpose(1, 2), cp).float()
        delta = (d_out * out_part.float()).sum(-1)
        grads = _block_grad(q_all, k_all, v_all, ctx.every, ctx.every, d_out, lse, delta)
        return (*(_gather_heads(g.to(q_all.dtype), cp) for g in grads), None, None)


CORES = {"p2p": RingAttention, "a2a": UlyssesAttention}


class ContextParallelLayer(ReferenceLayer):
    """:class:`.layer.ReferenceLayer` on context-parallel rank ``rank`` of
    ``config.cp``: its s/cp tokens (:func:`chunk_positions`), the core
    attention one of :data:`CORES`. Needs a process group of cp ranks.

    Raises:
        ValueError: t > 1, cp_comm_type not in :data:`MEASURED`, a bad rank,
            or as the reference layer.
    """

    def __init__(self, config: LayerConfig, rank: int, **kwargs):
        if config.t != 1 or config.cp_comm_type not in MEASURED or not 0 <= rank < config.cp:
            raise ValueError(f"need t=1, cp_comm_type in {MEASURED} and 0 <= rank < cp, got "
                             f"t={config.t}, cp_comm_type={config.cp_comm_type!r}, rank={rank}")
        super().__init__(_local(config), 0, **kwargs)
        self.global_config, self.cp_rank = config, rank
        self.positions = [chunk_positions(config.s, config.cp, r) for r in range(config.cp)]

    def _attention(self, x, map_seed, out_seed):  # ReferenceLayer's, with the CP core
        c, lin = self.config, self.linears
        with block("attn_norm"):
            y = named("qkv_input", self.norm1(named("attn_norm_input", x)))
        with block("attention"):
            q = named("query", _heads(lin["q"](y), c.a, False))
            k = named("key", _heads(lin["k"](y), c.g, False))
            v = named("value", _heads(lin["v"](y), c.g, False))
            core = CORES[self.global_config.cp_comm_type].apply
            args = (q, k, v, self.cp_rank, self.positions)
            if c.recompute == "selective":
                out = checkpoint(core, *args, use_reentrant=True)
            else:
                out = core(*args)
            out = lin["proj"](named("proj_input", out))
            if out_seed is None:
                return out
            return dropout(out, out_seed, "attn_out_dropout_mask", self.mask)


def _local(config: LayerConfig) -> LayerConfig:
    """The layer on one rank's s/cp tokens, without context parallelism."""
    return dataclasses.replace(config, s=config.s // config.cp, cp=1, cp_comm_type="p2p",
                               hierarchical_context_parallel_sizes=None)


def rank_input(config: LayerConfig, rank: int, dtype=torch.bfloat16) -> torch.Tensor:
    """Rank ``rank``'s tokens of the whole (b, s, h) input of
    :func:`.layer.layer_input`, a leaf that requires grad."""
    x = layer_input(config, dtype=dtype).detach()
    return x[:, chunk_positions(config.s, config.cp, rank)].clone().requires_grad_()


def _measure_rank(rank: int, configs) -> list[tuple[Measurement, float, float]]:
    results = []
    for config in configs:
        layer = ContextParallelLayer(config, rank)
        with Recorder(layer.parameters()) as rec:
            out = layer(rank_input(config, rank))
        results.append((Measurement(config, rank, "bool", rec.storages(out)),
                        *context_parallel_error(rank, config)))
    return results


def context_parallel_error(rank: int, config: LayerConfig) -> tuple[float, float]:
    """Max |difference| (output, input gradient) of rank ``rank``'s tokens
    against the same layer on one rank and the whole sequence (fp32, no
    dropout). Run on every rank of a cp-rank process group."""
    config = dataclasses.replace(config, dropout=False)
    whole = dataclasses.replace(_local(config), s=config.s)
    x = layer_input(whole, dtype=torch.float32)
    ref = ReferenceLayer(whole, 0, dtype=torch.float32)(x)
    ref.backward(torch.ones_like(ref))
    mine = chunk_positions(config.s, config.cp, rank)
    x_rank = rank_input(config, rank, torch.float32)
    out = ContextParallelLayer(config, rank, dtype=torch.float32)(x_rank)
    out.backward(torch.ones_like(out))
    return (float((out - ref[:, mine]).abs().max().detach()),
            float((x_rank.grad - x.grad[:, mine]).abs().max()))


def measure_context_parallel(*configs: LayerConfig
                             ) -> list[list[tuple[Measurement, float, float]]]:
    """One forward pass of each layer on each of cp gloo ranks (one set of
    processes for all ``configs``, which share cp): per config, per rank
    (rank 0 first), what the rank saved and the largest output error and
    input-gradient error against one rank on the whole sequence (fp32).

    Raises:
        ValueError: no config, configs with different cp, t > 1 or a
            cp_comm_type not in :data:`MEASURED`.
    """
    if not configs or len({c.cp for c in configs}) > 1:
        raise ValueError(f"need one or more configs with the same cp, got cp "
                         f"{[c.cp for c in configs]}")
    for c in configs:
        if c.t != 1 or c.cp_comm_type not in MEASURED:
            raise ValueError(f"need t=1 and cp_comm_type in {MEASURED}, got t={c.t}, "
                             f"cp_comm_type={c.cp_comm_type!r}")
    per_rank = on_ranks(_measure_rank, configs[0].cp, configs)
    return [list(results) for results in zip(*per_rank)]

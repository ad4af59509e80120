"""A reference multi-latent-attention layer in plain PyTorch, in Megatron-LM's order.

The MLP block is :class:`.layer.ReferenceLayer`'s; the attention block is
Megatron-LM's MLASelfAttention (``megatron/core/transformer/
multi_latent_attention.py``: get_query_key_value_tensors, forward) on one rank
(t = 1), operation by operation as :mod:`actmem.layer.mla` describes:

1. the input LayerNorm, then the Q down projection (with ``q_lora_rank``)
   and the KV down projection on its output, which both save it;
2. each latent's norm and up projection, as Transformer Engine's
   LayerNormLinear: the KV latent's r_kv columns are copied out of the
   down projection's output first (``prepare_forward`` makes the slice
   contiguous), the norm keeps its input and the up projection its input
   (the norm's output). The latents' norms are ``nn.LayerNorm`` here:
   the saved input is the same bytes as RMSNorm's, and the per-token
   statistics are extras, as for every norm of the reference layers;
3. rotary embedding as Megatron's fused kernels
   (``fusions/fused_mla_yarn_rope_apply.py``): :class:`RoPEQuery` and
   :class:`RoPEKeyValue` save only the cos/sin tables, which Megatron
   caches for all layers (excluded from the measurement like the weights);
4. explicit causal attention on Q, K of d_qk + d_r and V of d_v per head
   (softmax, dropout), or PyTorch's fused ``scaled_dot_product_attention``
   when ``flash_attention`` (its CPU FlashAttention kernel needs the same
   head dim for Q and V, so the reference needs d_qk + d_r = d_v there);
5. the output projection and its dropout.

Tensor parallelism (t ranks, gloo, :mod:`.launch`) as Megatron-LM's spec:
the down projections and the latents' norms are whole on every rank and
run on all s tokens; the up projections are column-parallel (a/t heads per
rank, the f operator of :mod:`.parallel` before them, and before the
shared rotary key column, whose gradient each rank holds in part), the
output projection row-parallel (g after it). Sequence parallelism is not
measured.

Each tensor the ledger counts is tagged with :func:`.saved.named` under its
row key.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from ..layer.config import LayerConfig
from .layer import ReferenceLayer, _causal_bias, dropout, fused_attention, layer_input
from .parallel import copy_to_parallel, reduce_from_parallel
from .run import Measurement
from .saved import Recorder, block, named


def _rotate(x, cos, sin, sign=1):
    """Rotate pairs (even, odd columns) of the last dim by the angles of
    cos/sin (``sign=-1``: the inverse rotation, the backward)."""
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - sign * odd * sin
    out[..., 1::2] = odd * cos + sign * even * sin
    return out


class RoPEQuery(torch.autograd.Function):
    """Query = [q_no_pe, rope(q_pe)] as a new tensor; saves cos and sin only
    (Megatron-LM's _FusedMLARoPEInplace: rotation is linear in q)."""

    @staticmethod
    def forward(ctx, q, cos, sin, nope):
        ctx.save_for_backward(cos, sin)
        ctx.nope = nope
        out = q.clone()
        out[..., nope:] = _rotate(q[..., nope:], cos, sin)
        return out

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        dq = grad.clone()
        dq[..., ctx.nope:] = _rotate(grad[..., ctx.nope:], cos, sin, -1)
        return dq, None, None, None


class RoPEKeyValue(torch.autograd.Function):
    """Key = [k_no_pe, rope(k_pe) on every head] and value, both new tensors,
    from the KV up projection's output (heads of d_qk + d_v) and the shared
    rotary column k_pe; saves cos and sin only (_FusedMLARoPEKVSplit)."""

    @staticmethod
    def forward(ctx, kv, k_pe, cos, sin, nope):
        ctx.save_for_backward(cos, sin)
        ctx.nope = nope
        rope = _rotate(k_pe, cos, sin).unsqueeze(-2).expand(*kv.shape[:-1], -1)
        key = torch.cat([kv[..., :nope], rope], dim=-1)
        return key, kv[..., nope:].contiguous()

    @staticmethod
    def backward(ctx, dkey, dvalue):
        cos, sin = ctx.saved_tensors
        nope = ctx.nope
        dkv = torch.cat([dkey[..., :nope], dvalue], dim=-1)
        dpe = _rotate(dkey[..., nope:].sum(dim=-2), cos, sin, -1)
        return dkv, dpe, None, None, None


def explicit_attention(q, k, v, seed, mask="bool"):
    """Causal softmax attention on (b, a, s, d_q) Q and K and (b, a, s, d_v)
    V, with dropout on the probabilities (the paper's core attention, sec.
    4.1): saves Q, K, the softmax output, the dropout mask and output, V."""
    d = q.shape[-1]
    scores = torch.matmul(q, k.transpose(-2, -1)) * d**-0.5 + _causal_bias(q.shape[2], q.dtype)
    probs = named("softmax_output", torch.softmax(scores, dim=-1))
    if seed is not None:
        probs = named("attn_dropout_output", dropout(probs, seed, "attn_dropout_mask", mask))
    return torch.matmul(probs, v)


class ReferenceMLALayer(ReferenceLayer):
    """One GPT layer with multi-latent attention, on tensor-parallel rank
    ``rank`` of ``config.t`` (t > 1 needs a process group of t ranks).

    Args:
        config: a layer with ``multi_latent_attention=True``.
        rank: this process's tensor-parallel rank.
        mask, seed, dtype: as :class:`.layer.ReferenceLayer`.

    Raises:
        ValueError: ``config`` has no MLA, ``recompute`` other than
            ``"none"``, ``flash_attention`` with d_qk + d_r != d_v, or as
            :class:`.layer.ReferenceLayer` (sequence parallelism, a bad rank).
    """

    def __init__(self, config: LayerConfig, rank: int = 0, *, mask="bool", seed=0,
                 dtype=torch.bfloat16):
        c = config
        if not c.multi_latent_attention or c.recompute != "none":
            raise ValueError(f"ReferenceMLALayer needs multi_latent_attention=True and "
                             f"recompute='none', got multi_latent_attention="
                             f"{c.multi_latent_attention}, recompute={c.recompute!r}")
        dq = c.qk_head_dim + c.qk_pos_emb_head_dim
        if c.flash_attention and dq != c.v_head_dim:
            raise ValueError(f"flash_attention=True needs qk_head_dim + qk_pos_emb_head_dim "
                             f"= v_head_dim here (PyTorch's CPU kernel), got {dq} and "
                             f"{c.v_head_dim}")
        super().__init__(config, rank, mask=mask, seed=seed, dtype=dtype)
        gen = torch.Generator().manual_seed(seed + 1)
        h, a, rq, rkv = c.h, c.a, c.q_lora_rank, c.kv_lora_rank
        heads = slice(rank * a // c.t, (rank + 1) * a // c.t)  # this rank's heads

        def weight(i, o, part=None):  # drawn whole (t = 1), then this rank's part
            w = torch.randn(i, o, generator=gen) * i ** -0.5
            if part == "columns":
                w = w.view(i, a, -1)[:, heads].reshape(i, -1)
            elif part == "rows":
                w = w.view(a, -1, o)[heads].reshape(-1, o)
            return nn.Parameter(w.to(dtype))
        self.mla = nn.ParameterDict({
            "q_up": weight(rq or h, a * dq, "columns"),
            "kv_down": weight(h, rkv + c.qk_pos_emb_head_dim),
            "kv_up": weight(rkv, a * (c.qk_head_dim + c.v_head_dim), "columns"),
            "proj": weight(a * c.v_head_dim, h, "rows"),
            **({"q_down": weight(h, rq)} if rq else {})})
        self.latent_norms = nn.ModuleDict({"kv": nn.LayerNorm(rkv).to(dtype),
                                           **({"q": nn.LayerNorm(rq).to(dtype)} if rq else {})})
        self.cos, self.sin = _tables(c.s, c.qk_pos_emb_head_dim, dtype)

    def _attention(self, x, map_seed, out_seed):
        c, w = self.config, self.mla
        with block("attn_norm"):
            y = named("mla_down_input", self.norm1(named("attn_norm_input", x)))
        with block("attention"):
            q = self._query(y)
            kv_combined = y @ w["kv_down"]
            latent = named("kv_down_output", kv_combined[..., :c.kv_lora_rank].contiguous())
            latent = named("kv_up_input", self.latent_norms["kv"](latent))
            b, s = x.shape[:2]
            kv = (copy_to_parallel(latent, self.tp) @ w["kv_up"]).view(b, s, c.a // c.t, -1)
            k_pe = copy_to_parallel(kv_combined[..., c.kv_lora_rank:], self.tp)
            if c.unfused_rope:
                k_no_pe, value = torch.split(kv, [c.qk_head_dim, c.v_head_dim], dim=-1)
                k_pe = unfused_rope(k_pe.unsqueeze(-2), c.s, c.qk_pos_emb_head_dim)
                key = torch.cat([k_no_pe, k_pe.expand(-1, -1, c.a // c.t, -1)], dim=-1)
            else:
                key, value = RoPEKeyValue.apply(kv, k_pe, self.cos, self.sin, c.qk_head_dim)
            q, k, v = (named(n, t.transpose(1, 2).contiguous())
                       for n, t in (("query", q), ("key", key), ("value", value)))
            core = fused_attention if c.flash_attention else explicit_attention
            out = core(q, k, v, map_seed, self.mask)
            out = named("proj_input", out.transpose(1, 2).reshape(b, s, -1)) @ w["proj"]
            out = reduce_from_parallel(out, self.tp)
            if out_seed is None:
                return out
            return dropout(out, out_seed, "attn_out_dropout_mask", self.mask)

    def _query(self, y):
        """(b, s, a, d_q) query after rotary embedding on its last d_r columns."""
        c, w = self.config, self.mla
        if c.q_lora_rank is not None:
            latent = named("q_down_output", y @ w["q_down"])
            y = named("q_up_input", self.latent_norms["q"](latent))
        q = (copy_to_parallel(y, self.tp) @ w["q_up"]).view(*y.shape[:2], c.a // c.t, -1)
        if c.unfused_rope:
            q_no_pe, q_pe = torch.split(q, [c.qk_head_dim, c.qk_pos_emb_head_dim], dim=-1)
            return torch.cat([q_no_pe, unfused_rope(q_pe, c.s, c.qk_pos_emb_head_dim)], dim=-1)
        return RoPEQuery.apply(q, self.cos.unsqueeze(-2), self.sin.unsqueeze(-2),
                               c.qk_head_dim)


def unfused_rope(t, s: int, d: int):
    """Megatron-LM's unfused rotation of MLA's positional columns
    (``rope_utils.py``: _apply_rotary_pos_emb_bshd with
    ``mla_rotary_interleaved``) on ``t`` of shape (b, s, heads, d): the
    even and odd columns regrouped, then ``t * cos_ + rotate_half(t) *
    sin_`` with ``cos_``, ``sin_`` made anew in t's dtype, which the two
    multiplications save (named ``rope_cos_sin``)."""
    angles = _angles(s, d)
    freqs = torch.cat([angles, angles], dim=-1).unsqueeze(-2)   # (s, 1, d)
    t = torch.cat((t[..., 0::2], t[..., 1::2]), dim=-1)
    cos_ = named("rope_cos_sin", torch.cos(freqs).to(t.dtype))
    sin_ = named("rope_cos_sin", torch.sin(freqs).to(t.dtype))
    first, second = torch.chunk(t, 2, dim=-1)
    return t * cos_ + torch.cat((-second, first), dim=-1) * sin_


def _angles(s: int, d: int):
    """Position x frequency, (s, d/2) in fp32 (rotary base 10000)."""
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    return torch.outer(torch.arange(s, dtype=torch.float32), inv)


def _tables(s: int, d: int, dtype):
    """cos and sin of :func:`_angles`, (s, d/2) each, in ``dtype``."""
    angles = _angles(s, d)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def measure_mla(config: LayerConfig, rank: int = 0, mask: str = "bool") -> Measurement:
    """One forward pass of rank ``rank``'s :class:`ReferenceMLALayer`, every
    saved storage recorded (as :func:`.run.measure_layer`; the cos/sin
    tables counted as the weights are, not as activations); set it against
    the ledger with :func:`.compare.compare`. With ``config.t > 1``, run it
    on t ranks (:func:`.launch.on_ranks`).

    Raises:
        ValueError: see :class:`ReferenceMLALayer`.
    """
    layer = ReferenceMLALayer(config, rank, mask=mask)
    with Recorder([*layer.parameters(), layer.cos, layer.sin]) as rec:
        out = layer(layer_input(config))
    return Measurement(config, rank, mask, rec.storages(out))


def measure_mla_rank(rank: int, config: LayerConfig, mask: str = "bool"
                     ) -> tuple[Measurement, tuple[float, float]]:
    """For :func:`.launch.on_ranks` (the rank first): rank ``rank``'s
    :func:`measure_mla` and its :func:`mla_tensor_parallel_error`, in one
    process start."""
    return measure_mla(config, rank, mask), mla_tensor_parallel_error(rank, config)


def mla_tensor_parallel_error(rank: int, config: LayerConfig) -> tuple[float, float]:
    """Max |difference| (output, input gradient) of rank ``rank``'s MLA layer
    against the same layer at t = 1, in fp32 without dropout (as
    :func:`.check.tensor_parallel_error`). Run on every rank of a t-rank
    process group (:func:`.launch.on_ranks`)."""
    config = replace(config, dropout=False)
    results = []
    for c, r in ((config, rank), (replace(config, t=1), 0)):
        x = layer_input(c, dtype=torch.float32)
        out = ReferenceMLALayer(c, r, dtype=torch.float32)(x)
        out.backward(torch.ones_like(out))
        results.append((out.detach(), x.grad))
    (out, grad), (ref_out, ref_grad) = results
    return float((out - ref_out).abs().max()), float((grad - ref_grad).abs().max())

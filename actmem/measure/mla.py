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

Each tensor the ledger counts is tagged with :func:`.saved.named` under its
row key.
"""

from __future__ import annotations

import torch
from torch import nn

from ..layer.config import LayerConfig
from .layer import ReferenceLayer, _causal_bias, dropout, fused_attention, layer_input
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
    """One GPT layer with multi-latent attention, on one rank.

    Args:
        config: a layer with ``multi_latent_attention=True`` and t = 1.
        mask, seed, dtype: as :class:`.layer.ReferenceLayer`.

    Raises:
        ValueError: ``config`` has no MLA, t > 1, ``recompute`` other than
            ``"none"``, or ``flash_attention`` with d_qk + d_r != d_v.
    """

    def __init__(self, config: LayerConfig, *, mask="bool", seed=0, dtype=torch.bfloat16):
        c = config
        if not c.multi_latent_attention or c.t != 1 or c.recompute != "none":
            raise ValueError(f"ReferenceMLALayer needs multi_latent_attention=True, t=1 and "
                             f"recompute='none', got multi_latent_attention="
                             f"{c.multi_latent_attention}, t={c.t}, recompute={c.recompute!r}")
        dq = c.qk_head_dim + c.qk_pos_emb_head_dim
        if c.flash_attention and dq != c.v_head_dim:
            raise ValueError(f"flash_attention=True needs qk_head_dim + qk_pos_emb_head_dim "
                             f"= v_head_dim here (PyTorch's CPU kernel), got {dq} and "
                             f"{c.v_head_dim}")
        super().__init__(config, 0, mask=mask, seed=seed, dtype=dtype)
        gen = torch.Generator().manual_seed(seed + 1)

        def weight(i, o):
            return nn.Parameter((torch.randn(i, o, generator=gen) * i ** -0.5).to(dtype))
        h, a, rq, rkv = c.h, c.a, c.q_lora_rank, c.kv_lora_rank
        q_in = rq or h
        self.mla = nn.ParameterDict({
            "q_up": weight(q_in, a * dq), "kv_down": weight(h, rkv + c.qk_pos_emb_head_dim),
            "kv_up": weight(rkv, a * (c.qk_head_dim + c.v_head_dim)),
            "proj": weight(a * c.v_head_dim, h), **({"q_down": weight(h, rq)} if rq else {})})
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
            kv = named("kv_up_input", self.latent_norms["kv"](latent)) @ w["kv_up"]
            b, s = x.shape[:2]
            kv = kv.view(b, s, c.a, -1)
            key, value = RoPEKeyValue.apply(kv, kv_combined[..., c.kv_lora_rank:], self.cos,
                                            self.sin, c.qk_head_dim)
            q, k, v = (named(n, t.transpose(1, 2).contiguous())
                       for n, t in (("query", q), ("key", key), ("value", value)))
            core = fused_attention if c.flash_attention else explicit_attention
            out = core(q, k, v, map_seed, self.mask)
            out = named("proj_input", out.transpose(1, 2).reshape(b, s, -1)) @ w["proj"]
            if out_seed is None:
                return out
            return dropout(out, out_seed, "attn_out_dropout_mask", self.mask)

    def _query(self, y):
        """(b, s, a, d_q) query after rotary embedding on its last d_r columns."""
        c, w = self.config, self.mla
        if c.q_lora_rank is not None:
            latent = named("q_down_output", y @ w["q_down"])
            y = named("q_up_input", self.latent_norms["q"](latent))
        q = (y @ w["q_up"]).view(*y.shape[:2], c.a, -1)
        return RoPEQuery.apply(q, self.cos.unsqueeze(-2), self.sin.unsqueeze(-2),
                               c.qk_head_dim)


def _tables(s: int, d: int, dtype):
    """cos and sin of position x frequency, (s, d/2) each (rotary base 10000)."""
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    angles = torch.outer(torch.arange(s, dtype=torch.float32), inv)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def measure_mla(config: LayerConfig, mask: str = "bool") -> Measurement:
    """One forward pass of :class:`ReferenceMLALayer`, every saved storage
    recorded (as :func:`.run.measure_layer`; the cos/sin tables counted as
    the weights are, not as activations); set it against the ledger with
    :func:`.compare.compare`.

    Raises:
        ValueError: see :class:`ReferenceMLALayer`.
    """
    layer = ReferenceMLALayer(config, mask=mask)
    with Recorder([*layer.parameters(), layer.cos, layer.sin]) as rec:
        out = layer(layer_input(config))
    return Measurement(config, 0, mask, rec.storages(out))

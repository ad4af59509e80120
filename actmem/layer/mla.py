"""Multi-latent attention (DeepSeek-V2/V3): its saved tensors and its checks.

Megatron-LM's ``--multi-latent-attention`` replaces the Q/K/V projections by
low-rank ones (``megatron/core/transformer/multi_latent_attention.py``:
MLASelfAttention.get_query_key_value_tensors), as built by the Transformer
Engine spec (``megatron/core/models/gpt/gpt_layer_specs.py``:
get_gpt_layer_with_transformer_engine_submodules, ``multi_latent_attention``):

1. the input LayerNorm (``input_layernorm``, its own module);
2. ``linear_q_down_proj`` (h -> r_q, only with ``q_lora_rank``) and
   ``linear_kv_down_proj`` (h -> r_kv + d_r): ``TELinear`` with
   ``parallel_mode="duplicated"``, so every tensor-parallel rank holds the
   whole weight and computes on its own tokens (s/t of them under sequence
   parallelism, all s otherwise). Both save the same normalised input;
   without ``q_lora_rank``, ``linear_q_proj`` (column-parallel, h -> a*d_q)
   saves it too;
3. ``linear_q_up_proj`` (r_q -> a*d_q) and ``linear_kv_up_proj``
   (r_kv -> a*(d_qk + d_v)): ``TELayerNormColumnParallelLinear`` with the
   latents' RMSNorm fused in (``q_layernorm``/``kv_layernorm`` are
   IdentityOp, as with ``--qk-layernorm``, which DeepSeek's recipes set).
   Each saves the norm's input and output (Transformer Engine
   ``module/layernorm_linear.py``: _LayerNormLinear.forward,
   ``prepare_for_saving(inputmat, ..., ln_out, ...)``), per rank the local
   tokens. The KV latent is a slice of the down projection's output
   (``torch.split`` into r_kv and d_r); ``prepare_forward`` makes the
   non-contiguous slice contiguous (``module/base.py``), so the copy of
   r_kv columns is what is kept, and the down projection's output is freed;
4. rotary embedding on the last d_r columns of Q and of the shared key
   column (``fusions/fused_mla_yarn_rope_apply.py``: the fused kernels save
   only the cached cos/sin tables, shared by all layers); Q, K (the key's
   rotary part broadcast to every head) and V (copied out of the KV up
   projection's output) are new tensors of a/t heads each;
5. core attention on Q, K of d_q = d_qk + d_r and V of d_v per head, then
   ``linear_proj`` (a*d_v -> h, row-parallel) on its output.

Symbols: r_q = ``q_lora_rank``, r_kv = ``kv_lora_rank``, d_qk =
``qk_head_dim``, d_r = ``qk_pos_emb_head_dim``, d_v = ``v_head_dim``,
d_q = d_qk + d_r. :func:`with_mla` is a row transformation of the paper's
attention block (sec. 4.1): the attention-map rows (b, a, s, s) and the
dropout mask after the block stay, and every later storage option
(FlashAttention, recomputation, sequence parallelism) applies unchanged.
The latent norms are always counted: DeepSeek's checkpoints have them
(``q_a_layernorm``, ``kv_a_layernorm``), and Megatron-LM builds them with
``--qk-layernorm`` (``mla_qk_norm_config.py``: QKNormConfigResolver), so
:class:`actmem.LayerConfig` refuses its own ``qk_layernorm`` with MLA.
Not modelled: MLA without ``--qk-layernorm`` (no latent norms: 2sb(r_q +
r_kv) bytes and r_q + r_kv weights fewer); with it and no ``q_lora_rank``,
Megatron-LM's ``linear_q_proj`` is a fused norm+linear that normalises the
hidden state again (2sbh bytes and h weights more, which DeepSeek-V2-Lite's
checkpoint does not have); ``--mla-down-proj-fusion``
(FusedMLASelfAttention). The unfused rotary path (``--no-rope-fusion``:
four s x d_r cos/sin tables more per layer) is :mod:`actmem.layer.rope`'s.
"""

from __future__ import annotations

from dataclasses import replace

from ..validate import flag, positive_int
from .ledger import HEAD_SPLIT, REPLICATED, LedgerRow

MLA_OPTIONS = ("multi_latent_attention", "q_lora_rank", "kv_lora_rank", "qk_head_dim",
               "qk_pos_emb_head_dim", "v_head_dim")
"""The options of multi-latent attention (Megatron-LM's flags in snake_case)."""

MLA_DEFAULTS = {"multi_latent_attention": False, "q_lora_rank": None, "kv_lora_rank": 32,
                "qk_head_dim": 128, "qk_pos_emb_head_dim": 64, "v_head_dim": 128}
"""Megatron-LM's defaults (``megatron/training/arguments.py``:
_add_mla_args): ``--q-lora-rank`` None (no Q compression),
``--kv-lora-rank`` 32, ``--qk-head-dim`` 128, ``--qk-pos-emb-head-dim`` 64,
``--v-head-dim`` 128."""

_MLA = "megatron/core/transformer/multi_latent_attention.py: MLASelfAttention"
SOURCES = {
    "mla_down_input": _MLA + " (linear_q_down_proj and linear_kv_down_proj, TELinear "
                      "'duplicated', save the input LayerNorm's output once)",
    "q_down_output": _MLA + " (linear_q_up_proj, TELayerNormColumnParallelLinear: "
                     "the q_layernorm's input, inputmat)",
    "q_up_input": _MLA + " (linear_q_up_proj: the q_layernorm's output, ln_out)",
    "kv_down_output": _MLA + " (linear_kv_up_proj, TELayerNormColumnParallelLinear: "
                      "the kv_layernorm's input, a contiguous copy of the r_kv columns)",
    "kv_up_input": _MLA + " (linear_kv_up_proj: the kv_layernorm's output, ln_out)",
    "query": _MLA + " (query = [q_no_pe, rope(q_pos_emb)], a/t heads of d_qk + d_r)",
    "key": _MLA + " (key = [k_no_pe, rope(k_pos_emb) per head], a/t heads of d_qk + d_r)",
    "value": _MLA + " (value split from linear_kv_up_proj's output, a/t heads of d_v)",
    "proj_input": _MLA + " (linear_proj on the core attention's a/t heads of d_v)",
}
"""Where Megatron-LM's MLA saves each row it adds or reshapes (file: class)."""

NEEDED_FOR = {
    "mla_down_input": "weight gradients of the down projections (and, without q_lora_rank, "
                      "of the Q projection): dW = X^T dY",
    "q_down_output": "RMSNorm backward of the Q latent: the input is normalised again",
    "q_up_input": "weight gradient of the Q up projection: dW = X^T dY",
    "kv_down_output": "RMSNorm backward of the KV latent: the input is normalised again",
    "kv_up_input": "weight gradient of the KV up projection: dW = X^T dY",
}
"""Why each new row is kept (query, key, value and proj_input keep the
ledger's reasons: :data:`actmem.layer.ledger.NEEDED_FOR`)."""

NAMES = {
    "mla_down_input": "input of the Q and KV down projections",
    "q_down_output": "Q latent (input of the Q latent's RMSNorm)",
    "q_up_input": "normalised Q latent (input of the Q up projection)",
    "kv_down_output": "KV latent (input of the KV latent's RMSNorm)",
    "kv_up_input": "normalised KV latent (input of the KV up projection)",
}


def check_mla(c) -> None:
    """Refuse multi-latent attention options that Megatron-LM would refuse
    or the ledger cannot count (called by :class:`actmem.LayerConfig`).

    Raises:
        TypeError: a rank or head dim is not an int, the flag not a bool.
        ValueError: an MLA option given without ``multi_latent_attention``;
            a size < 1; ``qk_pos_emb_head_dim`` odd (rotary embedding turns
            pairs of columns); ``kv_heads`` with MLA (every head gets its
            own K and V from the latent).
    """
    if not flag("multi_latent_attention", c.multi_latent_attention):
        given = [n for n in MLA_OPTIONS[1:] if getattr(c, n) != MLA_DEFAULTS[n]]
        if given:
            raise ValueError(f"{', '.join(given)} given without multi_latent_attention=True: "
                             "these options describe multi-latent attention")
        return
    for name in MLA_OPTIONS[1:]:
        if getattr(c, name) is not None or name != "q_lora_rank":
            object.__setattr__(c, name, positive_int(name, getattr(c, name)))  # plain ints
    if c.qk_pos_emb_head_dim % 2:
        raise ValueError(f"qk_pos_emb_head_dim={c.qk_pos_emb_head_dim} must be even: "
                         "rotary embedding rotates pairs of columns")
    if c.kv_heads is not None:
        raise ValueError(f"kv_heads={c.kv_heads} with multi_latent_attention=True: MLA "
                         "gives every one of the a heads its own key and value from the "
                         "latent; pass kv_heads=None")


def mla_rows(c) -> tuple[LedgerRow, ...]:
    """The rows MLA adds before core attention, per micro-batch, whole tensors
    (every one replicated over t; split along s by sequence parallelism):
    the down projections' input 2sbh, with ``q_lora_rank`` the Q latent
    before and after its norm 2 x 2sb*r_q, the KV latent before and after
    its norm 2 x 2sb*r_kv. All in the paper's ``fixed`` group (replicated).
    """
    N, rows = c.s * c.b, [("mla_down_input", "h", c.h)]
    if c.q_lora_rank is not None:
        rows += [("q_down_output", "q_lora_rank", c.q_lora_rank),
                 ("q_up_input", "q_lora_rank", c.q_lora_rank)]
    rows += [("kv_down_output", "kv_lora_rank", c.kv_lora_rank),
             ("kv_up_input", "kv_lora_rank", c.kv_lora_rank)]
    return tuple(LedgerRow(key, NAMES[key], "attention", ("s", "b", dim), N * width, 2,
                           REPLICATED, 1, "fixed", SOURCES[key], NEEDED_FOR[key])
                 for key, dim, width in rows)


def head_shapes(c) -> dict[str, tuple[tuple[str, ...], int]]:
    """(shape, elements) of the head-split rows under MLA: Q and K of
    a x d_q, V of a x d_v per token, the output projection's input
    a*d_v per token."""
    N, a, dq, dv = c.s * c.b, c.a, c.qk_head_dim + c.qk_pos_emb_head_dim, c.v_head_dim
    qk = (("s", "b", "a", "qk_head_dim+qk_pos_emb_head_dim"), N * a * dq)
    return {"query": qk, "key": qk, "value": (("s", "b", "a", "v_head_dim"), N * a * dv),
            "proj_input": (("s", "b", "a*v_head_dim"), N * a * dv)}


def with_mla(rows, c):
    """Multi-latent attention: ``qkv_input`` becomes the rows of
    :func:`mla_rows`, and Q, K, V and the output projection's input take
    MLA's head dims (:func:`head_shapes`, a/t heads on each rank). The
    LayerNorm input, the attention map (b, a, s, s) and the dropout mask
    after the block are the paper's."""
    shapes, out = head_shapes(c), []
    for r in rows:
        if r.key == "qkv_input":
            out += mla_rows(c)
        elif r.key in shapes:
            shape, elements = shapes[r.key]
            out.append(replace(r, shape=shape, elements=elements, placement=HEAD_SPLIT,
                               ranks=c.t, source=SOURCES[r.key]))
        else:
            out.append(r)
    return tuple(out)


def mla_attention_parameters(c, h: int, norm: int, bias: bool) -> tuple[int, int]:
    """(split over t, replicated) weights of one MLA attention block, its
    input norm included (``norm``: weights per normalised element, 1 for
    RMSNorm, 2 for LayerNorm).

    Split (column-parallel up projections, row-parallel output): Q
    (r_q x a*d_q, or h x a*d_q without ``q_lora_rank``), KV up
    (r_kv x a*(d_qk + d_v)), output (a*d_v x h). Replicated (``duplicated``
    down projections, norms): Q down h x r_q, KV down h x (r_kv + d_r), the
    latents' norms, the input norm, and the output projection's bias
    when ``bias``. MLA's other linears have no bias (``bias=False`` in
    MLASelfAttention).
    """
    a, dq, rq, rkv = c.a, c.qk_head_dim + c.qk_pos_emb_head_dim, c.q_lora_rank, c.kv_lora_rank
    q_split = (rq or h) * a * dq
    split = q_split + rkv * a * (c.qk_head_dim + c.v_head_dim) + a * c.v_head_dim * h
    replicated = (h * (rq or 0) + h * (rkv + c.qk_pos_emb_head_dim)
                  + norm * ((rq or 0) + rkv + h) + int(bias) * h)
    return split, replicated


def with_gathered_rotary_key(rows, c):
    """``rows`` (already split along s) and, with ``mla_up_proj`` under
    sequence parallelism at t > 1, the rotary key the checkpoint keeps:
    ``get_query_key_value_tensors`` gathers ``k_pos_emb`` over the sequence
    (``gather_from_sequence_parallel_region``, a new s x b x d_r tensor)
    before ``qkv_up_checkpoint`` saves its inputs; whole on every rank.
    Without the checkpoint the fused rotation saves only cos and sin."""
    from .recompute_modules import modules_of
    if "mla_up_proj" not in modules_of(c) or c.t == 1:
        return rows
    row = LedgerRow("mla_rotary_key_gathered", "rotary key gathered over the sequence (kept "
                    "by the mla_up_proj checkpoint)", "attention",
                    ("s", "b", "qk_pos_emb_head_dim"), c.s * c.b * c.qk_pos_emb_head_dim, 2,
                    REPLICATED, 1, "fixed",
                    "megatron/core/transformer/multi_latent_attention.py: MLASelfAttention."
                    "get_query_key_value_tensors (k_pos_emb = gather_from_sequence_parallel_"
                    "region(k_pos_emb), then qkv_up_checkpoint.checkpoint(..., k_pos_emb, ...))",
                    "the recomputed up projection and rotary embedding take it as input")
    return (*rows, row)

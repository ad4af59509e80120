"""Megatron-LM's unfused rotary embedding keeps its cos and sin in every layer.

With ``--no-rope-fusion`` Megatron-LM rotates the queries and the keys in
PyTorch (``megatron/core/models/common/embeddings/rope_utils.py``:
_apply_rotary_pos_emb_bshd): ``cos_ = cos(freqs).to(t.dtype)``, ``sin_``
likewise, then ``t * cos_ + _rotate_half(t) * sin_``. Autograd's
multiplications keep the factor the gradient of ``t`` needs, ``cos_`` and
``sin_`` (``freqs`` needs none), each of shape (s, 1, 1, d) in the
activations' dtype, made anew by each call: one call for Q and one for K,
so four tensors of s*d elements per layer, the same on every
tensor-parallel rank (positions, not heads), never split along s (the
rotation runs after the QKV projection has gathered the sequence).
``_rotate_half`` (``chunk``, ``neg``, ``cat``) and the sum keep nothing. The
fused kernel (Megatron-LM's default, Transformer Engine's
``FusedRoPEFunc``) keeps only the shared ``freqs``.

Multi-latent attention rotates only its positional columns the same way
(``multi_latent_attention.py``: MLASelfAttention.get_query_key_value_tensors,
``qkv_up_proj_and_rope_apply`` without ``apply_rope_fusion``: one call for
``q_pos_emb``, one for the shared ``k_pos_emb``, ``mla_rotary_interleaved``
regrouping the columns by slicing and ``cat``, which keep nothing): four
tensors of s*d_r elements, d_r = ``qk_pos_emb_head_dim``. With
``mla_up_proj`` in ``recompute_modules`` the rotation runs inside that
checkpoint and keeps nothing.

:class:`actmem.LayerConfig`'s ``unfused_rope`` adds the row
``rope_cos_sin`` after every other transformation (sequence parallelism
does not split it); full recomputation keeps only the layer input.
"""

from __future__ import annotations

from ..validate import flag
from .ledger import REPLICATED, LedgerRow

SOURCE = ("megatron/core/models/common/embeddings/rope_utils.py: _apply_rotary_pos_emb_bshd "
          "(t * cos_ + _rotate_half(t) * sin_, for Q and for K)")
MLA_SOURCE = ("megatron/core/transformer/multi_latent_attention.py: MLASelfAttention."
              "get_query_key_value_tensors (apply_rotary_pos_emb on q_pos_emb and k_pos_emb), "
              "rope_utils.py: _apply_rotary_pos_emb_bshd")
NEEDED_FOR = ("rotary embedding backward: the gradient of t * cos + rotate_half(t) * sin "
              "multiplies by cos and sin")


def check_unfused_rope(c) -> None:
    """Refuse ``unfused_rope`` where its rows are not these.

    Raises:
        TypeError: not a bool.
    """
    flag("unfused_rope", c.unfused_rope)


def with_unfused_rope(rows, c):
    """``rows`` and, when ``c.unfused_rope`` (and not full recomputation,
    nor MLA's ``mla_up_proj`` recomputation), the row ``rope_cos_sin``:
    4*s*d elements (d = d_h, or MLA's d_r), whole on every rank."""
    mla = c.multi_latent_attention
    if (not c.unfused_rope or c.recompute == "full"
            or (mla and "mla_up_proj" in (c.recompute_modules or ()))):
        return rows
    from .head_dim import head_dim
    width, dim = (c.qk_pos_emb_head_dim, "qk_pos_emb_head_dim") if mla else (head_dim(c), "d_h")
    row = LedgerRow("rope_cos_sin", "cos and sin of the unfused rotary embedding (Q's and K's)",
                    "attention", ("4", "s", dim), 4 * c.s * width, 2, REPLICATED, 1,
                    "fixed", MLA_SOURCE if mla else SOURCE, NEEDED_FOR)
    return rows + (row,)

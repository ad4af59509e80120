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

:class:`actmem.LayerConfig`'s ``unfused_rope`` adds the row
``rope_cos_sin`` after every other transformation (sequence parallelism
does not split it); full recomputation keeps only the layer input.
"""

from __future__ import annotations

from ..validate import flag
from .ledger import REPLICATED, LedgerRow

SOURCE = ("megatron/core/models/common/embeddings/rope_utils.py: _apply_rotary_pos_emb_bshd "
          "(t * cos_ + _rotate_half(t) * sin_, for Q and for K)")
NEEDED_FOR = ("rotary embedding backward: the gradient of t * cos + rotate_half(t) * sin "
              "multiplies by cos and sin")


def check_unfused_rope(c) -> None:
    """Refuse ``unfused_rope`` where its rows are not these.

    Raises:
        TypeError: not a bool. ValueError: with multi-latent attention,
            which rotates its own positional part.
    """
    flag("unfused_rope", c.unfused_rope)
    if c.unfused_rope and c.multi_latent_attention:
        raise ValueError("unfused_rope=True with multi_latent_attention=True: multi-latent "
                         "attention's unfused rotation is not modelled")


def with_unfused_rope(rows, c):
    """``rows`` and, when ``c.unfused_rope`` (and not full recomputation),
    the row ``rope_cos_sin``: 4*s*d elements, whole on every rank."""
    if not c.unfused_rope or c.recompute == "full":
        return rows
    from .head_dim import head_dim
    row = LedgerRow("rope_cos_sin", "cos and sin of the unfused rotary embedding (Q's and K's)",
                    "attention", ("4", "s", "d_h"), 4 * c.s * head_dim(c), 2, REPLICATED, 1,
                    "fixed", SOURCE, NEEDED_FOR)
    return rows + (row,)

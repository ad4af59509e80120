"""The linear layers' weight shapes (out x in) of one layer on one GPU.

Megatron-LM's column-parallel linears (Q/K/V, fc1, multi-latent
attention's up projections) split their output dimension over the t ranks
of the tensor-parallel group, the row-parallel ones (the attention's output
projection, fc2) their input dimension (``megatron/core/tensor_parallel/
layers.py``); multi-latent attention's down projections are whole on every
rank. Transformer Engine's weights keep this ``(out_features,
in_features)`` layout. :mod:`actmem.run.moments.dummy_wgrads` and
:mod:`actmem.run.model_states.muon` read these shapes.
"""

from __future__ import annotations

from ...layer.head_dim import head_dim


def attention_weights(c) -> list[tuple[int, int]]:
    """The attention's linear weights of layer ``c`` (an
    :class:`actmem.LayerConfig` at its t) on one rank, in the order of the
    layer's parameters: Q/K/V as one matrix and the output projection, or
    multi-latent attention's Q (down and up, or one), its key/value down
    and up projections, and the output projection."""
    h, t = c.h, c.t
    if c.multi_latent_attention:
        q_dim = c.a * (c.qk_head_dim + c.qk_pos_emb_head_dim)
        q = ([(c.q_lora_rank, h), (q_dim // t, c.q_lora_rank)] if c.q_lora_rank
             else [(q_dim // t, h)])
        return q + [(c.kv_lora_rank + c.qk_pos_emb_head_dim, h),
                    (c.a * (c.qk_head_dim + c.v_head_dim) // t, c.kv_lora_rank),
                    (h, c.a * c.v_head_dim // t)]
    d = head_dim(c)
    return [((c.a + 2 * c.g) * d // t, h), (h, c.a * d // t)]


def mlp_weights(h: int, f: int, activation: str, t: int) -> list[tuple[int, int]]:
    """fc1's weight (twice as wide when gated) and fc2's, split over t."""
    return [((2 if activation == "swiglu" else 1) * f // t, h), (h, f // t)]

"""Context parallelism in the timeline: the key/value exchange buffers
inside Transformer Engine's context-parallel attention.

The ledger (:mod:`actmem.layer.context_parallel`) counts what the attention
saves for backward; while it runs, it also holds buffers that are freed when
it returns. Read from ``transformer_engine/pytorch/attention/
dot_product_attention/context_parallel.py`` (bf16, no FP8, Megatron-LM's
``sbhd`` layout, causal, FlashAttention): with Q, K, V, O and L the bytes of
one rank's saved query, key, value, output (``proj_input``) and merged
fp32 log-sum-exp rows (:func:`row_sizes`) and n ranks in the ring:

* ``"p2p"``, AttnFuncWithCPAndKVP2P.forward: ``p2p_comm_buffers`` keeps all
  n ring buffers of K and V (``torch.cat((k.view(-1), v.view(-1)))``, then
  ``torch.empty_like`` per step) until it returns; the last one is the saved
  row, the caller (Megatron-LM's attention) still holds its k and v, and
  ``out_per_step`` and ``softmax_lse_per_step`` keep every step's output
  (bf16) and log-sum-exp (fp32) until the outputs are merged. On the last
  ring rank every step sees all its queries (the first rank's upper-triangle
  steps see half), so at the merge: n(K + V) + nO + nL.
  AttnFuncWithCPAndKVP2P.backward: ``dq_buffer`` (Q), two double buffers of
  K/V and dK/dV (``torch.empty((2, *kv.shape))`` each, 4(K + V)) and one
  step's FlashAttention gradients (``_flash_attn_bwd``: dq, dk, dv of the
  diagonal step, Q + K + V): 2Q + 5(K + V) (:func:`exchange_gradients`).
* ``"allgather"``, AttnFuncWithCPAndKVAllGather.forward:
  ``gather_along_first_dim`` gathers the whole sequence's K and V (n(K + V)),
  reordered by ``torch.index_select`` (a copy of one of them beside it), then
  the zero ``out`` accumulator (O) and the two half-query outputs (O)
  beside the returned output: n(K + V) + max(n max(K, V), 2O). Backward:
  dq (Q), whole-sequence dk and dv (n(K + V)), K and V gathered again
  (n(K + V)), the two steps' dq (Q) and dk, dv (the key ranges of chunks r
  and 2n-1-r: 2n+1 chunks of (K + V)/2), all alive until it returns, and the
  ``index_select`` copy of dk before the reduce-scatter (n max(K, V)).
* ``"a2a"``, AttnFuncWithCPAndQKVOA2A.forward: the caller's Q, K, V (before
  the all-to-all; the rows are those after it) stay alive;
  ``flash_attn_a2a_communicate`` copies each input head-major
  (``movedim(...).contiguous()``, kept in ``a2a_inputs`` until it returns),
  receives into ``torch.empty_like`` and reorders by ``index_select``: at
  its busiest 2Q + 2K or Q + 2K + 2V; after the attention the output goes
  back through a reordered copy and a received buffer (2O). Backward: dO
  after its all-to-all (O, alive to the end), and the gradients' way back
  with FlashAttention's dq, dk, dv (Q + K + V) still held: their head-major
  copies (Q + K + V) and two received or converted tensors at a time.
* ``"a2a+p2p"``: the all-to-all moments above over the first group, the
  ring's over the second (n = its size), the ring's buffers (dq_buffer and
  both double buffers) holding the gradients on their way back.

Per type, :func:`exchange_buffers` and :func:`exchange_gradients` give the
busiest moment's buffers (the largest over ranks and moments), beyond the
saved rows and the attention's incoming gradient dO (not counted at cp = 1
either), and without FlashAttention's own workspace (at cp = 1 not counted
either). The project's measured ring and all-to-all
(:mod:`actmem.measure.context_parallel`) do not hold these buffers as TE
does (they are written for the saved rows and the exact result), so these
bytes are checked by hand arithmetic against TE's code (tests), not
measured.

:func:`with_exchange` puts them on a layer's
:class:`~actmem.run.moments.timeline_events.LayerMoments`; :mod:`actmem.run.moments.timeline`
adds them inside the last layer's attention of a forward and a backward,
beside the rows alive then (the layer's rows up to ``proj_input``, the
output counted from the start: at a2a's first moment O early), and its
forward buffers again in a backward that recomputes the attention.

Not counted: the small tensors (cu_seqlens and rng states per step, the p2p
backward's contiguous copy of half of L), FP8, the ``thd`` layout, and
FlashAttention's workspace.
"""

from __future__ import annotations

from dataclasses import replace

from ...layer.context_parallel import _attention_kept, with_context_parallel

LAST_ATTENTION_ROW = "proj_input"
"""The attention's output: the last ledger row alive at its moments."""


def row_sizes(c) -> dict[str, int]:
    """Bytes of one rank's Q, K, V, O (``proj_input``) and L (the merged
    log-sum-exp) rows of layer ``c`` (a :class:`actmem.LayerConfig` with
    cp > 1), from :func:`actmem.layer.context_parallel.with_context_parallel`
    without recomputation (the attention holds them while it runs)."""
    rows = {r.key: r.bytes for r in with_context_parallel(_no_recompute(c))}
    return dict(Q=rows["query"], K=rows["key"], V=rows["value"], O=rows["proj_input"],
                L=rows["softmax_lse"])


def _no_recompute(c):
    return c if c.recompute == "none" else replace(c, recompute="none", recompute_modules=None)


def _ring_forward(n, Q, K, V, O, L):
    return {"K/V ring buffers and the caller's K, V": n * (K + V),
            "per-step outputs": n * O, "per-step log-sum-exps": n * L}


def _a2a_forward(Q, K, V, O, L):
    """The all-to-all moments before and after the attention (beyond the
    caller's Q, K, V)."""
    return [{"head-major copies": Q + K, "received buffers": Q + K},
            {"head-major copies": Q + K + V, "received buffers": K + V},
            {"output copies": 2 * O}]


def _a2a_backward(held, Q, K, V, O):
    """The moments of dO's all-to-all and of dq, dk, dv's way back, with
    ``held`` the bytes that hold the attention's gradients meanwhile."""
    moments = [{"dO copies": 2 * O}]
    for extra in (2 * Q + K, Q + 2 * K + V, Q + K + 2 * V):
        moments.append({"attention gradients": held, "head-major copies": Q + K + V,
                        "received and converted": extra})
    return moments


def _busiest(moments):
    return max(moments, key=lambda m: sum(m.values()))


def exchange_buffers(c) -> dict[str, int]:
    """Transient bytes of layer ``c``'s context-parallel attention at its
    busiest forward moment, by buffer (module docstring), on the busiest
    rank; ``{}`` at cp = 1.

    >>> from actmem import LayerConfig
    >>> c = LayerConfig(8192, 1, 4096, 32, kv_heads=8, flash_attention=True, cp=4)
    >>> {k: v // 2**20 for k, v in exchange_buffers(c).items()}   # MiB; K = V = 4 MiB
    {"K/V ring buffers and the caller's K, V": 32, 'per-step outputs': 64, 'per-step log-sum-exps': 1}
    """
    if c.cp == 1:
        return {}
    size = row_sizes(c)
    Q, K, V, O, L = size.values()
    kind = c.cp_comm_type
    if kind == "p2p":
        return _ring_forward(c.cp, **size)
    if kind == "allgather":
        gathered = {"gathered K and V": c.cp * (K + V)}
        return {**gathered, **_busiest([{"reordered copy": c.cp * max(K, V)},
                                        {"output accumulator and per-step outputs": 2 * O}])}
    moments = _a2a_forward(**size)
    if kind == "a2a+p2p":
        moments.append(_ring_forward(c.hierarchical_context_parallel_sizes[1], **size))
    return {"caller's Q, K, V": Q + K + V, **_busiest(moments)}


def exchange_gradients(c) -> dict[str, int]:
    """Transient bytes of layer ``c``'s context-parallel attention at its
    busiest backward moment, by buffer (module docstring); ``{}`` at cp = 1.

    >>> from actmem import LayerConfig
    >>> c = LayerConfig(8192, 1, 4096, 32, kv_heads=8, flash_attention=True, cp=4)
    >>> {k: v // 2**20 for k, v in exchange_gradients(c).items()}   # MiB; Q = 16, K = V = 4
    {'dq buffer': 16, 'K/V and dK/dV ring buffers': 32, "one step's dq, dk, dv": 24}
    """
    if c.cp == 1:
        return {}
    Q, K, V, O, _ = row_sizes(c).values()
    n, kind = c.cp, c.cp_comm_type
    ring = {"dq buffer": Q, "K/V and dK/dV ring buffers": 4 * (K + V),
            "one step's dq, dk, dv": Q + K + V}
    if kind == "p2p":
        return ring
    if kind == "allgather":
        return {"dq": Q, "whole-sequence dk, dv": n * (K + V), "gathered K and V": n * (K + V),
                "per-step dq": Q, "per-step dk, dv": (2 * n + 1) * (K + V) // 2,
                "reordered dk copy": n * max(K, V)}
    if kind == "a2a":
        return {"dO after the all-to-all": O, **_busiest(_a2a_backward(Q + K + V, Q, K, V, O))}
    held = Q + 4 * (K + V)   # dq_buffer and both double buffers
    return {"dO after the all-to-all": O,
            **_busiest([ring] + _a2a_backward(held, Q, K, V, O))}


def _upto_attention(pairs) -> int:
    """Bytes of the (key, bytes) rows up to and including the attention's
    output (all of them when it is not among them: a full-recomputation
    checkpoint)."""
    keys = [key for key, _ in pairs]
    end = keys.index(LAST_ATTENTION_ROW) + 1 if LAST_ATTENTION_ROW in keys else len(keys)
    return sum(b for _, b in pairs[:end])


def with_exchange(moments, kinds, model, t: int, sequence_parallel: bool, recompute: str,
                  cp: int, cp_comm_type: str, hierarchical_context_parallel_sizes=None,
                  layer_options=None):
    """(``moments``, ``kinds``) with the exchange buffers on every layer
    kind (:class:`~actmem.run.moments.timeline_events.LayerMoments`; ``kinds``: the
    MoE model's per-kind moments or None): ``exchange`` and
    ``exchange_backward`` from :func:`exchange_buffers` and
    :func:`exchange_gradients` of ``model``'s attention (the whole-sequence
    model; the same attention in dense and MoE layers), ``to_attention``
    the layer's rows up to its attention output under ``recompute`` and
    ``to_attention_recomputed`` without recomputation, and
    ``attention_recomputed`` whether the backward runs the attention again
    (:func:`actmem.layer.context_parallel._attention_kept`: full
    recomputation, or ``core_attn`` among the recomputed modules). Unchanged
    at cp = 1.
    """
    if cp == 1:
        return moments, kinds
    options = dict(layer_options or {}, cp=cp, cp_comm_type=cp_comm_type,
                   hierarchical_context_parallel_sizes=hierarchical_context_parallel_sizes)
    layers = {mode: model.layer(t, sequence_parallel, mode, moe=False, **options)
              for mode in (recompute, "none")}
    rows = {mode: [(r.key, r.bytes) for r in with_context_parallel(c)]
            for mode, c in layers.items()}
    extra = dict(exchange=sum(exchange_buffers(layers["none"]).values()),
                 exchange_backward=sum(exchange_gradients(layers["none"]).values()),
                 to_attention=_upto_attention(rows[recompute]),
                 to_attention_recomputed=_upto_attention(rows["none"]),
                 attention_recomputed=not _attention_kept(layers[recompute]))
    return (replace(moments, **extra),
            kinds and {kind: replace(m, **extra) for kind, m in kinds.items()})


FORWARD = "forward of {name}: the last layer's context-parallel attention"
BACKWARD = "backward of {name}: the last layer's context-parallel attention"
RECOMPUTING = "backward of {name}: the last layer's context-parallel attention, recomputing"
"""Labels of the timeline's events (:data:`actmem.translations` has each)."""


def forward_moments(step, chunk: int, transient: int, weights: int):
    """(label with ``{name}``, bytes) inside a forward pass through ``chunk``
    (``step``: :mod:`actmem.run.moments.timeline`'s running state) while its last
    layer's context-parallel attention holds its exchange buffers, beside
    the earlier layers' rows, this layer's up to the attention output and
    ``transient`` (the data loader's mask) and ``weights`` (autocast's
    copies) bytes; none at cp = 1."""
    stack = step.stacks[chunk]
    if not stack or not stack[-1].exchange:
        return
    layer, embedding = stack[-1], step.passes[chunk].embedding
    yield (FORWARD,
           step.alive(embedding + step._forward_layers_before(chunk, len(stack) - 1)
                      + layer.to_attention, transient=transient + layer.exchange,
                      weights=weights))


def backward_moments(step, chunk: int, kept: int, j: int, group: int):
    """(label with ``{name}``, bytes) inside a backward pass through ``chunk`` at its
    layer ``j``'s context-parallel attention (``kept``: what the pass holds, the
    timeline's baseline; ``group``: the layers of j's full-recomputation
    group, recomputed): where the attention is recomputed (full, or
    selective with ``core_attn``: ``attention.py``:
    _checkpointed_attention_forward, ``tensor_parallel.checkpoint`` around
    TE's attention) its forward again, with its forward buffers; then
    its backward, beside the layer's rows up to
    the attention output (rebuilt by any recomputation: its later rows are
    freed by then) and the earlier layers'; none at cp = 1."""
    layer, loss = step.stacks[chunk][j], -step.passes[chunk].logits_loss
    if not layer.exchange_backward:
        return
    if layer.attention_recomputed:   # its checkpointed forward, ring and all
        yield (RECOMPUTING,
               step.alive(step._backward_layers(chunk, layer.to_attention_recomputed, j) - kept,
                          loss, transient=layer.exchange,
                          weights=step._backward_copies(chunk, group, mlp=True)))
    rows = layer.to_attention if layer.recompute == "none" else layer.to_attention_recomputed
    yield (BACKWARD,
           step.alive(step._backward_layers(chunk, rows, j) - kept, loss,
                      transient=layer.exchange_backward,
                      weights=step._backward_copies(chunk, group)))

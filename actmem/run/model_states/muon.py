"""The Muon optimizer as Megatron-LM runs it (``--optimizer muon``).

Which parameters Muon steps (``megatron/core/optimizer/emerging_optimizers.py``:
``_is_muon_excluded``): every 2-D weight that is not the word embedding or
the output layer (``is_embedding_or_output_parameter``, set in
``language_module.py``), so the linear layers' weights, the MoE router's
``E x h``, each routed expert's two matrices (Transformer Engine's grouped
linear keeps one ``weight{i}`` per expert) and a learned position table.
The embedding, the output layer, the norms and the biases go to Adam
(``--muon-scalar-optimizer adam``).

What each keeps (emerging_optimizers 0.3.0, the version Megatron-LM pins):
Megatron-LM wraps both in ``Float16OptimizerWithFloat16Params``, so every
parameter has an fp32 main copy (4 bytes); Muon adds one fp32 momentum
buffer (``OrthogonalizedOptimizer._init_group``: ``zeros_like``), 8 bytes
per parameter, Adam its two moments, 12. Without the distributed optimizer
nothing is sharded: ``(8 M + 12 A)`` bytes on every data-parallel rank, M
and A the GPU's Muon and Adam parameters. (With
``--use-distributed-optimizer`` Megatron-LM gives whole Muon parameters to
single ranks, a layer-wise layout actmem refuses.)

The step orthogonalizes one matrix at a time (a Python loop over the
parameters, dense ones first, then the experts': Megatron-LM groups expert
parameters apart) with ``newton_schulz`` (``muon_utils.py``): an fp32
normalized copy, the iteration in bf16 (``--muon-fp32-matmul-prec
medium``), the Gram matrix ``m x m`` on the smaller side ``m``, the fp32
result, then Megatron-LM's scaling (``scaled_orthogonalize_fn``: two more
fp32 temporaries). Measured on CPU with the real code, a matrix of ``F``
elements peaks at ``max(12 F, 4 F + 4 m^2)`` bytes above the states, and
the previous matrix's result (``4 F_prev``) is still alive. Q/K/V is split
into its Q, K and V blocks first (``--muon-split-qkv``, the default;
``TensorParallelMuon.orthogonalize``): their fp32 copies (``4 F_qkv``) and
the results of the blocks done so far stay while each block is
orthogonalized, then the results are concatenated.
"""

from __future__ import annotations

from dataclasses import replace

from ..job.weight_shapes import attention_weights, mlp_weights
from ...layer.head_dim import head_dim

MUON_BYTES, ADAM_BYTES = 8, 12
"""Optimizer bytes per parameter: fp32 main copy + momentum; + two moments."""


def muon_matrices(model, dense_layers: int, moe_layers: int, ep: int,
                  positions: bool) -> list[tuple[str, int, int]]:
    """(kind, rows, columns) of the matrices Muon steps on one GPU at t = 1,
    in the order of its step: the position table (``positions``: the stage
    holds a learned one), each dense layer's and each MoE layer's dense
    matrices, then the routed experts' (``E/ep`` per MoE layer). kind is
    ``"qkv"`` for Q/K/V, which the step splits, else ``"matrix"``."""
    dense = [("matrix", model.max_positions or model.s, model.h)] if positions else []
    experts = []
    if dense_layers:
        c = model.layer(moe=False)
        dense += dense_layers * (_attention(c) + _named(mlp_weights(c.h, c.f, c.activation, 1)))
    if moe_layers:
        c = model.layer(moe=True, etp=1)
        shared = c.moe_shared_expert_intermediate_size
        own = _attention(c) + [("matrix", c.num_experts, c.h)] + (
            _named(mlp_weights(c.h, shared, c.activation, 1)) if shared else [])
        dense += moe_layers * own
        fc1, fc2 = mlp_weights(c.h, c.f_e, c.activation, 1)
        local = c.num_experts // ep
        experts = moe_layers * _named([fc1] * local + [fc2] * local)
    return dense + experts


def _attention(c) -> list[tuple[str, int, int]]:
    matrices = _named(attention_weights(c))
    if not c.multi_latent_attention:
        matrices[0] = ("qkv", *matrices[0][1:])
    return matrices


def _named(shapes) -> list[tuple[str, int, int]]:
    return [("matrix", rows, columns) for rows, columns in shapes]


def muon_states(states, model, dense_layers: int, moe_layers: int, ep: int, positions: bool):
    """``states`` (Megatron-LM's accounting, Adam on every parameter, not
    sharded) with Muon's on a GPU that holds ``dense_layers`` dense and
    ``moe_layers`` MoE layers of ``model`` (and its learned position table,
    ``positions``): 8 bytes per parameter of its matrices
    (:func:`muon_matrices`), 12 for the rest, and the step's transient
    (:func:`newton_schulz_transient`)."""
    matrices = muon_matrices(model, dense_layers, moe_layers, ep, positions)
    c = model.layer(moe=False)
    muon = sum(rows * columns for _, rows, columns in matrices)
    optimizer = MUON_BYTES * muon + ADAM_BYTES * (states.parameters - muon)
    return replace(states, optimizer=optimizer,
                   step_transient=newton_schulz_transient(matrices, c.a * head_dim(c)))


def newton_schulz_transient(matrices, q_rows: int) -> int:
    """The most bytes Muon's step holds above the states (module
    docstring): over the matrices in step order, a matrix's own peak plus
    the previous matrix's fp32 result; ``q_rows``: Q's rows in Q/K/V (K and
    V share the rest)."""
    peak, previous = 0, 0
    for kind, rows, columns in matrices:
        if kind == "qkv":
            kv = (rows - q_rows) // 2
            own = _split_qkv(rows * columns, [(q_rows, columns), (kv, columns), (kv, columns)])
        else:
            own = _orthogonalize(rows, columns)
        peak = max(peak, own + previous)
        previous = 4 * rows * columns
    return peak


def _split_qkv(elements: int, blocks) -> int:
    """Q/K/V's peak: the blocks' fp32 copies, the results of the blocks
    before, and the block's own peak."""
    done, peak = 0, 0
    for rows, columns in blocks:
        peak = max(peak, 4 * elements + done + _orthogonalize(rows, columns))
        done += 4 * rows * columns
    return peak


def _orthogonalize(rows: int, columns: int) -> int:
    """One matrix's Newton-Schulz peak, bytes: ``max(12 F, 4 F + 4 m^2)``."""
    f, m = rows * columns, min(rows, columns)
    return max(12 * f, 4 * f + 4 * m * m)

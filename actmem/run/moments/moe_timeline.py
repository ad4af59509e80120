"""Mixture-of-experts layers in a whole training job: each layer's kind and
where it sits on each stage.

:func:`actmem.training_memory` puts on each pipeline stage the layers it
builds, each of its own kind (``ModelConfig.moe_pattern``, Megatron-LM's
``--moe-layer-freq``): :func:`kind_moments` gives one
:class:`~actmem.run.moments.timeline_events.LayerMoments` per kind (the dense layers
are those of the model without experts, :func:`dense_twin`) and
:func:`stage_stacks` lays them out, chunk by chunk, in the order the stage
holds them, for :func:`actmem.run.moments.timeline.stage_timeline`.
The token dispatch's transient buffers are :mod:`actmem.run.moments.moe_dispatch`'s.
"""

from __future__ import annotations

from dataclasses import fields, replace

from ...layer.config import LayerConfig
from ...layer.recompute_modules import for_layer
from ...memo import kept_by_repr
from ..job.model import ModelConfig
from .moe_dispatch import dispatch_buffers, dispatch_gradients
from .precision import layer_rows, precision_moments
from ..schedule.split_backward import layer_weight_rows
from .timeline_events import LayerMoments

AFTER_MOE_BLOCK = ("mlp_out_dropout_mask",)
"""Ledger rows made after the MoE block (not alive at its dispatch)."""


@kept_by_repr(64)  # a frozen model: every training_memory asks
def dense_twin(model: ModelConfig) -> ModelConfig:
    """``model`` without experts: the shape of its dense layers (a model
    that mixes dense and MoE layers builds its dense ones as this one's)."""
    moe = {f.name: f.default for f in fields(ModelConfig)
           if f.name.startswith("moe_") or f.name == "num_experts"}
    return replace(model, **moe)


def with_dispatch(moments: LayerMoments, c: LayerConfig, ep: int,
                  rows: tuple[tuple[str, int], ...], rows_none: tuple[tuple[str, int], ...]
                  ) -> LayerMoments:
    """``moments`` of an MoE layer with its dispatch buffers
    (:func:`dispatch_buffers`, :func:`dispatch_gradients`) and the rows
    alive at the forward moment: ``rows`` (the layer's (key, bytes) under
    the run's recomputation) but those after the MoE block; ``rows_none``:
    the same without recomputation (the forward that full recomputation
    runs again in the backward)."""
    def upto(pairs):
        return sum(b for key, b in pairs if key not in AFTER_MOE_BLOCK)
    return replace(moments, dispatch=sum(dispatch_buffers(c, ep).values()),
                   dispatch_backward=sum(dispatch_gradients(c, ep).values()),
                   to_dispatch=upto(rows), to_dispatch_recomputed=upto(rows_none))


def virtual_offsets(split, v_shaped: bool) -> list[list[int]]:
    """``offsets[i][c]``: the first layer (0-based) of stage i's chunk c.
    Virtual stages come in model order: looped, chunk c of stage i is
    virtual stage ``c*p + i``; on a V (ZBV, DualPipeV) chunk 1 of stage i is
    virtual stage ``2p-1-i``."""
    p, v = len(split), len(split[0])
    order = [(i, c) for c in range(v) for i in range(p)]
    if v_shaped:
        order = [(i, 0) for i in range(p)] + [(i, 1) for i in reversed(range(p))]
    offsets, first = [[0] * v for _ in range(p)], 0
    for i, c in order:
        offsets[i][c], first = first, first + split[i][c]
    return offsets


def stage_stacks(pattern, split, i: int, kinds: dict[int, LayerMoments],
                 v_shaped: bool = False) -> list[tuple[LayerMoments, ...]]:
    """Per chunk of stage ``i``, each layer's moments (``kinds[0]`` dense,
    ``kinds[1]`` MoE) in the order the chunk holds them; ``pattern``:
    ``ModelConfig.moe_pattern()``, ``split``: :func:`actmem.split_layers`."""
    offsets = virtual_offsets(split, v_shaped)[i]
    return [tuple(kinds[pattern[j]] for j in range(first, first + n))
            for first, n in zip(offsets, split[i])]


def stack_parts(stack, recompute: str, group: int) -> tuple[int, int]:
    """(bytes one pass keeps for the layers of ``stack``, recomputation
    working set), as :func:`actmem.run.moments.precision.moment_parts` for layers of
    several kinds: selective rebuilds one layer's attention core at a time
    (the largest), full one group from its checkpoint (the largest group)."""
    if not stack:
        return 0, 0
    if recompute == "none":
        return sum(m.kept for m in stack), 0
    if recompute == "selective":
        return sum(m.kept for m in stack), max(m.selective_working_set for m in stack)
    groups = [stack[g:g + group] for g in range(0, len(stack), group)]
    return (sum(g[0].checkpoint for g in groups),
            max(sum(m.full for m in g) - g[0].checkpoint for g in groups))


def kind_moments(model: ModelConfig, t: int, sequence_parallel: bool, recompute: str,
                 k: int, *, ep: int = 1, etp: int | None = None,
                 weight_gradients: bool = True, split_backward: bool = False,
                 layer_options: dict | None = None,
                 rank_load: int | float = 1.0) -> dict[int, LayerMoments]:
    """One :class:`LayerMoments` per kind of layer the model has (0 dense,
    1 MoE), in bf16 (:func:`actmem.run.moments.precision.precision_moments`): the
    dense layers are :func:`dense_twin`'s, the MoE layers carry their
    dispatch buffers under ``ep`` and ``etp`` (default t);
    ``rank_load``: the MoE layers' ``moe_rank_load`` (a busier rank's);
    ``split_backward``: with the rows a weight-gradient step reads
    (:func:`actmem.run.schedule.split_backward.layer_weight_rows`).

    Raises:
        TypeError, ValueError: as :meth:`actmem.ModelConfig.layer`.
    """
    kinds = {}
    for kind in sorted(set(model.moe_pattern())):
        shape = model if kind else dense_twin(model)
        moe = {"moe": True, "etp": etp, "ep": ep,
               **({"moe_rank_load": rank_load} if rank_load != 1 else {})}
        opts = {**(layer_options or {}), **(moe if kind else {})}
        if not kind and "recompute_modules" in opts:  # the names a dense layer of model has
            opts["recompute_modules"] = for_layer(opts["recompute_modules"], recompute,
                                                  moe=False, has_experts=True)
        moments = precision_moments(shape, t, sequence_parallel, recompute, k, "bf16",
                                    weight_gradients=weight_gradients, layer_options=opts)
        if split_backward:
            rows = layer_rows(shape, t, sequence_parallel, "none", "bf16", layer_options=opts)
            moments = replace(moments, weight_rows=layer_weight_rows(
                shape, t, sequence_parallel, rows, opts))
        if kind:
            moments = with_dispatch(moments, shape.layer(t, sequence_parallel, recompute, **opts),
                                    ep, *(layer_rows(shape, t, sequence_parallel, mode, "bf16",
                                                     layer_options=opts)
                                          for mode in (recompute, "none")))
        kinds[kind] = moments
    return kinds


def stage_moe_layers(pattern, split, v_shaped: bool = False) -> tuple[int, ...]:
    """MoE layers on each stage, counted over the layers its chunks hold
    (:func:`virtual_offsets`): the ``moe_layers`` of
    :func:`actmem.model_states` for interleaved and V schedules."""
    return tuple(sum(pattern[first + j] for first, n in zip(offsets, chunks) for j in range(n))
                 for offsets, chunks in zip(virtual_offsets(split, v_shaped), split))

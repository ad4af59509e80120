"""Megatron-FSDP's buckets on one GPU: which parameters, how padded, how sharded.

Megatron-FSDP (``--use-megatron-fsdp``, version 1, sharding strategy
``optim_grads_params``) keeps every parameter in flat buckets
(``megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py``,
Megatron-LM d98e8a64):

* ``_get_parameter_groups``: the parameters outside the FSDP units (the word
  and position tables, the final norm, an untied output layer) form one
  group, cut into buckets at the first parameter that brings a bucket to
  ``ddp_bucket_size`` elements (no cut when it is None); every
  ``TransformerLayer`` is a unit with one bucket for its own parameters and,
  in an MoE layer, one for its routed experts (names with ``.experts.``);
* each bucket's chunk factor ``cf``: its parameters sorted by row size
  (``shape[1:].numel()``, largest first), the first's row size, raised to
  the least common multiple with each row size that does not divide it
  while the parameter's size is a multiple of it (a parameter smaller than
  ``cf`` leaves it);
* ``build_data_parallel_buffer_index``: the parameters laid out in order, a
  parameter whose size is not a multiple of ``cf`` rounded up to one and
  the gap filled with a partner's remainder and fragments (parameters
  smaller than ``cf``); the bucket padded to a multiple of ``W * cf``
  elements, W the ranks that share it (the data- and context-parallel ranks,
  the expert data-parallel ranks for experts); rank r's shard is the r-th
  W-th, so the padding lands on the last rank.

Modelled inputs: each layer's matrices as :mod:`actmem.run.job.weight_shapes`
gives them on one rank, in the order the layer builds them (then sorted by
row size, as the groups are), and all its one-dimensional parameters
(norms, biases) as one fragment: Megatron-FSDP
places them one by one, so where a matrix leaves a gap the modelled bucket
can differ by less than ``cf`` elements per such matrix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..job.model import ModelConfig
from ..job.parameters import parameter_count
from ..job.weight_shapes import attention_weights, mlp_weights
from .placement import layer_parameters
from ...memo import kept_by_repr


@dataclass(frozen=True)
class Bucket:
    """One Megatron-FSDP bucket on one GPU, in elements.

    Attributes:
        name: what it holds, e.g. ``"layer 3"``, ``"layer 3's experts"``,
            ``"outside the layers"``.
        unit: its layer (0 first), or None outside the layers.
        size: S, the unsharded bucket (all W ranks' shards, padded).
        world: W, the ranks that share it.
        first_rank_elements: real parameter elements in the first rank's
            shard (the last rank's holds the padding).
        early: outside the layers, its first gradient arrives at the start
            of the backward (it holds the final norm or an untied output
            layer); late: its last gradient arrives after the embedding's
            backward (it holds the word or position table).
    """

    name: str
    unit: int | None
    size: int
    world: int
    first_rank_elements: int
    early: bool = False
    late: bool = False

    @property
    def shard(self) -> int:
        """s = S / W, the elements each rank keeps."""
        return self.size // self.world


def chunk_factor(shapes: list[tuple[int, int]]) -> int:
    """``_get_parameter_groups``' chunk size factor of a bucket whose
    parameters have these ``(elements, row size)``."""
    ordered = sorted(shapes, key=lambda shape: -shape[1])
    cf = ordered[0][1]
    for numel, row in ordered:
        if not (row == cf or (cf % row == 0 and numel % cf == 0) or numel < cf):
            cf = math.lcm(cf, row)
    return cf


def layout(sizes: list[int], fragments: list[int], cf: int, world: int) -> tuple[int, int]:
    """``build_data_parallel_buffer_index`` on parameters of these sizes in
    order (``fragments``: those placed in gaps or at the end): (S, the real
    elements in the first of ``world`` shards)."""
    regular, loose, items, index = list(sizes), list(fragments), [], 0
    while regular:
        size = regular.pop(0)
        items.append((index, size))
        if size % cf == 0:
            index += size
            continue
        gap, index = index + size, index + (size // cf + 1) * cf
        remain = size % cf
        space = cf - remain
        partner = next((r for r in regular if r % cf and remain + r % cf <= cf), None)
        if partner is not None:
            regular.remove(partner)
            items.append((index - partner % cf, partner))
            space -= partner % cf
            index += partner // cf * cf
        for fragment in list(loose):
            if fragment <= space:
                items.append((gap, fragment))
                space, gap = space - fragment, gap + fragment
                loose.remove(fragment)
    for fragment in loose:
        items.append((index, fragment))
        index += fragment
    total = -(-index // (world * cf)) * world * cf
    return total, sum(max(0, min(at + n, total // world) - at) for at, n in items)


def bucket(name: str, unit, matrices: list[tuple[int, int]], vectors: int, world: int,
           early: bool = False, late: bool = False) -> Bucket:
    """A :class:`Bucket` of these matrices (out x in, in the module's order)
    and ``vectors`` elements of one-dimensional parameters, laid out as
    ``_get_parameter_groups`` orders them: by row size, largest first."""
    shapes = [(rows * row, row) for rows, row in matrices] + ([(vectors, 1)] if vectors else [])
    cf = chunk_factor(shapes)
    sizes = [rows * row for rows, row in sorted(matrices, key=lambda shape: -shape[1])]
    fragments = [n for n in sizes if n < cf] + ([vectors] if vectors else [])
    size, first = layout([n for n in sizes if n >= cf], fragments, cf, world)
    return Bucket(name, unit, size, world, first, early, late)


@kept_by_repr(64)   # a job's states and timeline ask alike
def model_buckets(model: ModelConfig, t: int, world: int, expert_world: int = 1, ep: int = 1,
                  etp: int | None = None, bucket_size: int | None = None,
                  tied_fused: bool = False) -> tuple[Bucket, ...]:
    """Megatron-FSDP's buckets of ``model`` on one GPU of a one-stage job, in
    bucket order: those outside the layers, then per layer its own and its
    routed experts' (module docstring).

    Args:
        t, ep, etp: tensor-, expert- and expert tensor-parallel sizes.
        world: ranks sharing a layer's bucket (d*cp); expert_world: the
            expert data-parallel ranks sharing an experts' bucket.
        bucket_size: Megatron-LM's resolved ``ddp_bucket_size`` (elements),
            which cuts the parameters outside the layers; None: one bucket.
        tied_fused: the tied output layer's weight gradient is fused into
            the table's (gradient accumulation fusion), so the table's
            bucket is made at the output layer's backward.
    """
    count = parameter_count(model, vocab=model.padded_vocab(t))
    return (*_outside(model, count, t, world, bucket_size, tied_fused),
            *[b for layer, moe in enumerate(model.moe_pattern())
              for b in _layer(model, count, layer, moe, t, world, expert_world, ep, etp)])


def _outside(model, count, t: int, world: int, bucket_size, tied_fused: bool) -> list[Bucket]:
    """The buckets outside the layers: the word table, learned positions,
    the final norm and an untied output layer, in this order, cut at
    ``bucket_size``."""
    h, rows = model.h, count.vocab // t
    params = [("table", (rows, h))]
    if count.positions:
        params.append(("positions", (count.positions // h, h)))
    params.append(("norm", count.final_norm))
    if count.output_layer:
        params.append(("output", (rows, h)))
    buckets, held = [], []
    for i, param in enumerate(params):
        held.append(param)
        numel = [math.prod(p) if isinstance(p, tuple) else p for _, p in held]
        if i == len(params) - 1 or (bucket_size and sum(numel) >= bucket_size):
            matrices = [p for _, p in held if isinstance(p, tuple)]
            vectors = sum(p for _, p in held if not isinstance(p, tuple))
            names = {name for name, _ in held} | ({"output"} if tied_fused and any(
                name == "table" for name, _ in held) else set())
            buckets.append(bucket("outside the layers", None, matrices, vectors, world,
                                  bool(names & {"norm", "output"}),
                                  bool(names & {"table", "positions"})))
            held = []
    return buckets


def _layer(model, count, layer: int, moe: bool, t: int, world: int, expert_world: int,
           ep: int, etp) -> list[Bucket]:
    """Layer ``layer``'s bucket and, for an MoE layer, its routed experts'."""
    # the shapes do not depend on sequence parallelism, which MoE at t > 1 needs
    c = model.layer(t, t > 1, moe=moe, etp=etp if moe else None)
    etp = (c.etp or t) if moe else 1   # None: Megatron-LM's default, t
    own, routed = layer_parameters(count, moe, t, ep, etp)
    if not moe:
        matrices = attention_weights(c) + mlp_weights(c.h, c.f, c.activation, t)
        return [_with_vectors(f"layer {layer}", layer, matrices, own, world)]
    shared = c.moe_shared_expert_intermediate_size
    matrices = attention_weights(c) + [(c.num_experts, c.h)] + (
        mlp_weights(c.h, shared, c.activation, t) if shared else [])
    experts = mlp_weights(c.h, c.f_e, c.activation, etp) * (c.num_experts // ep)
    return [_with_vectors(f"layer {layer}", layer, matrices, own, world),
            _with_vectors(f"layer {layer}'s experts", layer, experts, routed, expert_world)]


def _with_vectors(name: str, unit: int, matrices, total: int, world: int) -> Bucket:
    """A layer's bucket: its matrices, and the rest of its ``total``
    elements as one-dimensional parameters."""
    return bucket(name, unit, matrices, total - sum(r * c for r, c in matrices), world)

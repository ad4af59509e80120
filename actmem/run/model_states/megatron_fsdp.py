"""Megatron-FSDP as it runs: its states, and its buffers on a step's timeline.

Read from Megatron-LM d98e8a64, ``megatron/core/distributed/fsdp/``
(``mcore_fsdp_adapter.py``, and in ``src/megatron_fsdp/``
``megatron_fsdp.py`` and ``param_and_grad_buffer.py``), for
``--use-megatron-fsdp`` (version 1) with ``--data-parallel-sharding-strategy
optim_grads_params``, its default. The buckets are
:mod:`actmem.run.model_states.megatron_fsdp_buckets`'; per GPU, with s a
bucket's shard and S the whole bucket (elements):

* **states** (``ParamAndGradBuffer._init_each_parameter_group_buffers``):
  the bf16 parameter shard (2 bytes per s), the fp32 main parameter shard
  (4), the main gradient shard (``--megatron-fsdp-main-grads-dtype``: 4 bytes
  for fp32, 2 for ``auto``, the parameters' bf16), and Adam's two fp32
  moments over the shard's real elements (TE's FusedAdam, over the main
  parameters' views: 8 bytes; the last rank, which holds the padding, has
  fewer). The buckets outside the layers stay gathered once the first
  forward gathers them (``AllGatherPipeline.reset`` keeps them,
  ``preserve_non_fsdp_units``): 2 bytes per S, counted with the weights.
* **gathered layers** (``AllGatherPipeline.all_gather_params``): each hook
  gathers its bucket and prefetches the next layers' (forward order in the
  forward, backward order in the backward) until the prefetched S reach
  half the communication unit, ``max(10^9, 2 x a layer's parameters)``
  elements (``MegatronFSDP.__init__``: the floor is a ``max``); a layer's
  gathered bucket (bf16, 2 bytes per S) is freed after its forward and after
  its backward.
* **gradient buckets** (``GradReducePipeline``): a bucket's unsharded
  gradients (the gradient dtype) are made at its first weight gradient,
  reduce-scattered once all its parameters have theirs, and freed only when
  the reductions waiting exceed the communication unit, or at the end of
  the backward (``wait_for_previous_grad_reduce``). The bucket with the
  final norm or an untied output layer is made at the start of the backward;
  one with the word table is ready only after the embedding's backward.
* **the optimizer step** (``update_main_grads``): with 2-byte gradients each
  parameter's shard is copied to fp32 for the optimizer (4 bytes per real
  element), alive until the next step zeroes the gradients; after the step
  ``start_param_sync`` gathers the layers as the forward's first hook does.

The job's options (:class:`actmem.Job`): ``use_megatron_fsdp``;
``megatron_fsdp_main_grads_dtype`` (``"auto"``, the parameters' bf16,
``"fp32"`` or ``"bf16"``); ``ddp_bucket_size``, the elements at which the
parameters outside the layers are cut into buckets (None: one bucket, as
Megatron-LM resolves it without ``--overlap-grad-reduce``; with it,
``max(4 x 10^7, 10^6 x d*cp)``); ``suggested_communication_unit_size``,
the communication unit in elements (None: the default above).

Events (:mod:`actmem.run.moments.megatron_fsdp_timeline`): the timeline's
moments in the last layer with these buffers added, the optimizer step with its copies and
gathered layers, and in each pass the layer boundary that holds the most:
a layer's forward starting (the earlier layers' rows, the gathered window)
and a layer's backward at its gradients (its rows, the gathered window,
the gradient buckets alive). Not modelled: the all-gathers' and
reduce-scatters' NCCL buffers (outside PyTorch's allocator), and the
``--calculate-per-token-loss`` rescale that remakes the fp32 copies one
parameter at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ..job.parameters import parameter_count
from .megatron_fsdp_buckets import Bucket, model_buckets
from .placement import layer_parameters
from .states import expert_data_parallel

UNIT_FLOOR = 1_000_000_000
"""Elements: the communication unit's floor (``megatron_fsdp.py``,
``suggested_communication_unit_size = max(1_000_000_000, ...)``)."""


@dataclass(frozen=True)
class MegatronFSDP:
    """One GPU's Megatron-FSDP buckets and what they hold (module docstring).

    Attributes:
        buckets: :func:`actmem.run.model_states.megatron_fsdp_buckets.model_buckets`.
        layers: L. unit: the communication unit (elements): the gradient
            reductions' queue capacity, twice the prefetch.
        grad_bytes: bytes per gradient element (4: fp32, 2: bf16).
    """

    buckets: tuple[Bucket, ...]
    layers: int
    unit: int
    grad_bytes: int

    @cached_property
    def groups(self) -> tuple[int, ...]:
        """Each layer's S: its bucket and its experts' (elements)."""
        sizes = [0] * self.layers
        for b in self.buckets:
            if b.unit is not None:
                sizes[b.unit] += b.size
        return tuple(sizes)

    @property
    def outside(self) -> tuple[Bucket, ...]:
        """The buckets outside the layers."""
        return tuple(b for b in self.buckets if b.unit is None)

    @property
    def states(self) -> dict[str, int]:
        """``weights``, ``gradients``, ``optimizer`` bytes on one GPU (the
        first rank of its data-parallel group)."""
        shards = sum(b.shard for b in self.buckets)
        real = sum(b.first_rank_elements for b in self.buckets)
        return {"weights": 2 * shards + 2 * sum(b.size for b in self.outside),
                "gradients": self.grad_bytes * shards,
                "optimizer": 4 * shards + 8 * real}

    @property
    def optimizer_copies(self) -> int:
        """Bytes of the fp32 gradient copies the optimizer step reads (0
        with fp32 gradients)."""
        return 0 if self.grad_bytes == 4 else 4 * sum(b.first_rank_elements
                                                       for b in self.buckets)

    @property
    def embedding_reach(self) -> int:
        """The last layer the word embedding's hook gathers (-1: none), the
        other buckets outside the layers counting towards its prefetch."""
        after = sum(b.size for b in self.outside[1:])
        if after >= self.unit // 2:
            return -1
        return _reach(self.groups, 0, self.unit // 2 - after, -1)

    @property
    def step_gathered(self) -> int:
        """Bytes of layers ``start_param_sync`` gathers after the optimizer
        step (from the first parameter, as the embedding's hook)."""
        return 2 * sum(self.groups[:self.embedding_reach + 1])

    def forward_gathered(self, layer: int) -> int:
        """Bytes of layers gathered while ``layer``'s forward starts: from
        it to the farthest any hook so far has prefetched."""
        return self._gathered[0][layer]

    def backward_gathered(self, layer: int) -> int:
        """Bytes of layers gathered while ``layer``'s backward runs."""
        return self._gathered[1][layer]

    @cached_property
    def _gathered(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """:meth:`forward_gathered` and :meth:`backward_gathered` of every
        layer, computed once (a timeline asks for each layer in each pass)."""
        half, groups, last = self.unit // 2, self.groups, self.layers - 1
        forward = []
        for layer in range(self.layers):
            end = max(self.embedding_reach, _reach(groups, layer + 1, half, layer))
            forward.append(2 * sum(groups[layer:end + 1]))
        mirrored = groups[::-1]
        backward = [2 * sum(mirrored[last - layer:_reach(mirrored, last - layer + 1, half,
                                                          last - layer) + 1])
                    for layer in range(self.layers)]
        return tuple(forward), tuple(backward)

    @cached_property
    def gradient_buckets(self) -> tuple[tuple[int, ...], int]:
        """Gradient bytes alive at each layer's gradients (layer 0 first),
        and at the end of the backward (module docstring)."""
        queue, made, at = [], [b.size for b in self.outside if b.early], [0] * self.layers
        ready = [b.size for b in self.outside if b.early and not b.late]
        for size in ready:
            queue = self._push(queue, size)
        for layer in range(self.layers - 1, -1, -1):
            at[layer] = self._alive(made, ready, queue) + self.groups[layer]
            queue = self._push(queue, self.groups[layer])
            ready.append(self.groups[layer])
            made.append(self.groups[layer])
        made += [b.size for b in self.outside if not b.early]
        end = self._alive(made, ready, queue)
        return tuple(self.grad_bytes * n for n in at), self.grad_bytes * end

    def _push(self, queue: list[int], size: int) -> list[int]:
        """The reductions' queue after ``wait_for_previous_grad_reduce`` and
        a bucket's reduction joins it: the oldest freed while the queue
        exceeds the unit."""
        while sum(queue) > self.unit:
            queue = queue[1:]
        return queue + [size]

    @staticmethod
    def _alive(made: list[int], ready: list[int], queue: list[int]) -> int:
        """Gradient elements alive: made, less the reduced and freed ones
        (those ready that left the queue)."""
        return sum(made) - (sum(ready) - sum(queue))


def megatron_fsdp(setup) -> MegatronFSDP:
    """:class:`MegatronFSDP` of a one-stage job's
    :class:`actmem.run.step_setup.StepSetup`: layers shared by d*cp ranks,
    routed experts by the expert data-parallel ranks; the communication
    unit ``suggested_communication_unit_size``, by default twice a layer's
    parameters on this GPU, at least :data:`UNIT_FLOOR`."""
    j, model = setup.job, setup.whole
    moe = model.num_experts is not None
    etp = (j.etp or j.t) if moe else 1   # Megatron-LM's default etp is t
    count = parameter_count(model, vocab=model.padded_vocab(j.t))
    layers = sum(sum(layer_parameters(count, kind, j.t, j.ep, etp))
                 for kind in model.moe_pattern())
    buckets = model_buckets(model, j.t, j.d * j.cp, expert_data_parallel(
        model, j.t, j.d, j.ep, j.etp, j.cp) if moe else 1, j.ep, j.etp if moe else None,
        j.ddp_bucket_size, j.model.tied_embeddings and setup.fusion)
    unit = j.suggested_communication_unit_size or max(UNIT_FLOOR, layers // model.L * 2)
    return MegatronFSDP(buckets, model.L, unit,
                        4 if j.megatron_fsdp_main_grads_dtype == "fp32" else 2)


def _reach(sizes, start: int, budget: int, default: int) -> int:
    """The last index a prefetch from ``start`` reaches: it adds sizes
    until they add up to ``budget``; ``default`` when nothing is left."""
    total = 0
    for i in range(start, len(sizes)):
        total += sizes[i]
        if total >= budget:
            return i
    return len(sizes) - 1 if start < len(sizes) else default

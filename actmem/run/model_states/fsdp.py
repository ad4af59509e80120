"""FSDP2 / ZeRO-3 as it runs: PyTorch's ``fully_shard``, read from its code.

The wrap modelled is ``fully_shard`` on every layer, then on the whole model
(the order ``fully_shard``'s documentation asks for), under torchtitan's mixed
precision policy ``MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32)``. Each wrapped module is one parameter group
(``torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py``); the root
group holds what no layer holds: the word and position tables, the final
norm and an untied output layer, and, left to its default, is not resharded
after forward. Megatron-LM's ``--use-torch-fsdp2``
(``megatron/core/distributed/torch_fully_sharded_data_parallel.py``) and
torchtitan also wrap the embedding and the output layer as groups of their
own (and Megatron-LM passes ``reshard_after_forward`` to the root too); those
wraps are not modelled. With ``W = d*cp`` ranks, per rank:

* **sharded states** (``_fsdp_param.py``: ``FSDPParam._init_sharded_param``
  chunks every parameter along dim 0 into W pieces, padded to
  ``ceil(dim0/W)`` rows): the fp32 parameter shard (4 bytes per padded
  parameter / W), its fp32 gradient (``_fsdp_collectives.py``:
  ``foreach_reduce``'s reduce-scatter output, which becomes
  ``sharded_param.grad``; made in the first backward) and Adam's two fp32
  moments (8 bytes);
* **gathered parameters** (``FSDPParamGroup.unshard`` /
  ``wait_for_unshard``, ``foreach_all_gather``, ``foreach_all_gather_copy_out``):
  a group's all-gather output, bf16, W x its padded shard (:attr:`FSDP2.layer_gathered`),
  then its unsharded parameters copied out of it, as many bytes again. In
  forward the all-gather output is kept until the next group's copy-out
  (``comm_ctx.all_gather_state``), so the running layer holds both; the
  root's post-forward frees the last one. ``reshard`` after the forward
  frees a layer's parameters (``reshard_after_forward=True``); the root is
  never resharded after forward (``_fsdp_state.py``, ``_lazy_init``);
* **backward prefetch** (``FSDPParamGroup._backward_prefetch``): a group's
  pre-backward all-gathers the group that runs next (the layer before);
  its all-gather output waits until that layer's own pre-backward. So a
  layer's backward holds its unsharded parameters and the next layer's
  all-gather output; with ``reshard_after_forward=False`` nothing is
  gathered in backward and every layer not yet differentiated still holds
  its parameters;
* **gradients** (``post_backward``, ``foreach_reduce``): autograd makes the
  layer's unsharded gradients in bf16; after the layer's backward they are
  copied into a reduce-scatter input in fp32 (``reduce_dtype``; W x the
  padded shard, :attr:`FSDP2.reduce_scatter`), freed, and reduce-scattered
  into the fp32 shard. The input is kept until the next group's
  post-backward (``reduce_scatter_states``, at most
  ``reduce_scatter_max_input_buffers=1``), which frees it before making its
  own. The root's gradients (the output layer's, the final norm's) wait in
  bf16 until the root's post-backward at the end of the backward.

Events (:func:`fsdp_timeline`): the timeline's moments with these buffers
added (``"transient"``: gathered parameters, all-gather outputs,
reduce-scatter inputs; ``"gradients"``: unsharded bf16 gradients), and, in
each backward, for the layers L-1, L-2, 1 and 0, the moment its gradients
are all made (its parameters, the prefetched layer's all-gather output and
the previous reduce-scatter input alive) and its reduce-scatter's copy-in.
From layer L-2 down to layer 1 these moments change linearly (one layer's
activations fewer, one shard of gradients more, and without resharding one
layer's gathered parameters fewer), so the largest is at one of those
layers; the last layer has no earlier reduce-scatter input, the first no
prefetch. Activation gradients (``s*b*h`` tensors) are not
modelled, as in :mod:`actmem.run.moments.timeline`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..job.model import ModelConfig
from ..moments.timeline_events import CATEGORIES, Event, StageTimeline


def padded(dim0: int, numel: int, world: int) -> int:
    """Elements of one parameter of ``numel`` elements and ``dim0`` rows
    once padded to ``ceil(dim0/world)*world`` rows (``FSDPParam``'s
    ``padded_sharded_param_size`` times ``world``)."""
    return -(-dim0 // world) * world * (numel // dim0)


def layer_tensors(model: ModelConfig) -> list[tuple[int, int]]:
    """One dense layer's parameters as Megatron-LM's GPT layer has them at
    t = 1, as ``(dim0, elements)``: linear_qkv ((h + 2 g h/a) x h) and its
    bias, linear_proj (h x h) and its bias, linear_fc1 (f, SwiGLU 2f, x h),
    linear_fc2 (h x f) and their biases, and two norms (weight, LayerNorm's
    bias). Their sum is :func:`actmem.parameter_count`'s layer."""
    c, h = model.layer(moe=False), model.h
    qkv, f_in = h + 2 * c.g * h // c.a, (2 if c.activation == "swiglu" else 1) * c.f
    norms = [(h, h)] * (4 if model.norm == "layernorm" else 2)
    weights = [(qkv, qkv * h), (h, h * h), (f_in, f_in * h), (h, c.f * h)]
    biases = [(n, n) for n in (qkv, h, f_in, h)] if model.bias else []
    return weights + biases + norms


def root_tensors(model: ModelConfig) -> list[tuple[int, int]]:
    """The root group's parameters (what no layer holds): the word table
    (Megatron-LM's padded vocabulary x h), learned positions, the final norm
    and an untied output layer, as ``(dim0, elements)``."""
    h, vocab = model.h, model.padded_vocab(1)
    tensors = [(vocab, vocab * h)] + [(h, h)] * (2 if model.norm == "layernorm" else 1)
    if model.positions == "learned":
        tensors.append((model.max_positions or model.s, (model.max_positions or model.s) * h))
    return tensors + ([] if model.tied_embeddings else [(vocab, vocab * h)])


@dataclass(frozen=True)
class FSDP2:
    """One rank's FSDP2 sizes, in elements and bytes.

    Attributes:
        world: W, ranks sharing each parameter (d*cp).
        layers: L. layer, root: a layer's and the root group's padded
            elements (all ranks). layer_unpadded, root_unpadded: a layer's and
            the root's parameters.
        root_gradients: elements of the root's gradients made by the output
            layer's backward (the output weight, the final norm).
        after_attention: elements of a layer's parameters after its core
            attention (projection, second norm, MLP): their gradients are
            made when the softmax gradient is.
        reshard_after_forward: as ``fully_shard``'s.
    """

    world: int
    layers: int
    layer: int
    root: int
    layer_unpadded: int
    root_unpadded: int
    root_gradients: int
    after_attention: int
    reshard_after_forward: bool = True

    @property
    def shard(self) -> int:
        """Parameter elements on one rank (padded, /W)."""
        return (self.root + self.layers * self.layer) // self.world

    @property
    def states(self) -> dict[str, int]:
        """``weights``, ``gradients``, ``optimizer`` bytes on one rank: fp32
        shards of the parameters, their gradients and Adam's two moments."""
        return {"weights": 4 * self.shard, "gradients": 4 * self.shard,
                "optimizer": 8 * self.shard}

    @property
    def layer_gathered(self) -> int:
        """Bytes of one layer's unsharded bf16 parameters, and of its
        all-gather output (the same size)."""
        return 2 * self.layer

    @property
    def root_gathered(self) -> int:
        """Bytes of the root group's unsharded bf16 parameters."""
        return 2 * self.root

    @property
    def reduce_scatter(self) -> int:
        """Bytes of one layer's fp32 reduce-scatter input."""
        return 4 * self.layer


def fsdp2(model: ModelConfig, world: int, reshard_after_forward: bool = True) -> FSDP2:
    """:class:`FSDP2` sizes of ``model`` sharded over ``world`` ranks."""
    layer, root = layer_tensors(model), root_tensors(model)
    norm = (2 if model.norm == "layernorm" else 1) * model.h   # one norm's elements
    out = root[0][1] if model.tied_embeddings else root[-1][1]
    attention = layer[0][1] + (layer[4][1] if model.bias else 0) + norm   # qkv, norm1
    return FSDP2(world=world, layers=model.L,
                 layer=sum(padded(r, n, world) for r, n in layer),
                 root=sum(padded(r, n, world) for r, n in root),
                 layer_unpadded=sum(n for _, n in layer),
                 root_unpadded=sum(n for _, n in root), root_gradients=out + norm,
                 after_attention=sum(n for _, n in layer) - attention,
                 reshard_after_forward=reshard_after_forward)


def fsdp_timeline(timeline: StageTimeline, f: FSDP2, kept: int, embedding: int,
                  group: int = 1, full: bool = False) -> StageTimeline:
    """``timeline`` (p = 1, made with :attr:`FSDP2.states` and gradients made
    in backward) with FSDP2's buffers at each event, and each backward's
    layer moments (module docstring) before its end.

    Args:
        kept: one layer's bytes held by a pass (``LayerMoments.kept``).
        embedding: the pass's embedding activations. group, full: full
            recomputation's k (the pass holds one checkpoint, ``kept``, per
            group).
    """
    events, first = [], True
    for event in timeline.events:
        if event.label.startswith("after the backward of "):
            name = event.label.removeprefix("after the backward of ")
            events += _layer_events(event, name, f, kept, embedding, group, full, first)
            first = False
        events.append(_plus(event, **_extra(event.label, f)))
    return replace(timeline, events=tuple(events))


def _plus(event: Event, **extra: int) -> Event:
    return replace(event, bytes=tuple(b + extra.get(c, 0)
                                      for c, b in zip(CATEGORIES, event.bytes)))


def _extra(label: str, f: FSDP2) -> dict[str, int]:
    """FSDP2's bytes at a timeline event (module docstring)."""
    gathered, every = f.layer_gathered, f.layers * f.layer_gathered
    held = 0 if f.reshard_after_forward else every   # layers kept gathered after forward
    if label.startswith("forward of"):   # inside the last layer: its parameters, its output
        return {"transient": f.root_gathered + (held or gathered) + gathered}
    if label.startswith(("loss of", "end of the forward", "after the forward", "loss backward")):
        return {"transient": f.root_gathered + held}
    if label.startswith("backward of"):   # inside the last layer's backward
        prefetch = gathered * (f.layers > 1) if f.reshard_after_forward else 0
        made = 2 * f.after_attention if "MLP" not in label else 0   # fc2's is in the MLP's
        return {"transient": f.root_gathered + (held or gathered) + prefetch,
                "gradients": 2 * f.root_gradients + made}
    return {}


def _layer_events(after: Event, name: str, f: FSDP2, kept: int, embedding: int,
                  group: int, full: bool, first: bool) -> list[Event]:
    """The moments of layer l = L-1, L-2, 1, 0's backward (module
    docstring): all its gradients made, and its reduce-scatter's copy-in."""
    out, raf = [], f.reshard_after_forward
    for layer in sorted({f.layers - 1, max(f.layers - 2, 0), min(1, f.layers - 1), 0},
                        reverse=True):
        held = (-(-layer // group) if full else layer) * kept
        sharded = 4 * (f.layers - 1 - layer) * f.layer // f.world if first else 0
        prefetch = f.layer_gathered * (layer > 0) if raf else 0
        own = f.layer_gathered if raf else (layer + 1) * f.layer_gathered
        previous = f.reduce_scatter * (layer < f.layers - 1)
        base = dict(zip(CATEGORIES, after.bytes))
        base.update(activations=embedding + held, logits_loss=0,
                    gradients=base["gradients"] * (not first) + sharded
                    + 2 * (f.root_gradients + f.layer_unpadded))
        for label, transient in (("gradients made", own + prefetch + previous),
                                 ("reduce-scatter copy-in",
                                  own - f.layer_gathered + prefetch + f.reduce_scatter)):
            base["transient"] = f.root_gathered + transient
            out.append(Event(f"backward of {name}: {_position(layer, f.layers)}'s {label}",
                             after.op, "during", tuple(base[c] for c in CATEGORIES)))
    return out + _root_events(after, name, f, first)


def _position(layer: int, layers: int) -> str:
    """Layer ``layer`` of ``layers`` in words (one label per position, so
    that each has a translation)."""
    if layer == layers - 1:
        return "the last layer"
    return {0: "the first layer", 1: "the second layer"}.get(layer, "the second-to-last layer")


def _root_events(after: Event, name: str, f: FSDP2, first: bool) -> list[Event]:
    """The root's post-backward, last in the backward: its bf16 gradients
    (the tables', the final norm's, an untied output layer's) beside its
    parameters and layer 0's reduce-scatter input, then its own
    reduce-scatter input in their place."""
    base = dict(zip(CATEGORIES, after.bytes))
    layers = 4 * f.layers * f.layer // f.world if first else base["gradients"]
    base.update(activations=0, logits_loss=0, gradients=layers + 2 * f.root_unpadded)
    out = []
    for label, transient in (("gradients made", f.root_gathered + f.reduce_scatter),
                             ("reduce-scatter copy-in", 4 * f.root)):
        base["transient"] = transient
        out.append(Event(f"backward of {name}: the root's {label}", after.op, "during",
                         tuple(base[c] for c in CATEGORIES)))
    return out

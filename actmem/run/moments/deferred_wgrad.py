"""Megatron-LM's ``--defer-embedding-wgrad-compute``: the output layer's weight
gradient waits for the pipeline flush, and what it reads waits with it.

On the last pipeline stage the output layer (``ColumnParallelLinear``,
``megatron/core/tensor_parallel/layers.py``) appends its input to
``embedding_activation_buffer`` in its forward, and its backward
(``LinearWithGradAccumulationAndAsyncCommunication.backward``) appends the
logits' gradient to ``grad_output_buffer`` instead of computing the weight
gradient, for the first ``--wgrad-deferral-limit`` micro-batches of the step
(``len(buffer) < limit``; 0, the default: every one). After the last
backward, ``finish_embedding_wgrad_compute``
(``megatron/core/pipeline_parallel/schedules.py``) runs
``drain_embedding_wgrad_compute`` (``megatron/core/utils.py``), which pops
each pair and adds its weight gradient into the fp32 ``main_grad``: so from
its backward to the flush a deferred micro-batch keeps its output layer's
input (bf16, the sequence-parallel shard: ``s*b*h/t`` elements, else
``s*b*h``) and its logits' gradient (``s*b*V/t`` elements, the logits'
dtype). Under sequence parallelism the drain gathers the inputs into two
buffers of Megatron-LM's global memory buffer (``"mpu_0"``, ``"mpu_1"``,
``s*b*h`` bf16 each), which stay allocated from the first flush on.
Megatron-LM requires pipeline parallelism and gradient accumulation fusion
(``model_parallel_config.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .timeline_events import CATEGORIES, Event, StageTimeline


@dataclass(frozen=True)
class DeferredWgrad:
    """What the deferral keeps on the last stage (module docstring).

    Attributes:
        microbatches: how many micro-batches are deferred.
        activations: bytes of one deferred micro-batch's output layer input.
        logits: bytes of its logits' gradient.
        gathered: bytes of the drain's all-gather buffers (sequence
            parallelism), a workspace from the first flush on.
    """

    microbatches: int
    activations: int
    logits: int
    gathered: int


def deferred_wgrad(limit: int, m: int, output_input: int, logits: int, logits_dtype: int,
                   gathered_input: int) -> DeferredWgrad:
    """The deferral of a step of ``m`` micro-batches with
    ``--wgrad-deferral-limit`` ``limit``: ``output_input``, bytes of the
    output layer's input a pass keeps; ``logits``, elements of the logits on
    this GPU; ``gathered_input``, bytes of that input gathered over the
    tensor-parallel group under sequence parallelism (0 without)."""
    return DeferredWgrad(min(limit, m) if limit else m, output_input, logits_dtype * logits,
                         2 * gathered_input)


def deferred_timeline(timeline: StageTimeline, deferred: DeferredWgrad,
                      last_chunk: int) -> StageTimeline:
    """``timeline`` of the last stage with the deferred pairs: each deferred
    micro-batch's from the end of its backward through ``last_chunk`` (the
    loss's) to the flush, before the optimizer step, and the drain's
    buffers throughout (the step repeats: they stay from the previous flush)."""
    held, events = 0, []
    for event in timeline.events:
        if not event.op:   # before the step, and the optimizer step: after the flush
            held = 0
        elif event.moment == "after" and _deferred(event.op, last_chunk, deferred.microbatches):
            held += 1
        extra = {"activations": held * deferred.activations, "logits_loss": held * deferred.logits,
                 "workspace": deferred.gathered}
        events.append(Event._of(event.label, event.op, event.moment, tuple(
            b + extra.get(c, 0) for c, b in zip(CATEGORIES, event.bytes))))
    return replace(timeline, events=tuple(events))


def _deferred(op: str, last_chunk: int, microbatches: int) -> bool:
    """Whether ``op`` (as printed: ``"B3"``, ``"B3/1"``) is the backward of a
    deferred micro-batch through the loss's chunk."""
    if not op.startswith("B"):
        return False
    microbatch, _, chunk = op[1:].partition("/")
    return int(chunk or 0) == last_chunk and int(microbatch) < microbatches

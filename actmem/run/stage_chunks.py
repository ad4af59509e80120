"""A stage's model chunks as :func:`actmem.run.peak.stage_memory` reads them:
what a pass through each chunk keeps besides its layers (:class:`Pass`), each
chunk's layers' moments, first layer first, the bytes one pass keeps and the
recomputation working set, and what a split backward leaves pending."""

from __future__ import annotations

from .moments.moe_timeline import stack_parts, stage_stacks
from .moments.precision import moment_parts
from .moments.timeline import Pass
from .step_setup import StepSetup


def chunk_passes(setup: StepSetup, i: int) -> list[Pass]:
    """What a pass through each chunk of stage ``i`` keeps besides its
    layers: the first chunk of the model (stage 0, chunk 0) the embedding's,
    the last (where the loss is) the output layer's and the logits."""
    first, last = setup.first, setup.last
    passes = []
    for c in range(setup.job.v):
        is_first, is_last = (i, c) == (0, 0), (i, c) == setup.plan.last_chunk()
        passes.append(Pass(embedding=sum(first.values()) if is_first else 0,
                           output=sum(last.values()) - last["logits"] if is_last else 0,
                           logits_loss=last["logits"] if is_last else 0,
                           loads_data=is_first or is_last, last=is_last))
    return passes


def chunk_stacks(setup: StepSetup, i: int, passes: list[Pass]) -> list[tuple] | None:
    """Per chunk of stage ``i``, each layer's moments, first layer first,
    where layers differ: an MoE model's kinds
    (:func:`actmem.run.moments.moe_timeline.stage_stacks`), and the layers
    the last chunk runs after the decoder's (``setup.mtp_layers``); None:
    every layer is ``setup.moments``."""
    stacks = setup.kinds and stage_stacks(setup.model.moe_pattern(), setup.split, i,
                                          setup.kinds, setup.plan.v_shaped)
    if not setup.mtp_layers:
        return stacks
    return [stack + setup.mtp_layers * one.last
            for stack, one in zip(every_stack(setup, i, stacks), passes)]


def chunk_layers(setup: StepSetup, i: int, stacks) -> list[int]:
    """Layers each chunk of stage ``i`` runs (:func:`chunk_stacks`)."""
    return [len(stack) for stack in stacks] if stacks else list(setup.split[i])


def chunk_parts(setup: StepSetup, i: int, stacks) -> list[tuple[int, int]]:
    """Per chunk, (bytes one pass keeps for its layers, recomputation working
    set)."""
    j = setup.job
    if stacks:
        return [stack_parts(stack, j.recompute, j.recompute_num_layers) for stack in stacks]
    return [moment_parts(setup.moments, n) for n in setup.split[i]]


def chunk_pending(setup: StepSetup, i: int, stacks) -> list[dict[str, int]] | None:
    """Per chunk, what a pass keeps from its I to its W (None: no split
    backward)."""
    if setup.moments.weight_rows is None:
        return None
    return [{"layer_activations": sum(m.weight_rows for m in stack)}
            for stack in every_stack(setup, i, stacks)]


def every_stack(setup: StepSetup, i: int, stacks) -> list[tuple]:
    """:func:`chunk_stacks`' stacks, and where it gives None (every layer
    alike) each chunk's ``setup.moments`` once per layer."""
    return stacks or [(setup.moments,) * n for n in setup.split[i]]

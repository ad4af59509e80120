"""The features of a training job, each through one interface.

:func:`actmem.training_memory` composes the step (:mod:`actmem.run.peak`)
and has no case for any feature: each :class:`Feature` says what it
changes, in the order of the step:

* :meth:`Feature.setup`: the layers' moments every stage shares
  (:class:`actmem.run.step_setup.StepSetup`);
* :meth:`Feature.states`: a stage's weights, gradients and optimizer states;
* :meth:`Feature.keeps_tied_gradient`: whether the tied output weight's
  gradient waits for the embedding's (:func:`actmem.run.moments.timeline.stage_timeline`);
* :meth:`Feature.timeline`: the events of a stage's step;
* :meth:`Feature.stage`: the stage's parts.

Each hook returns what it is given when the job does not use the feature.
What a feature changes in one layer's rows (FP8, LoRA, MoE, named-module
recomputation, multi-latent attention) is the layer's
(:meth:`actmem.ModelConfig.layer` and :mod:`actmem.layer`), and reaches the
step through the layers' moments.
"""

from __future__ import annotations

from dataclasses import replace

from ..layer.context_parallel import with_a2a_output
from .moments.cp_timeline import with_exchange
from .job.gpus import find_gpu
from .model_states.fp8_states import fp8_stage_bytes, fp8_transpose
from .model_states.fsdp import fsdp2, fsdp_timeline
from .model_states.megatron_fsdp import megatron_fsdp
from .moments.megatron_fsdp_timeline import megatron_fsdp_timeline
from .moments.deferred_wgrad import deferred_timeline, deferred_wgrad
from .moments.mtp import with_mtp
from .moments.offload import cpu_offload, offloaded_timeline
from .model_states.muon import muon_states
from .model_states.states import expert_data_parallel, sixteen_bit_gradients
from .moments.precision import (SIXTEEN_BITS, activation_bytes, full_precision_states, layer_rows,
                                sixteen_bit_buffer)
from .schedule.split_backward import layer_weight_rows
from .stage_chunks import chunk_stacks, every_stack


class Feature:
    """What one feature changes (module docstring); by default nothing."""

    def setup(self, setup):
        return setup

    def states(self, setup, states):
        return states

    def keeps_tied_gradient(self, setup) -> bool:
        return True

    def timeline(self, setup, timeline, passes):
        return timeline

    def stage(self, setup, stage):
        return stage


class SplitBackward(Feature):
    """Zero-bubble schedules (:mod:`actmem.run.schedule.split_backward`): from its
    input-gradient step to its weight-gradient step a pass keeps what the
    weight gradients read (a dense model's layers; an MoE model's kinds
    carry theirs, :func:`actmem.run.moments.moe_timeline.kind_moments`)."""

    def setup(self, setup):
        j, model = setup.job, setup.model
        if not setup.plan.splits_backward or setup.kinds:
            return setup
        rows = layer_rows(model, j.t, j.sequence_parallel, "none", j.precision,
                          j.fused_projections, j.autocast_device, setup.layer_options)
        return replace(setup, moments=replace(setup.moments, weight_rows=layer_weight_rows(
            model, j.t, j.sequence_parallel, rows, setup.layer_options)))


class ContextParallel(Feature):
    """Context parallelism (:mod:`actmem.layer.context_parallel`,
    :mod:`actmem.run.moments.cp_timeline`): the a2a output row, and each layer's
    key/value exchange buffers in its attention; nothing at cp = 1."""

    def setup(self, setup):
        j = setup.job
        cp = (j.t, j.sequence_parallel, j.recompute, j.cp, j.cp_comm_type,
              j.hierarchical_context_parallel_sizes, setup.layer_options)
        moments = with_a2a_output(setup.moments, setup.whole, *cp)
        moments, kinds = with_exchange(moments, setup.kinds, setup.whole, *cp)
        return replace(setup, moments=moments, kinds=kinds)


class MultiTokenPrediction(Feature):
    """Megatron-LM's multi-token prediction (:mod:`actmem.run.moments.mtp`):
    D modules after the last chunk's layers, their rows and D more losses
    on the last stage (their parameters: :mod:`actmem.run.model_states.placement`)."""

    def setup(self, setup):
        return with_mtp(setup)


class FP8States(Feature):
    """TE's FP8 states as the recipe, FP8 parameters and the GPU make them
    (:func:`actmem.run.model_states.fp8_states.fp8_stage_bytes`' options): model_states
    counts delayed scaling with Hopper's transposed copies."""

    def states(self, setup, states):
        j = setup.job
        if not setup.fp8:
            return states
        where = dict(t=j.t, p=j.p, stage_layers=tuple(map(sum, setup.split)), ep=j.ep,
                     etp=j.etp, moe_layers=setup.moe_layers())
        counted = fp8_stage_bytes(setup.whole, setup.fp8, **where)
        wanted = fp8_stage_bytes(setup.whole, setup.fp8, **where, recipe=j.fp8_recipe,
                                 param_gather=j.fp8_param_gather,
                                 transpose=fp8_transpose(find_gpu(j.gpu_memory)))
        change = wanted[states.stage] - counted[states.stage]
        return replace(states, weights=states.weights + change)


class FullPrecision(Feature):
    """fp32 and autocast (:mod:`actmem.run.moments.precision`): fp32 parameters,
    gradients and Adam states."""

    def states(self, setup, states):
        j = setup.job
        if j.precision in SIXTEEN_BITS:
            return states
        return replace(states, **full_precision_states(
            states.parameters, j.d * j.cp, j.zero_stage, j.distributed_optimizer))


class GradientDtype(Feature):
    """Megatron-LM's 16-bit gradient buffer (``--fp16``, ``--grad-reduce-in-bf16``;
    :func:`actmem.run.model_states.states.sixteen_bit_gradients`): 2 bytes
    per parameter, and the optimizer step's fp32 copies."""

    def states(self, setup, states):
        j = setup.job
        if j.accounting != "megatron" or not sixteen_bit_buffer(
                j.precision, j.accumulate_allreduce_grads_in_fp32):
            return states
        n = j.num_distributed_optimizer_instances
        e_d = (expert_data_parallel(setup.model, j.t, j.d, j.ep, j.etp, j.cp)
               if states.expert_parameters else j.d * j.cp)
        return sixteen_bit_gradients(states, j.d * j.cp // n, e_d // n, j.distributed_optimizer)


class Muon(Feature):
    """Megatron-LM's Muon optimizer (:mod:`actmem.run.model_states.muon`):
    8 bytes per matrix parameter, Adam's 12 for the rest, and the
    Newton-Schulz temporaries of its step."""

    def states(self, setup, states):
        j, model, i = setup.job, setup.whole, states.stage
        if j.optimizer != "muon":
            return states
        moe = setup.moe_layers_on(i)
        return muon_states(states, model, sum(setup.split[i]) - moe, moe, j.ep,
                           i == 0 and model.positions == "learned")


class LoRA(Feature):
    """Low-rank adapters (:mod:`actmem.layer.lora`): the embedding is
    frozen, so a tied output weight makes no gradient to wait."""

    def keeps_tied_gradient(self, setup) -> bool:
        return setup.model.lora_rank is None


class FSDP2(Feature):
    """PyTorch's ``fully_shard`` (:mod:`actmem.run.model_states.fsdp`): fp32 shards as the
    states, the gathered parameters and reduce-scatter buffers on the
    timeline; the tied weight's gradient is the root's."""

    def _sharded(self, setup):
        j = setup.job
        return j.use_torch_fsdp2 and fsdp2(setup.whole, j.d * j.cp, j.reshard_after_forward)

    def states(self, setup, states):
        sharded = self._sharded(setup)
        return replace(states, **sharded.states) if sharded else states

    def keeps_tied_gradient(self, setup) -> bool:
        return not setup.job.use_torch_fsdp2

    def timeline(self, setup, timeline, passes):
        sharded = self._sharded(setup)
        if not sharded:
            return timeline
        return fsdp_timeline(timeline, sharded, setup.moments.kept, passes[0].embedding,
                             setup.job.recompute_num_layers, setup.job.recompute == "full")


class MegatronFSDP(Feature):
    """Megatron-LM's ``--use-megatron-fsdp`` (:mod:`actmem.run.model_states.megatron_fsdp`):
    bucket shards as the states, the gathered layers, the gradient buckets
    and the optimizer's fp32 copies on the timeline."""

    def states(self, setup, states):
        return replace(states, **megatron_fsdp(setup).states) if setup.job.use_megatron_fsdp \
            else states

    def timeline(self, setup, timeline, passes):
        if not setup.job.use_megatron_fsdp:
            return timeline
        stack, = every_stack(setup, 0, chunk_stacks(setup, 0, passes))   # one stage, one chunk
        return megatron_fsdp_timeline(timeline, megatron_fsdp(setup), stack,
                                      passes[0].embedding, waiting_tied_gradient(setup))


class DeferredEmbeddingWgrad(Feature):
    """Megatron-LM's ``--defer-embedding-wgrad-compute``
    (:mod:`actmem.run.moments.deferred_wgrad`): on the last stage the deferred
    micro-batches' output layer inputs and logits' gradients wait for the
    flush."""

    def timeline(self, setup, timeline, passes):
        j = setup.job
        last = [c for c, one in enumerate(passes) if one.last]
        if not j.defer_embedding_wgrad_compute or not last:
            return timeline
        shape = setup.model.layer(j.t, moe=False)
        logits = shape.s * shape.b * (setup.model.padded_vocab(j.t) // j.t)
        gathered = 2 * shape.s * shape.b * shape.h if j.sequence_parallel else 0
        deferred = deferred_wgrad(j.wgrad_deferral_limit, j.m, setup.last["output layer input"],
                                  logits, activation_bytes(j.precision), gathered)
        return deferred_timeline(timeline, deferred, last[0])


class Offload(Feature):
    """Activation offloading (:mod:`actmem.run.moments.offload`): n layers'
    offloadable rows on the host while a pass is held."""

    def setup(self, setup):
        j = setup.job
        if not j.cpu_offloading_num_layers:
            return setup
        return replace(setup, offload=cpu_offload(setup.model, j.t, j.cpu_offloading_num_layers,
                                                  j.sequence_parallel, setup.layer_options))

    def stage(self, setup, stage):
        offload = setup.offload
        if offload is None:
            return stage
        return replace(stage, timeline=offloaded_timeline(stage.timeline, offload.saving),
                       layer_activations=stage.layer_activations - offload.saving,
                       host_memory=offload.host)


def waiting_tied_gradient(setup) -> int:
    """Bytes of the output layer's weight gradient that wait for the
    embedding's on this GPU: one weight for both (tied embeddings) on one
    stage, gradients not fused into the buffer, and no feature that says
    otherwise (:meth:`Feature.keeps_tied_gradient`); else 0."""
    waits = (setup.model.tied_embeddings and setup.job.p == 1 and not setup.fusion
             and all(feature.keeps_tied_gradient(setup) for feature in FEATURES))
    return setup.tied * waits


FEATURES = (SplitBackward(), ContextParallel(), MultiTokenPrediction(), FP8States(),
            FullPrecision(), GradientDtype(), Muon(), LoRA(), FSDP2(), MegatronFSDP(),
            DeferredEmbeddingWgrad(), Offload())
"""The features, in the order they apply."""

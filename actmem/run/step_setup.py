"""What every pipeline stage of a job shares, found once per job.

:func:`actmem.training_memory` reads like the step: validate the job
(:class:`actmem.Job`), split the layers (:func:`actmem.split_layers`),
simulate the schedule (:func:`actmem.simulate_schedule`), then per stage the
states, the moments and the timeline, then the peak (:mod:`actmem.run.peak`).
This module is the part before the stages: the rank's model (``s/cp`` under
context parallelism), the GPU and its workspaces, what a pass keeps besides
its layers (the embedding's, the output layer's and the loss's rows,
:mod:`actmem.run.moments.pass_parts`, :func:`actmem.run.moments.loss.loss_bytes`), and
each kind of layer's moments (:class:`actmem.run.moments.timeline.LayerMoments`) with
what the job's features change in them (:mod:`actmem.run.features`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..layer.context_parallel import rank_model
from ..layer.fp8 import fp8_format
from ..layer.moe_copies import hot_rank_load
from ..layer.recompute_modules import named_modules
from .moments.framework import gradient_fusion, megatron_global_buffer, workspace_bytes
from .moments.loss import fused_loss_chunk, loss_bytes
from .job.gpus import find_gpu, gpu_capacity
from .job.job import Job
from ..memo import kept_by_repr
from .job.model import ModelConfig
from .moments.moe_dispatch import gathered_tokens_buffer
from .moments.moe_timeline import dense_twin, kind_moments, stage_moe_layers
from .moments.pass_parts import embedding_activations, output_activations
from .moments.precision import SIXTEEN_BITS, activation_bytes, precision_moments, precision_outputs
from .schedule.schedules import PipelineSchedule, simulate_schedule
from .schedule.stage_split import split_layers
from .moments.timeline import LayerMoments
from .job.training_checks import UNEVEN, reserve_bytes


@dataclass(frozen=True)
class StepSetup:
    """A job's shared values (bytes unless said).

    Attributes:
        job: the :class:`actmem.Job`. model: the model one rank runs
            (``s/cp`` tokens); whole: the job's model.
        fusion: weight gradients fused into the gradient buffer.
        fp8: the FP8 format, or None.
        plan: the schedule's operations. split: layers per stage and chunk.
        capacity: the GPU's bytes, or None. workspace: persistent workspaces.
        reserve: bytes set aside on every GPU, or None for the default
            estimate, made per stage (:func:`actmem.run.reserve.default_reserve`).
        layer_options: the job's other options of every layer
            (:meth:`actmem.ModelConfig.layer`).
        first, last: what the first and the last chunk of the model keep
            per pass besides the layers, by row.
        losses: :func:`actmem.run.moments.loss.loss_bytes` of the job.
        tied: the output layer's weight gradient.
        kinds: each kind of layer's moments of an MoE model (0 dense, 1
            MoE), or None; moments: the moments of the layers (an MoE
            model's MoE layers').
        mask: one micro-batch's attention mask from the data loader.
        offload: activation offloading's bytes
            (:class:`actmem.run.moments.offload.Offload`), or None.
        mtp_layers: the moments of the layers the last chunk runs after
            the decoder's (multi-token prediction, :mod:`actmem.run.moments.mtp`).
    """

    job: Job
    model: ModelConfig
    whole: ModelConfig
    fusion: bool
    fp8: str | None
    plan: PipelineSchedule
    split: tuple
    capacity: int | None
    workspace: int
    reserve: int | None
    layer_options: dict
    first: dict
    last: dict
    losses: dict
    tied: int
    kinds: dict | None
    moments: LayerMoments
    mask: int
    offload: object = None
    mtp_layers: tuple = ()

    def moe_layers(self) -> tuple[int, ...] | None:
        """How many MoE layers each stage holds
        (:func:`actmem.run.moments.moe_timeline.stage_moe_layers`), None
        for a dense model."""
        if not self.kinds:
            return None
        return stage_moe_layers(self.whole.moe_pattern(), self.split, self.plan.v_shaped)

    def moe_layers_on(self, i: int) -> int:
        """How many MoE layers stage ``i`` holds (0 for a dense model)."""
        return self.moe_layers()[i] if self.kinds else 0


@kept_by_repr(16)   # a job's checks find it, then training_memory reads it
def step_setup(job: Job) -> StepSetup:
    """The shared values of ``job`` (a :class:`actmem.Job` whose options
    are checked, :func:`actmem.run.job.training_checks.check_job`), the layers'
    moments as each feature changes them (:data:`actmem.run.features.FEATURES`).

    Raises:
        ValueError: what only the layers' own checks find
            (:meth:`actmem.ModelConfig.layer`, the loss's).
    """
    from .features import FEATURES
    j = job
    model = rank_model(j.model, j.t, j.sequence_parallel, j.recompute, j.cp, j.cp_comm_type,
                       j.hierarchical_context_parallel_sizes, j.precision)
    capacity = None if j.gpu_memory is None else gpu_capacity(j.gpu_memory)
    gpu = find_gpu(j.gpu_memory)
    workspace = sum(workspace_bytes(gpu.compute_capability if gpu else (9, 0),
                                    j.cublas_workspace_config, j.transformer_engine,
                                    j.moe_grouped_gemm, j.tp_comm_overlap).values())
    local = 0
    if j.global_memory_buffer:
        heads = 0 if model.flash_attention else model.a // j.t
        local = megatron_global_buffer(model.s, model.b, model.h, heads,
                                       j.sequence_parallel, activation_bytes(j.precision))
    workspace += max(local, gathered_tokens_buffer(model, j.t, j.ep, j.etp))  # one buffer
    options = layer_options(j)
    fusion = gradient_fusion(j.gradient_accumulation_fusion, j.gradient_buffer)
    plan = simulate_schedule(j.schedule, j.p, j.m, j.v, j.order,
                             j.microbatch_group_size_per_vp_stage)
    first, last, losses, tied = _outside_layers(j, model, options)
    kinds, moments = _layer_moments(j, model, plan, fusion, options)
    setup = StepSetup(
        job=j, model=model, whole=j.model, fusion=fusion, fp8=fp8_format(j.fp8), plan=plan,
        split=split_layers(model.L, j.p, j.v, **{name: getattr(j, name) for name in UNEVEN}),
        capacity=capacity, workspace=workspace, reserve=reserve_bytes(j.reserve, capacity),
        layer_options=options, first=first, last=last, losses=losses, tied=tied, kinds=kinds,
        moments=moments, mask=_mask(j, model))
    for feature in FEATURES:
        setup = feature.setup(setup)
    return setup


def layer_options(job: Job) -> dict:
    """The job's options of every layer besides t, sequence parallelism and
    recomputation (:meth:`actmem.ModelConfig.layer`): named-module
    recomputation, FP8."""
    options, modules = {}, named_modules(job.recompute_modules)   # the default: None's rows
    if modules is not None:
        options["recompute_modules"] = modules
    if job.fp8:
        options["fp8"] = fp8_format(job.fp8)
        options["fp8_recipe"] = job.fp8_recipe
    return options


def _outside_layers(job: Job, model: ModelConfig, options: dict):
    """(what the first chunk keeps per pass, what the last keeps, the
    loss's bytes, the output weight's gradient): the embedding's rows, the
    final norm's and the output layer's inputs and the logits as the loss
    keeps them (:func:`actmem.run.moments.loss.loss_bytes`)."""
    base = dense_twin(model)  # s, b, h, the vocabulary: the same for every kind of layer
    first = embedding_activations(base, job.t, job.sequence_parallel, options)
    last = precision_outputs(output_activations(base, job.t, job.sequence_parallel,
                                                job.logits_bytes, options), job.precision)
    shape = model.layer(job.t, moe=False)  # s, b, h
    tokens, vocab = shape.s * shape.b, model.padded_vocab(shape.t) // shape.t  # plain ints
    weight = (2 + 2 * (job.precision not in SIXTEEN_BITS)) * vocab * shape.h   # the output weight's
    chunk, gradients = None, 0  # what only loss="fused" takes (loss_bytes)
    if job.loss == "fused":
        chunk = (fused_loss_chunk(tokens, vocab, shape.h) if job.loss_chunk_tokens is None
                 else job.loss_chunk_tokens)
        gradients = last["output layer input"] + weight
    losses = loss_bytes(job.loss, tokens * vocab, tokens, activation_bytes(job.precision),
                        job.logits_bytes, chunk, gradients, job.cross_entropy_loss_fusion)
    last["logits"] = losses["saved"]
    return first, last, losses, weight


def _layer_moments(job: Job, model: ModelConfig, plan: PipelineSchedule, fusion: bool,
                   options: dict):
    """(each kind of layer's moments of an MoE model or None, the layers'
    moments) before the features change them: an MoE model's kinds
    (:func:`actmem.run.moments.moe_timeline.kind_moments`), a dense model's in its
    precision (:func:`actmem.run.moments.precision.precision_moments`; LoRA leaves
    fc2 frozen, so its weight gradient is not made)."""
    if model.num_experts is not None:
        load = hot_rank_load(job.moe_hot_expert, model.num_experts, model.moe_router_topk,
                             job.ep)
        kinds = kind_moments(model, job.t, job.sequence_parallel, job.recompute,
                             job.recompute_num_layers, ep=job.ep, etp=job.etp,
                             weight_gradients=not fusion, split_backward=plan.splits_backward,
                             layer_options=options, rank_load=load)
        return kinds, kinds[max(kinds)]
    return None, precision_moments(
        model, job.t, job.sequence_parallel, job.recompute, job.recompute_num_layers,
        job.precision, job.fused_projections, job.autocast_device,
        not fusion and model.lora_rank is None, options)


def _mask(job: Job, model: ModelConfig) -> int:
    """Bytes of one micro-batch's boolean ``b*s*s`` attention mask from the
    data loader, a rank's ``(s/cp) x s`` of it (0 when the data loader
    makes none)."""
    if not job.create_attention_mask_in_dataloader:
        return 0
    shape = model.layer(job.t, moe=False)
    return shape.s * shape.b * shape.s * job.cp

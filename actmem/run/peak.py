"""A GPU's training memory: its parts, its peak over one step, and whether it fits.

For every pipeline stage :func:`training_memory` gives two answers, in bytes:

* the **parts**, what the GPU ever holds, added up: model states
  (:mod:`actmem.states`), the layer activations of the schedule's passes in
  flight at the stage's busiest moment (:mod:`actmem.schedules`), what only
  the first and the last stage keep per pass and the recomputation working
  set (:mod:`actmem.pass_parts`), and a reserve (by default an estimate
  with sourced parts when a GPU preset is named: :mod:`actmem.run.reserve`);
* the **peak**, the most alive at one moment, from the step's timeline
  (:mod:`actmem.timeline`) under the framework's choices
  (:mod:`actmem.framework`). The peak is what
  ``torch.cuda.max_memory_allocated()`` reports; with the reserve (what lives
  outside PyTorch's allocator: CUDA context, NCCL buffers) it decides the
  verdict against the GPU's capacity (:mod:`actmem.gpus`).
"""

from __future__ import annotations

from dataclasses import replace

from .features import FEATURES, waiting_tied_gradient
from .job.gpus import find_gpu
from .job.job import Job, as_job
from .job.model import ModelConfig
from .moments.autocast import autocast_copies
from .moments.dummy_wgrads import stage_dummy_wgrads
from .reserve import default_reserve
from .stage_memory import PARTS, StageMemory, TrainingMemory
from .model_states.states import model_states
from .step_setup import StepSetup, step_setup
from .moments.timeline import stage_timeline
from .stage_chunks import chunk_layers, chunk_parts, chunk_passes, chunk_pending, chunk_stacks

__all__ = ["PARTS", "StageMemory", "TrainingMemory", "training_memory"]  # the records: stage_memory


def training_memory(job: Job | ModelConfig, /, **options) -> TrainingMemory:
    """Every pipeline stage's GPU: its parts and its peak over one step.

    The parts (:data:`PARTS`) add up what each GPU ever holds; the peak is
    the largest total alive at one moment, from the step's timeline
    (:mod:`actmem.timeline`), and decides the verdict. The framework's
    choices are named options (:mod:`actmem.framework`); the defaults are
    Megatron-LM's.

    ``training_memory(job)`` computes a :class:`actmem.Job`;
    ``training_memory(model, **options)`` builds the job
    ``Job(model, **options)`` first, and ``training_memory(job, **changes)``
    computes ``job.with_(**changes)``: the same numbers, however the job is
    given. The step (this function reads like it): validate the job, split
    the layers, simulate the schedule (:func:`actmem.run.step_setup.step_setup`),
    then per stage the states, the moments and the timeline, then the peak
    (:func:`stage_memory`); each feature changes them through one interface
    (:mod:`actmem.run.features`).

    Args:
        job: a :class:`actmem.Job`, or a :class:`ModelConfig` (e.g.
            ``actmem.PRESETS["llama2-7b"]``) with the options below.
        t, p, d: tensor-, pipeline- and data-parallel sizes.
        ep, etp: expert-parallel and expert tensor-parallel sizes of an MoE
            model (:func:`actmem.model_states`; etp default t), for its
            states, its MoE layers' rows and their token dispatch buffers
            (:mod:`actmem.run.moments.moe_dispatch`). A model that mixes dense and
            MoE layers (``moe_layer_freq``) puts each stage's own layers,
            each of its kind, in the stage's parts and timeline.
        moe_hot_expert: a routing-imbalance what-if (dropless routing): the
            copies the busiest expert receives as a multiple of the mean per
            expert, 1 (balanced, the default) to E/k. The GPU that holds it
            receives :func:`actmem.layer.moe_copies.hot_rank_load` times the
            balanced copies, which moves its expert rows and dispatch
            buffers; the estimate at 1 is a lower bound.
        m, schedule, v, order: micro-batches per step and the pipeline
            schedule (:func:`actmem.simulate_schedule`; order None: Megatron-LM's,
            PyTorch's for its own schedules). Under ZBV and DualPipeV the loss
            is on stage 0 (the V's last chunk); under the zero-bubble
            schedules a pass keeps the rows its W reads from its I to its W
            (:mod:`actmem.run.schedule.split_backward`).
        microbatch_group_size_per_vp_stage: N, the micro-batches the
            interleaved schedule runs through a chunk before the next
            (Megatron-LM's ``--microbatch-group-size-per-virtual-pipeline-stage``;
            None: p), as :func:`actmem.simulate_schedule`'s ``microbatch_group_size``.
        sequence_parallel, recompute: storage options of the layers;
            recompute_num_layers: k, layers per checkpointed group (full).
            recompute_modules: with ``recompute="selective"``, the modules
            recomputed (Megatron-LM's ``--recompute-modules``, default
            ``["core_attn"]``), each layer taking those it has
            (:mod:`actmem.layer.recompute_modules`).
            cpu_offloading_num_layers: n, Megatron-LM's
            ``--cpu-offloading-num-layers``: the first n layers' large saved
            tensors go to pinned host memory (Transformer Engine's offload,
            :mod:`actmem.run.moments.offload`), so a pass keeps n layers' fewer on the
            GPU; the stage's ``host_memory`` reports the host bytes. Needs
            p=1, recompute="none" and schedule="1f1b"; 0 <= n < L.
        accounting, zero_stage, distributed_optimizer,
            num_distributed_optimizer_instances: model states
            (:func:`actmem.model_states`).
        optimizer: ``"adam"`` (Megatron-LM's default, 12 bytes of optimizer
            states per parameter) or ``"muon"`` (``--optimizer muon``: 8 bytes
            per matrix parameter, Adam's 12 for the embedding, output layer,
            norms and biases, and the Newton-Schulz temporaries of the step,
            :mod:`actmem.run.model_states.muon`); Muon needs
            accounting="megatron", precision="bf16", t=1, whole experts and
            no distributed optimizer, FSDP2, FP8 or LoRA.
        logits_bytes: bytes per element of the logits the loss keeps: 4
            (fp32, Megatron-LM) or 2.
        reserve: what each GPU needs beyond the peak: the CUDA context,
            NCCL's buffers and the caching allocator's gap. ``"default"``:
            where ``gpu_memory`` names a GPU preset, each stage's estimate
            (:func:`actmem.run.reserve.default_reserve`, its parts in the
            stage's ``reserve_parts``), else 0; ``0`` gives the bare peak;
            or bytes (an int), or a fraction in [0, 1) of ``gpu_memory``,
            the same on every GPU.
        expandable_segments: PyTorch's
            ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``: the default
            reserve's allocator gap is 3 % of the peak, not 10 %.
        gpu_memory: the GPU: a preset name (``"H100 80GB SXM"``,
            :data:`actmem.GPUS`), bytes, or a size (``"80GiB"``; ``"80GB"``
            is 80 x 10^9 bytes, less than an "80GB" GPU has).
        loss: ``"vocab_parallel"`` (Megatron-LM), ``"torch"``
            (``F.cross_entropy``) or ``"fused"`` (keeps no logits).
            cross_entropy_loss_fusion: Megatron-LM's
            ``--cross-entropy-loss-fusion``, the vocab-parallel loss compiled,
            whose backward holds one fp32 logits tensor more
            (:func:`actmem.loss_bytes`); bf16 only.
        gradient_buffer: ``"persistent"`` (Megatron-LM) or ``"backward"``
            (plain PyTorch, ``set_to_none=True``).
        create_attention_mask_in_dataloader: the data loader's ``b*s*s``
            boolean mask is on the GPU during each forward step.
        transformer_engine: Transformer Engine's workspace is allocated.
        global_memory_buffer: Megatron-LM's local layers (``--transformer-impl
            local``) keep their global memory buffer: with the attention map
            stored, the scores (b*a/t maps of s x s, the ``baddbmm``
            output) are written into it, not into a new tensor, and under
            sequence parallelism the linear layers gather their inputs into
            it (:func:`actmem.run.moments.framework.megatron_global_buffer`).
        cublas_workspace_config: PyTorch's ``CUBLAS_WORKSPACE_CONFIG``
            (default: PyTorch's for the GPU; Hopper's without a GPU preset).
        defer_embedding_wgrad_compute, wgrad_deferral_limit: Megatron-LM's
            flags: on the last stage the output layer's weight gradient of
            the first ``wgrad_deferral_limit`` micro-batches (0: all) waits
            for the pipeline flush, keeping its input and the logits'
            gradient (:mod:`actmem.run.moments.deferred_wgrad`); needs p > 1,
            gradient accumulation fusion, '1f1b' or 'interleaved'.
        moe_grouped_gemm: the experts run Transformer Engine's grouped GEMM
            (``--moe-grouped-gemm``), which keeps four more cuBLASLt
            workspaces (:func:`actmem.run.moments.framework.workspace_bytes`);
            an MoE model with Transformer Engine only.
        tp_comm_overlap: Megatron-LM's ``--tp-comm-overlap``: Transformer
            Engine's Userbuffers GEMMs keep three more cuBLASLt workspaces
            (:func:`actmem.run.moments.framework.workspace_bytes`); the
            Userbuffers are allocated outside PyTorch's allocator, so they
            are in no peak, and the default reserve does not estimate them
            either. Needs Transformer Engine and sequence parallelism.
        stage_layers, decoder_first_pipeline_num_layers,
        decoder_last_pipeline_num_layers,
        account_for_embedding_in_pipeline_split,
        account_for_loss_in_pipeline_split: uneven pipeline stages, as
            :func:`actmem.split_layers` (default: ``L/(p*v)`` per chunk).
        precision: ``"bf16"`` (Megatron-LM's ``--bf16``), ``"fp16"``
            (``--fp16``: bf16's activations, a 16-bit gradient buffer whose
            fp32 copies the optimizer step makes), ``"fp32"`` or
            ``"autocast"`` (fp32 parameters under ``torch.autocast``, bf16):
            :mod:`actmem.run.moments.precision`; fp32 and autocast need
            ``logits_bytes=4``. accumulate_allreduce_grads_in_fp32:
            Megatron-LM's, with accounting "megatron": None is its rule (an
            fp32 gradient buffer under bf16, 16 bits under fp16); False
            under bf16 is ``--grad-reduce-in-bf16``
            (:func:`actmem.run.model_states.states.sixteen_bit_gradients`).
            fused_projections: under autocast, Q/K/V (and SwiGLU's gate/up)
            are one linear, which casts its input once.
            autocast_device: whose autocast op lists apply, ``"cuda"`` or
            ``"cpu"`` (where softmax stays bf16).
        loss_chunk_tokens: tokens per chunk of ``loss="fused"`` (default
            :func:`actmem.run.moments.loss.fused_loss_chunk`, Liger-Kernel's);
            more than the micro-batch's tokens on a GPU (``s*b/cp``) is one
            chunk of those tokens, as :func:`actmem.loss_bytes` says.
        gradient_accumulation_fusion: Megatron-LM's: weight gradients are
            added into the fp32 buffer inside the GEMM (default: with the
            persistent buffer, which it needs; :mod:`actmem.run.moments.framework`).
        cp, cp_comm_type, hierarchical_context_parallel_sizes: context
            parallelism (``--context-parallel-size``, ``--cp-comm-type``,
            :mod:`actmem.layer.context_parallel`): a rank runs the model on
            s/cp tokens (a2a and a2a+p2p keep one row more per layer: dense
            models only; bf16 only),
            keeps (s/cp) x s of the data loader's mask (split along the
            queries, ``get_batch_on_this_cp_rank``), and the model states
            shard over d*cp (:func:`actmem.model_states`).
        fp8: ``None`` or Megatron-LM's ``--fp8-format`` (``"e4m3"``,
            ``"hybrid"``): Transformer Engine's FP8 linear layers; their
            saved inputs take 1 byte (:mod:`actmem.layer.fp8`), and each
            layer's FP8 weight copies and scaling state
            (:func:`actmem.layer.fp8_weights.fp8_state_bytes`) join the
            weights; MoE layers too, per local expert. A model with
            ``lora_rank`` trains its adapters (frozen base:
            :mod:`actmem.run.model_states.lora_states`) in bf16 only.
            fp8_recipe: ``"delayed"`` (Megatron-LM's ``--fp8-recipe``
            default), ``"tensorwise"`` (current scaling: no scaling state;
            the output projection keeps its 16-bit input) or
            ``"blockwise"`` (as tensorwise, with a scale per 128-element
            block and both weight copies on every GPU, compute capability
            9.0 or newer: :mod:`actmem.layer.fp8_scales`).
            fp8_param_gather: Megatron-LM's ``--fp8-param-gather``: the
            linear layers' parameters are FP8 tensors and no FP8 copy is
            cached (needs the distributed optimizer; dense models, delayed
            or tensorwise scaling). The cached copies and
            FP8 parameters keep a transpose on GPUs below compute capability
            10.0 (Hopper; the default without a GPU preset), none on
            Blackwell.
        use_torch_fsdp2: Megatron-LM's ``--use-torch-fsdp2``: PyTorch's
            ``fully_shard`` on every layer and the whole model, torchtitan's
            mixed precision (bf16 compute, fp32 reduce): fp32 parameter,
            gradient and Adam shards over d*cp replace the model states, and
            the timeline holds the gathered bf16 parameters of the running
            and the prefetched layer, the root's, and the reduce-scatter
            buffers (:mod:`actmem.run.model_states.fsdp`). Needs t=p=1, ep=1,
            gradient_buffer="backward", zero_stage=0, a dense bf16 model.
            reshard_after_forward: FSDP2's (Megatron-LM's
            TorchFullyShardedDataParallelConfig): False keeps every layer's
            gathered parameters from its forward to its backward.
        use_megatron_fsdp, megatron_fsdp_main_grads_dtype, ddp_bucket_size,
            suggested_communication_unit_size: Megatron-LM's
            ``--use-megatron-fsdp`` (version 1, ``optim_grads_params``; needs
            p=1, the distributed optimizer, Adam, bf16), the gradients' dtype
            (``"auto"``: bf16, ``"fp32"``, ``"bf16"``), the bucket size and the
            communication unit (elements): :mod:`actmem.run.model_states.megatron_fsdp`.

    Returns:
        :class:`TrainingMemory`: ``.stages`` (each with ``.timeline`` and
        ``.peak``), ``.most_loaded``, ``.margin`` and ``.fits`` (None
        without ``gpu_memory``).

    Raises:
        TypeError, ValueError: any invalid value; the message names it.
    """
    job = as_job(job, options)   # validated: its checks found its setup
    setup = step_setup(job)
    return TrainingMemory(tuple(stage_memory(setup, i) for i in range(job.p)), setup.capacity)


def stage_memory(setup: StepSetup, i: int) -> StageMemory:
    """Stage ``i``'s memory: its layers' parts, its passes, its model states
    and its step's timeline, each as the job's features change them."""
    j, plan, moments = setup.job, setup.plan, setup.moments
    passes = chunk_passes(setup, i)
    stacks = chunk_stacks(setup, i, passes)
    parts = chunk_parts(setup, i, stacks)
    chunks = [{"layer_activations": held, "embedding_activations": one.embedding,
               "output_activations": one.output + one.logits_loss}
              for (held, _), one in zip(parts, passes)]
    states = stage_states(setup, i)
    timeline = stage_timeline(
        plan, i, states=vars(states), persistent_gradients=j.gradient_buffer == "persistent",
        workspace=setup.workspace + stage_dummy_wgrads(setup, i, any(p.last for p in passes)),
        passes=passes, layers=chunk_layers(setup, i, stacks), layer=moments,
        loss=setup.losses, mask=setup.mask,
        copies=autocast_copies(setup.model, j.t, j.precision),
        tied_gradient=waiting_tied_gradient(setup), stacks=stacks,
        scores_in_workspace=j.global_memory_buffer)
    for feature in FEATURES:
        timeline = feature.timeline(setup, timeline, passes)
    stage = StageMemory(i, states.weights, states.gradients + states.step_gradients,
                        states.optimizer,
                        **plan.peak_parts(i, chunks, chunk_pending(setup, i, stacks)),
                        recompute_working_set=max(w for _, w in parts),
                        reserve=setup.reserve or 0, timeline=timeline)
    for feature in FEATURES:
        stage = feature.stage(setup, stage)
    return _with_default_reserve(setup, stage)


def _with_default_reserve(setup: StepSetup, stage: StageMemory) -> StageMemory:
    """``stage`` with the default reserve of its GPU at its peak
    (:func:`actmem.run.reserve.default_reserve`) where the job asks for it
    (``reserve="default"``: ``setup.reserve`` None) and names a GPU preset."""
    gpu = find_gpu(setup.job.gpu_memory)
    if setup.reserve is not None or gpu is None:
        return stage
    parts = default_reserve(setup.job, stage.stage, stage.peak, gpu)
    return replace(stage, reserve=parts.total, reserve_parts=parts)


def stage_states(setup: StepSetup, i: int):
    """Stage ``i``'s model states (:func:`actmem.model_states`), as the
    features change them."""
    j, split = setup.job, setup.split
    states = model_states(
        setup.model, t=j.t, p=j.p, d=j.d, ep=j.ep, etp=j.etp, cp=j.cp, accounting=j.accounting,
        zero_stage=j.zero_stage, stage_layers=tuple(map(sum, split)),
        distributed_optimizer=j.distributed_optimizer, stage=i, fp8=setup.fp8,
        moe_layers=setup.moe_layers(),
        num_distributed_optimizer_instances=j.num_distributed_optimizer_instances)
    for feature in FEATURES:
        states = feature.states(setup, states)
    return states

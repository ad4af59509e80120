"""A GPU's training memory: its parts, its peak over one step, and whether it fits.

For every pipeline stage :func:`training_memory` gives two answers, in bytes:

* the **parts**, what the GPU ever holds, added up: model states
  (:mod:`actmem.states`), the layer activations of the schedule's passes in
  flight at the stage's busiest moment (:mod:`actmem.schedules`), what only
  the first and the last stage keep per pass and the recomputation working
  set (:mod:`actmem.pass_parts`), and a reserve the user sets;
* the **peak**, the most alive at one moment, from the step's timeline
  (:mod:`actmem.timeline`) under the framework's choices
  (:mod:`actmem.framework`). The peak is what
  ``torch.cuda.max_memory_allocated()`` reports; with the reserve (what lives
  outside PyTorch's allocator: CUDA context, NCCL buffers) it decides the
  verdict against the GPU's capacity (:mod:`actmem.gpus`).
"""

from __future__ import annotations

from dataclasses import replace

from .cp_timeline import with_exchange
from .framework import fused_loss_chunk, loss_bytes, workspace_bytes
from .fsdp import fsdp2, fsdp_timeline
from .gpus import find_gpu, gpu_capacity
from ..layer.context_parallel import rank_model, with_a2a_output
from .model import ModelConfig
from .offload import cpu_offload, offloaded_timeline
from .pass_parts import embedding_activations, output_activations
from .precision import (autocast_copies, full_precision_states, layer_rows, moment_parts,
                        precision_moments, precision_outputs)
from .schedule_rules import MAX_TIMELINE_OPERATIONS, check_size
from .schedules import simulate_schedule
from .split_backward import layer_weight_rows
from .moe_timeline import dense_twin, kind_moments, stack_parts, stage_moe_layers, stage_stacks
from .states import expert_data_parallel, model_states
from .stage_split import split_layers
from .stage_memory import PARTS, StageMemory, TrainingMemory
from .timeline import Pass, stage_timeline
from .training_checks import check_fsdp2, check_training, check_uneven_split, reserve_bytes
from ..validate import lists_keywords, positive_int

__all__ = ["PARTS", "StageMemory", "TrainingMemory", "training_memory"]  # the records: stage_memory


@lists_keywords
def training_memory(model: ModelConfig, *, t: int = 1, p: int = 1, d: int = 1,
                    ep: int = 1, etp: int | None = None,
                    m: int = 1, schedule: str = "1f1b", v: int = 1,
                    order: str | None = None, sequence_parallel: bool = False,
                    recompute: str = "none", recompute_num_layers: int = 1,
                    accounting: str = "megatron", zero_stage: int = 0,
                    distributed_optimizer: bool = False, logits_bytes: int = 4,
                    reserve: int | float = 0, gpu_memory: int | str | None = None,
                    loss: str = "vocab_parallel", gradient_buffer: str = "persistent",
                    create_attention_mask_in_dataloader: bool = True,
                    transformer_engine: bool = True,
                    cublas_workspace_config: str | None = None, stage_layers=None,
                    decoder_first_pipeline_num_layers: int | None = None,
                    decoder_last_pipeline_num_layers: int | None = None,
                    account_for_embedding_in_pipeline_split: bool = False,
                    account_for_loss_in_pipeline_split: bool = False,
                    precision: str = "bf16", fused_projections: bool = True,
                    autocast_device: str = "cuda",
                    loss_chunk_tokens: int | None = None,
                    gradient_accumulation_fusion: bool | None = None,
                    cp: int = 1, cp_comm_type: str = "p2p",
                    hierarchical_context_parallel_sizes: tuple[int, int] | None = None,
                    recompute_modules: list[str] | tuple[str, ...] | None = None,
                    fp8: str | None = None, cpu_offloading_num_layers: int = 0,
                    use_torch_fsdp2: bool = False, reshard_after_forward: bool = True
                    ) -> TrainingMemory:
    """Every pipeline stage's GPU: its parts and its peak over one step.

    The parts (:data:`PARTS`) add up what each GPU ever holds; the peak is
    the largest total alive at one moment, from the step's timeline
    (:mod:`actmem.timeline`), and decides the verdict. The framework's
    choices are named options (:mod:`actmem.framework`); the defaults are
    Megatron-LM's.

    Args:
        model: a :class:`ModelConfig` (e.g. ``actmem.PRESETS["llama2-7b"]``).
        t, p, d: tensor-, pipeline- and data-parallel sizes.
        ep, etp: expert-parallel and expert tensor-parallel sizes of an MoE
            model (:func:`actmem.model_states`; etp default t), for its
            states, its MoE layers' rows and their token dispatch buffers
            (:mod:`actmem.run.moe_timeline`). A model that mixes dense and
            MoE layers (``moe_layer_freq``) puts each stage's own layers,
            each of its kind, in the stage's parts and timeline.
        m, schedule, v, order: micro-batches per step and the pipeline
            schedule (:func:`actmem.simulate_schedule`; order None: Megatron-LM's,
            PyTorch's for its own schedules). Under ZBV and DualPipeV the loss
            is on stage 0 (the V's last chunk); under the zero-bubble
            schedules a pass keeps the rows its W reads from its I to its W
            (:mod:`actmem.run.split_backward`).
        sequence_parallel, recompute: storage options of the layers;
            recompute_num_layers: k, layers per checkpointed group (full).
            recompute_modules: with ``recompute="selective"``, the modules
            recomputed (Megatron-LM's ``--recompute-modules``, default
            ``["core_attn"]``), each layer taking those it has
            (:mod:`actmem.layer.recompute_modules`).
            cpu_offloading_num_layers: n, Megatron-LM's
            ``--cpu-offloading-num-layers``: the first n layers' large saved
            tensors go to pinned host memory (Transformer Engine's offload,
            :mod:`actmem.run.offload`), so a pass keeps n layers' fewer on the
            GPU; the stage's ``host_memory`` reports the host bytes. Needs
            p=1, recompute="none" and schedule="1f1b"; 0 <= n < L.
        accounting, zero_stage, distributed_optimizer: model states
            (:func:`actmem.model_states`).
        logits_bytes: bytes per element of the logits the loss keeps: 4
            (fp32, Megatron-LM) or 2.
        reserve: bytes, or a fraction in [0, 1) of ``gpu_memory``, set
            aside on every GPU for what lives outside PyTorch's allocator
            (CUDA context, NCCL buffers) and allocator fragmentation.
        gpu_memory: the GPU: a preset name (``"H100 80GB SXM"``,
            :data:`actmem.GPUS`), bytes, or a size (``"80GiB"``; ``"80GB"``
            is 80 x 10^9 bytes, less than an "80GB" GPU has).
        loss: ``"vocab_parallel"`` (Megatron-LM), ``"torch"``
            (``F.cross_entropy``) or ``"fused"`` (keeps no logits).
        gradient_buffer: ``"persistent"`` (Megatron-LM) or ``"backward"``
            (plain PyTorch, ``set_to_none=True``).
        create_attention_mask_in_dataloader: the data loader's ``b*s*s``
            boolean mask is on the GPU during each forward step.
        transformer_engine: Transformer Engine's workspace is allocated.
        cublas_workspace_config: PyTorch's ``CUBLAS_WORKSPACE_CONFIG``
            (default: PyTorch's for the GPU; Hopper's without a GPU preset).
        stage_layers, decoder_first_pipeline_num_layers,
        decoder_last_pipeline_num_layers,
        account_for_embedding_in_pipeline_split,
        account_for_loss_in_pipeline_split: uneven pipeline stages, as
            :func:`actmem.split_layers` (default: ``L/(p*v)`` per chunk).
        precision: ``"bf16"`` (Megatron-LM's ``--bf16``), ``"fp32"`` or
            ``"autocast"`` (fp32 parameters under ``torch.autocast``, bf16):
            :mod:`actmem.run.precision`; fp32 and autocast need
            ``logits_bytes=4``. fused_projections: under autocast, Q/K/V
            (and SwiGLU's gate/up) are one linear, which casts its input once.
            autocast_device: whose autocast op lists apply, ``"cuda"`` or
            ``"cpu"`` (where softmax stays bf16).
        loss_chunk_tokens: tokens per chunk of ``loss="fused"`` (default
            :func:`actmem.run.framework.fused_loss_chunk`, Liger-Kernel's);
            more than the micro-batch's tokens on a GPU (``s*b/cp``) is one
            chunk of those tokens, as :func:`actmem.loss_bytes` says.
        gradient_accumulation_fusion: Megatron-LM's: weight gradients are
            added into the fp32 buffer inside the GEMM (default: with the
            persistent buffer, which it needs; :mod:`actmem.run.framework`).
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
            (:func:`actmem.layer.fp8.fp8_state_bytes`) join the weights. A
            model with ``lora_rank`` trains its adapters (frozen base:
            :mod:`actmem.run.lora_states`) in bf16 only.
        use_torch_fsdp2: Megatron-LM's ``--use-torch-fsdp2``: PyTorch's
            ``fully_shard`` on every layer and the whole model, torchtitan's
            mixed precision (bf16 compute, fp32 reduce): fp32 parameter,
            gradient and Adam shards over d*cp replace the model states, and
            the timeline holds the gathered bf16 parameters of the running
            and the prefetched layer, the root's, and the reduce-scatter
            buffers (:mod:`actmem.run.fsdp`). Needs t=p=1, ep=1,
            gradient_buffer="backward", zero_stage=0, a dense bf16 model.
            reshard_after_forward: FSDP2's (Megatron-LM's
            TorchFullyShardedDataParallelConfig): False keeps every layer's
            gathered parameters from its forward to its backward.

    Returns:
        :class:`TrainingMemory`: ``.stages`` (each with ``.timeline`` and
        ``.peak``), ``.most_loaded``, ``.margin`` and ``.fits`` (None
        without ``gpu_memory``).

    Raises:
        TypeError, ValueError: any invalid value; the message names it.
    """
    k, fp8, fusion = check_training(
        model, t=t, p=p, d=d, m=m, v=v, cp=cp, schedule=schedule,
        sequence_parallel=sequence_parallel, recompute=recompute,
        recompute_num_layers=recompute_num_layers, recompute_modules=recompute_modules,
        precision=precision, autocast_device=autocast_device,
        fused_projections=fused_projections, logits_bytes=logits_bytes, loss=loss,
        loss_chunk_tokens=loss_chunk_tokens, gradient_buffer=gradient_buffer,
        gradient_accumulation_fusion=gradient_accumulation_fusion,
        create_attention_mask_in_dataloader=create_attention_mask_in_dataloader,
        transformer_engine=transformer_engine, fp8=fp8,
        cpu_offloading_num_layers=cpu_offloading_num_layers)
    check_fsdp2(model, use_torch_fsdp2=use_torch_fsdp2,
                reshard_after_forward=reshard_after_forward, t=t, p=p, v=v, ep=ep,
                schedule=schedule, zero_stage=zero_stage,
                distributed_optimizer=distributed_optimizer, gradient_buffer=gradient_buffer,
                precision=precision, fp8=fp8, cpu_offloading_num_layers=cpu_offloading_num_layers,
                recompute_modules=recompute_modules)
    expert_data_parallel(model, t, d, ep, etp, cp)
    model, whole = rank_model(model, t, sequence_parallel, recompute, cp, cp_comm_type,  # s/cp
                              hierarchical_context_parallel_sizes, precision), model
    sharded = use_torch_fsdp2 and fsdp2(whole, d * cp, reshard_after_forward)
    capacity = None if gpu_memory is None else gpu_capacity(gpu_memory)
    gpu = find_gpu(gpu_memory)
    workspace = sum(workspace_bytes(gpu.compute_capability if gpu else (9, 0),
                                    cublas_workspace_config, transformer_engine).values())
    uneven = dict(stage_layers=stage_layers,
                  decoder_first_pipeline_num_layers=decoder_first_pipeline_num_layers,
                  decoder_last_pipeline_num_layers=decoder_last_pipeline_num_layers,
                  account_for_embedding_in_pipeline_split=account_for_embedding_in_pipeline_split,
                  account_for_loss_in_pipeline_split=account_for_loss_in_pipeline_split)
    split = split_layers(model.L, p, v, **uneven)  # cheap checks before the simulation
    check_size(p, m, v, MAX_TIMELINE_OPERATIONS, "training_memory's timeline of")  # cheaply first
    plan = simulate_schedule(schedule, p, m, v, order)
    check_uneven_split(plan.v_shaped, schedule, uneven)
    spare = reserve_bytes(reserve, capacity)
    layer_options = {}  # the run's other LayerConfig options (ModelConfig.layer)
    if recompute_modules is not None:
        layer_options["recompute_modules"] = recompute_modules
    if fp8:
        layer_options["fp8"] = fp8
    base = dense_twin(model)  # s, b, h, the vocabulary: the same for every kind of layer
    first = embedding_activations(base, t, sequence_parallel, layer_options)
    last = precision_outputs(output_activations(base, t, sequence_parallel, logits_bytes,
                                                layer_options), precision)
    shape = model.layer(t, moe=False)  # s, b, h
    tokens, vocab = shape.s * shape.b, model.padded_vocab(shape.t) // shape.t  # plain ints
    chunk, gradients = None, 0  # what only loss="fused" takes (loss_bytes)
    if loss == "fused":
        chunk = positive_int("loss_chunk_tokens", fused_loss_chunk(tokens, vocab, shape.h)
                             if loss_chunk_tokens is None else loss_chunk_tokens)
        gradients = (last["output layer input"]
                     + (2 + 2 * (precision != "bf16")) * vocab * shape.h)
    losses = loss_bytes(loss, tokens * vocab, tokens, 4 if precision == "fp32" else 2,
                        logits_bytes, chunk, gradients)
    last["logits"] = losses["saved"]
    tied = (2 + 2 * (precision != "bf16")) * vocab * shape.h  # the output weight's gradient
    kinds = None if model.num_experts is None else kind_moments(  # MoE: layers by kind
        model, t, sequence_parallel, recompute, k, ep=ep, etp=etp, weight_gradients=not fusion,
        split_backward=plan.splits_backward, layer_options=layer_options)
    moments = kinds[max(kinds)] if kinds else precision_moments(  # LoRA: fc2 is frozen
        model, t, sequence_parallel, recompute, k, precision, fused_projections,
        autocast_device, not fusion and model.lora_rank is None, layer_options)
    if plan.splits_backward and not kinds:  # zero bubble: from I to W a pass keeps what W reads
        rows = layer_rows(model, t, sequence_parallel, "none", precision, fused_projections,
                          autocast_device, layer_options)
        moments = replace(moments, weight_rows=layer_weight_rows(
            model, t, sequence_parallel, rows, layer_options))
    moments = with_a2a_output(moments, whole, t, sequence_parallel, recompute, cp, cp_comm_type,
                              hierarchical_context_parallel_sizes, layer_options)
    moments, kinds = with_exchange(moments, kinds, whole, t, sequence_parallel, recompute, cp,
                                   cp_comm_type, hierarchical_context_parallel_sizes, layer_options)
    mask = shape.s * shape.b * shape.s * cp if create_attention_mask_in_dataloader else 0
    offload = cpu_offloading_num_layers and cpu_offload(
        model, t, cpu_offloading_num_layers, sequence_parallel, layer_options)
    stages = []
    for i in range(p):
        stacks = kinds and stage_stacks(model.moe_pattern(), split, i, kinds, plan.v_shaped)
        parts = ([stack_parts(stack, recompute, k) for stack in stacks] if stacks
                 else [moment_parts(moments, n) for n in split[i]])
        passes = [_pass((i, c) == (0, 0), (i, c) == plan.last_chunk(), first, last)
                  for c in range(v)]
        chunks = [{"layer_activations": held, "embedding_activations": one.embedding,
                   "output_activations": one.output + one.logits_loss}
                  for (held, _), one in zip(parts, passes)]
        states = model_states(model, t=t, p=p, d=d, ep=ep, etp=etp, cp=cp, accounting=accounting,
                              zero_stage=zero_stage, stage_layers=tuple(map(sum, split)),
                              distributed_optimizer=distributed_optimizer, stage=i, fp8=fp8,
                              moe_layers=kinds and stage_moe_layers(model.moe_pattern(), split,
                                                                    plan.v_shaped))
        if precision != "bf16":
            states = replace(states, **full_precision_states(
                states.parameters, d * cp, zero_stage, distributed_optimizer))
        if sharded:   # FSDP2's fp32 shards (actmem.run.fsdp)
            states = replace(states, **sharded.states)
        timeline = stage_timeline(
            plan, i, states=vars(states), persistent_gradients=gradient_buffer == "persistent",
            workspace=workspace, passes=passes,
            layers=list(split[i]), layer=moments, loss=losses, mask=mask,
            copies=autocast_copies(model, t, precision),
            tied_gradient=tied * (model.tied_embeddings and p == 1 and not fusion
                                  and model.lora_rank is None  # LoRA: embedding frozen
                                  and not sharded),  # FSDP2: the root's, actmem.run.fsdp
            stacks=stacks)
        if sharded:
            timeline = fsdp_timeline(timeline, sharded, moments.kept, passes[0].embedding, k,
                                     recompute == "full")
        stages.append(StageMemory(i, states.weights, states.gradients, states.optimizer,
                                  **plan.peak_parts(i, chunks, _pending(
                                      moments, stacks or [(moments,) * n for n in split[i]])),
                                  recompute_working_set=max(w for _, w in parts),
                                  reserve=spare, timeline=timeline))
        if offload:  # n layers' offloadable rows on the host while a pass is held
            stages[-1] = replace(stages[-1], timeline=offloaded_timeline(timeline, offload.saving),
                                 layer_activations=stages[-1].layer_activations - offload.saving,
                                 host_memory=offload.host)
    return TrainingMemory(tuple(stages), capacity)


def _pending(moments, stacks) -> list[dict[str, int]] | None:
    """Per chunk (each layer's moments), what a pass keeps from its I to its W
    (None: no split backward)."""
    if moments.weight_rows is None:
        return None
    return [{"layer_activations": sum(m.weight_rows for m in stack)} for stack in stacks]


def _pass(is_first: bool, is_last: bool, first: dict, last: dict) -> Pass:
    """What a pass keeps besides its layers: the first chunk of the model
    (stage 0, chunk 0) the embedding's, the last (where the loss is) the
    output layer's and the logits."""
    return Pass(embedding=sum(first.values()) if is_first else 0,
                output=sum(last.values()) - last["logits"] if is_last else 0,
                logits_loss=last["logits"] if is_last else 0,
                loads_data=is_first or is_last, last=is_last)


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

import math
import numbers
from dataclasses import dataclass, field, replace
from fractions import Fraction

from ..layer.fp8 import fp8_format
from ..layer.recompute_modules import check_for_model
from .framework import (GRADIENT_BUFFERS, LOSSES, fused_loss_chunk, gradient_fusion, loss_bytes,
                        workspace_bytes)
from .gpus import find_gpu, gpu_capacity
from ..layer.context_parallel import rank_model, with_a2a_output
from .model import ModelConfig
from .offload import check_offload, cpu_offload, offloaded_timeline
from .pass_parts import embedding_activations, output_activations
from .precision import (AUTOCAST_DEVICES, PRECISIONS, autocast_copies, full_precision_states,
                        layer_rows, moment_parts, precision_moments, precision_outputs)
from .schedule_rules import MAX_TIMELINE_OPERATIONS, check_size
from .schedules import simulate_schedule
from .split_backward import layer_weight_rows
from .moe_timeline import dense_twin, kind_moments, stack_parts, stage_moe_layers, stage_stacks
from .states import expert_data_parallel, model_states
from .stage_split import split_layers
from .timeline import Pass, StageTimeline, stage_timeline
from ..validate import choice, flag, instance, integer, lists_keywords, positive_int

PARTS = ("weights", "gradients", "optimizer", "layer_activations",
         "embedding_activations", "output_activations", "recompute_working_set",
         "reserve")
"""The parts of a stage's memory, in the order figures stack them."""


@dataclass(frozen=True)
class StageMemory:
    """Bytes one GPU of pipeline stage ``stage`` holds at its peak, by part
    (:data:`PARTS`)."""

    stage: int
    weights: int
    gradients: int
    optimizer: int
    layer_activations: int
    embedding_activations: int
    output_activations: int
    recompute_working_set: int
    reserve: int
    # compared too: the peak is the timeline's (two plans that differ only in
    # when things are alive, e.g. the loss, are not the same plan)
    timeline: StageTimeline | None = field(default=None, repr=False)
    # pinned host bytes of activation offloading (actmem.run.offload), not on the GPU
    host_memory: int = field(default=0, repr=False)

    @property
    def peak(self) -> int:
        """The largest total alive at one moment of the step (bytes): what
        ``torch.cuda.max_memory_allocated()`` reports on this GPU
        (:attr:`timeline`'s peak event)."""
        return self.timeline.peak.total

    @property
    def needed(self) -> int:
        """:attr:`peak` plus the reserve for what lives outside PyTorch's
        allocator (CUDA context, NCCL buffers), bytes: what must fit."""
        return self.peak + self.reserve

    @property
    def parts(self) -> dict[str, int]:
        """Part name -> bytes, in :data:`PARTS` order."""
        return {name: getattr(self, name) for name in PARTS}

    @property
    def total(self) -> int:
        """The sum of the parts, bytes."""
        return sum(self.parts.values())

    @property
    def held_between_passes(self) -> int:
        """Activations kept from forward to backward at the peak, bytes."""
        return self.layer_activations + self.embedding_activations + self.output_activations

    @property
    def peak_during_backward(self) -> int:
        """:attr:`held_between_passes` plus what recomputation rebuilds."""
        return self.held_between_passes + self.recompute_working_set


@dataclass(frozen=True)
class TrainingMemory:
    """Every stage's memory and the verdict against ``gpu_memory``.

    Attributes:
        stages: one :class:`StageMemory` per pipeline stage, first first.
        gpu_memory: the GPU's capacity in bytes, or None.
    """

    stages: tuple[StageMemory, ...]
    gpu_memory: int | None

    @property
    def most_loaded(self) -> StageMemory:
        """The stage whose GPU needs the most at its peak (the first one if
        tied)."""
        return max(self.stages, key=lambda stage: stage.needed)

    @property
    def margin(self) -> int | None:
        """``gpu_memory - most_loaded.needed`` (negative: does not fit)."""
        return None if self.gpu_memory is None else self.gpu_memory - self.most_loaded.needed

    @property
    def fits(self) -> bool | None:
        """Whether the most loaded stage fits, or None without ``gpu_memory``."""
        return None if self.gpu_memory is None else self.margin >= 0


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
                    fp8: str | None = None, cpu_offloading_num_layers: int = 0
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
            :func:`actmem.run.framework.fused_loss_chunk`, Liger-Kernel's).
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

    Returns:
        :class:`TrainingMemory`: ``.stages`` (each with ``.timeline`` and
        ``.peak``), ``.most_loaded``, ``.margin`` and ``.fits`` (None
        without ``gpu_memory``).

    Raises:
        TypeError, ValueError: any invalid value; the message names it.
    """
    instance("model", model, ModelConfig, "actmem.PRESETS['llama2-7b']")
    flag("sequence_parallel", sequence_parallel)
    flag("create_attention_mask_in_dataloader", create_attention_mask_in_dataloader)
    flag("transformer_engine", transformer_engine)
    choice("gradient_buffer", gradient_buffer, GRADIENT_BUFFERS)
    choice("loss", loss, LOSSES)
    choice("precision", precision, PRECISIONS)
    choice("autocast_device", autocast_device, AUTOCAST_DEVICES)
    fusion = gradient_fusion(gradient_accumulation_fusion, gradient_buffer)
    flag("fused_projections", fused_projections)
    if loss_chunk_tokens is not None and loss != "fused":
        raise ValueError(f"loss_chunk_tokens={loss_chunk_tokens!r} is for loss='fused' "
                         f"(got loss={loss!r}); leave it None")
    if precision != "bf16" and getattr(model, "num_experts", None) is not None:
        raise ValueError(f"precision={precision!r} is modelled for dense models only; "
                         f"this model has num_experts={model.num_experts}: use 'bf16'")
    if precision != "bf16" and (model.kv_channels is not None or model.qk_layernorm):
        raise ValueError(f"precision={precision!r} is modelled for heads of width h/a "
                         f"without query/key norms; this model has kv_channels="
                         f"{model.kv_channels}, qk_layernorm={model.qk_layernorm}: use 'bf16'")
    if precision != "bf16" and model.multi_latent_attention:
        raise ValueError(f"precision={precision!r} is modelled for the paper's attention only "
                         "(fp32 rows and autocast's weight copies); this model has "
                         "multi_latent_attention=True: use 'bf16'")
    if precision != "bf16" and logits_bytes != 4:
        raise ValueError(f"logits_bytes={logits_bytes!r} contradicts precision={precision!r}: "
                         "the loss keeps fp32 logits in fp32 and under autocast "
                         "(log_softmax runs in fp32); use logits_bytes=4")
    k = positive_int("recompute_num_layers", recompute_num_layers)
    fp8 = fp8_format(fp8)
    if precision != "bf16" and (fp8 or model.lora_rank is not None):
        raise ValueError(f"precision={precision!r} with fp8={fp8!r}, lora_rank={model.lora_rank}:"
                         " FP8 and LoRA are modelled over bf16 training; use 'bf16'")
    if fp8 and model.num_experts is not None:
        raise ValueError(f"fp8={fp8!r} is modelled for dense models; this model has "
                         f"num_experts={model.num_experts}: use fp8=None")
    if fp8:
        model.layer(t, sequence_parallel, recompute, fp8=fp8)  # Transformer Engine's checks
    if recompute_modules is not None:
        check_for_model(model, t, sequence_parallel, recompute, recompute_modules)
        if precision != "bf16":
            raise ValueError(f"recompute_modules={recompute_modules!r} with precision="
                             f"{precision!r}: the modules' working set is modelled over bf16 "
                             "training; use precision='bf16'")
    check_offload(cpu_offloading_num_layers, L=model.L, p=p, recompute=recompute,
                  schedule=schedule)
    expert_data_parallel(model, t, d, ep, etp, cp)
    model, whole = rank_model(model, t, sequence_parallel, recompute, cp, cp_comm_type,  # s/cp
                              hierarchical_context_parallel_sizes, precision), model
    if fp8 and cp > 1:  # cp is checked by rank_model
        raise ValueError(f"fp8={fp8!r} with cp={cp}: the FP8 rows are modelled without "
                         "context parallelism (actmem.layer.fp8 refuses cp > 1 in a layer); "
                         "use cp=1 or fp8=None")
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
    if plan.v_shaped and any(x not in (None, False) for x in uneven.values()):
        raise ValueError(f"schedule={schedule!r} puts the first and the last layers on stage 0 "
                         "(a V); uneven splits are modelled for looped schedules only")
    spare = _reserve(reserve, capacity)
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
    chunk = (fused_loss_chunk(tokens, vocab, shape.h) if loss_chunk_tokens is None
             else loss_chunk_tokens)
    losses = loss_bytes(loss, tokens * vocab, tokens, 4 if precision == "fp32" else 2,
                        logits_bytes, positive_int("loss_chunk_tokens", chunk),
                        last["output layer input"] + (2 + 2 * (precision != "bf16")) * vocab
                        * shape.h)
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
        timeline = stage_timeline(
            plan, i, states=vars(states), persistent_gradients=gradient_buffer == "persistent",
            workspace=workspace, passes=passes,
            layers=list(split[i]), layer=moments, loss=losses, mask=mask,
            copies=autocast_copies(model, t, precision),
            tied_gradient=tied * (model.tied_embeddings and p == 1 and not fusion
                                  and model.lora_rank is None),  # LoRA: embedding frozen
            stacks=stacks)
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


def _reserve(reserve: int | float, capacity: int | None) -> int:
    if not isinstance(reserve, numbers.Real) or isinstance(reserve, numbers.Integral):
        reserve = integer("reserve", reserve, "bytes (an int) or a fraction of "
                                              "gpu_memory (a float)")
        if reserve < 0:
            raise ValueError(f"reserve must be >= 0 bytes, got {reserve}")
        return reserve
    if not 0 <= reserve < 1:
        raise ValueError(f"reserve={reserve}: a fraction must be in [0, 1)")
    if capacity is None:
        raise ValueError(f"reserve={reserve} is a fraction of gpu_memory; give gpu_memory "
                         "or a reserve in bytes")
    return math.ceil(Fraction(repr(float(reserve))) * capacity)  # 0.05 means 5/100 exactly

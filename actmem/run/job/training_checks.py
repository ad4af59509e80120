""":func:`actmem.training_memory`'s arguments, checked before any work.

Each argument is checked alone first (type, range, known name), cheapest
first, then the rules that join two of them: the precisions' one rule
(:func:`actmem.run.moments.precision.check_precision_features`), FP8's and
offloading's (Transformer Engine's and Megatron-LM's, in their modules).
Every message names the argument, its value and what is allowed.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import NamedTuple

from ...layer.fp8 import fp8_format
from ...layer.recompute_modules import check_for_model, named_modules
from ..moments.framework import GRADIENT_BUFFERS, gradient_fusion
from ..moments.loss import LOSSES
from ..moments.mtp import check_mtp
from ..model_states.fp8_states import check_fp8_job, check_fp8_layers
from ..model_states.megatron_fsdp_checks import check_megatron_fsdp
from .megatron_option_checks import check_megatron_options
from .model import ModelConfig
from .moe_job_checks import check_moe_job
from ..moments.offload import check_offload
from ..moments.precision import AUTOCAST_DEVICES, PRECISIONS, check_precision_features
from ...validate import choice, flag, instance, integer, one_of_ints, positive_int


class CheckedRun(NamedTuple):
    """What the checks settle: k (layers per full-recomputation group),
    the FP8 format (None: off) and whether weight gradients are fused into
    the gradient buffer (:func:`actmem.run.moments.framework.gradient_fusion`)."""

    k: int
    fp8: str | None
    fusion: bool


def check_training(model, *, t, p, d, m, v, cp, schedule, sequence_parallel, recompute,
                   recompute_num_layers, recompute_modules, precision, autocast_device,
                   fused_projections, logits_bytes, loss, loss_chunk_tokens, gradient_buffer,
                   gradient_accumulation_fusion, create_attention_mask_in_dataloader,
                   transformer_engine, fp8, cpu_offloading_num_layers) -> CheckedRun:
    """Check :func:`actmem.training_memory`'s arguments (its docstring says
    what each takes) except those the later steps check before their own
    work: ep/etp (:func:`actmem.run.model_states.states.expert_data_parallel`), the
    context-parallel layout (:func:`actmem.layer.context_parallel.rank_model`),
    the GPU, the layer split and the schedule.

    Raises:
        TypeError, ValueError: the first invalid value; the message names it.
    """
    instance("model", model, ModelConfig, "actmem.PRESETS['llama2-7b']")
    for name, value in dict(t=t, p=p, d=d, m=m, v=v, cp=cp).items():
        positive_int(name, value)
    for name, value in dict(sequence_parallel=sequence_parallel,
                            create_attention_mask_in_dataloader=create_attention_mask_in_dataloader,
                            transformer_engine=transformer_engine,
                            fused_projections=fused_projections).items():
        flag(name, value)
    choice("gradient_buffer", gradient_buffer, GRADIENT_BUFFERS)
    choice("loss", loss, LOSSES)
    choice("precision", precision, PRECISIONS)
    choice("autocast_device", autocast_device, AUTOCAST_DEVICES)
    one_of_ints("logits_bytes", logits_bytes, (4, 2))
    fusion = gradient_fusion(gradient_accumulation_fusion, gradient_buffer)
    if loss_chunk_tokens is not None and loss != "fused":
        raise ValueError(f"loss_chunk_tokens={loss_chunk_tokens!r} is for loss='fused' "
                         f"(got loss={loss!r}); leave it None")
    k = positive_int("recompute_num_layers", recompute_num_layers)
    fp8 = fp8_format(fp8)
    if recompute_modules is not None:
        check_for_model(model, t, sequence_parallel, recompute, recompute_modules)
    check_offload(cpu_offloading_num_layers, L=model.L, p=p, recompute=recompute,
                  schedule=schedule)
    check_precision_features(
        precision, num_experts=model.num_experts, kv_channels=model.kv_channels,
        qk_layernorm=model.qk_layernorm, multi_latent_attention=model.multi_latent_attention,
        lora_rank=model.lora_rank, fp8=fp8, recompute_modules=recompute_modules, cp=cp,
        cpu_offloading_num_layers=cpu_offloading_num_layers, logits_bytes=logits_bytes)
    if fp8:  # Transformer Engine's checks, each kind of layer
        check_fp8_layers(model, t, sequence_parallel, recompute, fp8, recompute_modules)
    return CheckedRun(k, fp8, fusion)


def check_uneven_split(v_shaped: bool, schedule: str, uneven: dict) -> None:
    """Refuse an uneven layer split (``uneven``: :func:`actmem.split_layers`'
    options) under a V-shaped schedule, which puts the first and the last
    layers on stage 0."""
    if v_shaped and any(x is not None and x is not False for x in uneven.values()):
        raise ValueError(f"schedule={schedule!r} puts the first and the last layers on stage 0 "
                         "(a V); uneven splits are modelled for looped schedules only")


DEFAULT_RESERVE = "default"
"""``reserve``'s default: the estimate of :mod:`actmem.run.reserve` on each
stage's GPU when ``gpu_memory`` names a GPU preset, else 0."""


def reserve_bytes(reserve: int | float | str, capacity: int | None) -> int | None:
    """``reserve`` in bytes: an int is bytes (>= 0), a float a fraction in
    [0, 1) of ``capacity`` (bytes; needed then), rounded up, taken exactly
    as written (0.05 is 5/100); :data:`DEFAULT_RESERVE` is None (the
    estimate, per stage: :func:`actmem.run.reserve.default_reserve`).

    Raises:
        TypeError, ValueError: anything else; the message names ``reserve``.
    """
    if isinstance(reserve, str):
        if reserve != DEFAULT_RESERVE:
            raise ValueError(f"reserve={reserve!r}: give {DEFAULT_RESERVE!r} (the estimate "
                             "when gpu_memory names a GPU, else 0), bytes (an int) or a "
                             "fraction of gpu_memory (a float)")
        return None
    if not isinstance(reserve, numbers.Real) or isinstance(reserve, numbers.Integral):
        reserve = integer("reserve", reserve, "bytes (an int), a fraction of gpu_memory "
                                              f"(a float) or {DEFAULT_RESERVE!r}")
        if reserve < 0:
            raise ValueError(f"reserve must be >= 0 bytes, got {reserve}")
        return reserve
    if not 0 <= reserve < 1:
        raise ValueError(f"reserve={reserve}: a fraction must be in [0, 1)")
    if capacity is None:
        raise ValueError(f"reserve={reserve} is a fraction of gpu_memory; give gpu_memory "
                         "or a reserve in bytes")
    return math.ceil(Fraction(repr(float(reserve))) * capacity)  # 0.05 means 5/100 exactly


def check_fsdp2(model, *, use_torch_fsdp2, reshard_after_forward, t, p, v, ep, schedule,
                zero_stage, distributed_optimizer, gradient_buffer, precision, fp8,
                cpu_offloading_num_layers, recompute_modules):
    """Refuse what PyTorch's FSDP2 (``use_torch_fsdp2``, Megatron-LM's
    ``--use-torch-fsdp2``) does not run or :mod:`actmem.run.model_states.fsdp` does not
    model: Megatron-LM's own refusals (``arguments.py``: pipeline
    parallelism, expert parallelism, its distributed optimizer, gradient
    accumulation fusion, which needs the persistent buffer, tied
    embeddings: ``--untie-embeddings-and-output-weights``), ZeRO stages
    (FSDP2 shards the states itself), and what the FSDP2 tensor list does
    not cover (t > 1, MoE, MLA, LoRA, head widths other than h/a, query/key
    norms, FP8, precision other than bf16, offloading, named-module
    recomputation, split backward schedules).

    Raises:
        TypeError, ValueError: the message names the argument.
    """
    flag("use_torch_fsdp2", use_torch_fsdp2)
    flag("reshard_after_forward", reshard_after_forward)
    if not use_torch_fsdp2:
        if not reshard_after_forward:
            raise ValueError("reshard_after_forward=False is FSDP2's option; it needs "
                             "use_torch_fsdp2=True")
        return
    refused = dict(t=(t, 1), p=(p, 1), v=(v, 1), ep=(ep, 1), schedule=(schedule, "1f1b"),
                   zero_stage=(zero_stage, 0), distributed_optimizer=(distributed_optimizer, False),
                   gradient_buffer=(gradient_buffer, "backward"), precision=(precision, "bf16"),
                   fp8=(fp8, None), cpu_offloading_num_layers=(cpu_offloading_num_layers, 0),
                   recompute_modules=(recompute_modules, None))
    refused.update({name: (getattr(model, name), value) for name, value in (
        ("num_experts", None), ("multi_latent_attention", False), ("lora_rank", None),
        ("kv_channels", None), ("qk_layernorm", False), ("tied_embeddings", False))})
    for name, (value, allowed) in refused.items():
        if value != allowed:
            raise ValueError(
                f"{name}={value!r} with use_torch_fsdp2=True: FSDP2 is modelled with {name}="
                f"{allowed!r} (Megatron-LM refuses pipeline and expert parallelism, its "
                "distributed optimizer, gradient fusion and tied embeddings with "
                "--use-torch-fsdp2; FSDP2 "
                "shards the states itself and makes gradients in backward; "
                "actmem.run.model_states.fsdp covers dense bf16 layers at t=1)")


def check_job(job) -> None:
    """Check every option of the :class:`actmem.Job` ``job`` in the order
    :func:`actmem.training_memory` always has: each argument alone
    (:func:`check_training`), FSDP2's and Megatron-FSDP's rules, the MoE
    rules (:func:`actmem.run.job.moe_job_checks.check_moe_job`), FP8's
    recipe and parameters, multi-token prediction's rules,
    the Megatron-LM options that join others
    (:func:`actmem.run.job.megatron_option_checks.check_megatron_options`), the
    context-parallel layout, the GPU (what it runs,
    :func:`actmem.run.job.gpus.check_gpu_runs`) and its workspaces, the layer
    split, the schedule (its size first, then its rules, without building
    it), an uneven split on a V, the reserve and ``expandable_segments``, a
    fused loss's chunk; then what only the layers and the states check, by
    finding the job's shared values (:func:`actmem.run.step_setup.step_setup`, kept for
    :func:`actmem.training_memory`) and its first stage's states. A job
    that is built can be computed.

    Raises:
        TypeError, ValueError: the first invalid option; the message names it.
    """
    from ...layer.context_parallel import rank_model
    from ..schedule.schedule_rules import MAX_TIMELINE_OPERATIONS, check_schedule, check_size
    from ..schedule.stage_split import split_layers
    from ..schedule.zero_bubble import V_SHAPED
    o = dict(job.options, recompute_modules=named_modules(job.recompute_modules))
    check_training(job.model, **{name: o[name] for name in _TRAINING_CHECKED})
    check_fsdp2(job.model, **{name: o[name] for name in _FSDP2_CHECKED})
    check_megatron_fsdp(job)
    check_moe_job(job)
    check_fp8_job(job)
    check_mtp(job)
    check_megatron_options(job)
    rank_model(job.model, job.t, job.sequence_parallel, job.recompute, job.cp, job.cp_comm_type,
               job.hierarchical_context_parallel_sizes, job.precision)
    capacity = _check_gpu(job)
    uneven = {name: o[name] for name in UNEVEN}
    split_layers(job.model.L, job.p, job.v, **uneven)
    check_size(job.p, job.m, job.v, MAX_TIMELINE_OPERATIONS, "training_memory's timeline of")
    check_schedule(job.schedule, job.p, job.m, job.v, job.order,
                   job.microbatch_group_size_per_vp_stage)
    check_uneven_split(job.schedule in V_SHAPED, job.schedule, uneven)
    reserve_bytes(job.reserve, capacity)
    flag("expandable_segments", job.expandable_segments)
    flag("global_memory_buffer", job.global_memory_buffer)
    if job.loss == "fused" and job.loss_chunk_tokens is not None:
        positive_int("loss_chunk_tokens", job.loss_chunk_tokens)
    from ..peak import stage_states
    from ..step_setup import step_setup
    stage_states(step_setup(job), 0)   # the layers' and the states' own checks


def _check_gpu(job) -> int | None:
    """The GPU (what it runs, :func:`actmem.run.job.gpus.check_gpu_runs`), its
    workspaces and the Transformer Engine options that add some
    (``moe_grouped_gemm``, ``tp_comm_overlap``); returns its capacity in
    bytes, or None."""
    from ..moments.framework import workspace_bytes
    from .gpus import check_gpu_runs, find_gpu, gpu_capacity
    gpu = find_gpu(job.gpu_memory)
    check_gpu_runs(gpu, job.precision, job.model.flash_attention, job.fp8, job.fp8_recipe)
    workspace_bytes(gpu.compute_capability if gpu else (9, 0), job.cublas_workspace_config,
                    job.transformer_engine, job.moe_grouped_gemm, job.tp_comm_overlap)
    if job.tp_comm_overlap and not (job.transformer_engine and job.sequence_parallel):
        raise ValueError("tp_comm_overlap=True needs transformer_engine=True and "
                         "sequence_parallel=True: Transformer Engine's Userbuffers overlap "
                         "the sequence-parallel all-gathers and reduce-scatters (Megatron-LM's "
                         "arguments.py asserts sequence parallelism)")
    if job.moe_grouped_gemm and (job.model.num_experts is None or not job.transformer_engine):
        raise ValueError("moe_grouped_gemm=True needs an MoE model (num_experts) run with "
                         "Transformer Engine (transformer_engine=True): it is TE's grouped "
                         "GEMM of the experts")
    return None if job.gpu_memory is None else gpu_capacity(job.gpu_memory)


UNEVEN = ("stage_layers", "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
          "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")
"""The options of an uneven layer split (:func:`actmem.split_layers`)."""
_TRAINING_CHECKED = (
    "t", "p", "d", "m", "v", "cp", "schedule", "sequence_parallel", "recompute",
    "recompute_num_layers", "recompute_modules", "precision", "autocast_device",
    "fused_projections", "logits_bytes", "loss", "loss_chunk_tokens", "gradient_buffer",
    "gradient_accumulation_fusion", "create_attention_mask_in_dataloader",
    "transformer_engine", "fp8", "cpu_offloading_num_layers")
_FSDP2_CHECKED = (
    "use_torch_fsdp2", "reshard_after_forward", "t", "p", "v", "ep", "schedule", "zero_stage",
    "distributed_optimizer", "gradient_buffer", "precision", "fp8",
    "cpu_offloading_num_layers", "recompute_modules")



"""One training job as one record: the model and every option of
:func:`actmem.training_memory`, validated once, when it is built.

A :class:`Job` groups its options as the frameworks do (Megatron-LM's
``megatron/training/arguments.py`` argument groups, torchtitan's
``JobConfig`` sections): the model, parallelism, the pipeline schedule,
precision, recomputation, the model states, the framework's choices and the
GPU (:data:`GROUPS`). Each option is named as Megatron-LM's flag in
snake_case where one exists (``recompute_num_layers`` is
``--recompute-num-layers``), and documented in :func:`actmem.training_memory`.

>>> import actmem
>>> job = actmem.Job(actmem.PRESETS["llama2-7b"], t=2, p=2, d=2, m=8, gpu_memory="A100 80GB")
>>> job.with_(recompute="full").recompute
'full'
>>> actmem.training_memory(job) == actmem.training_memory(job.model, t=2, p=2, d=2, m=8,
...                                                      gpu_memory="A100 80GB")
True
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, fields, replace

from .model import ModelConfig
from .presets import MOE_PRESETS, PRESETS
from ...validate import lists_keywords, plain_fields

GROUPS = {
    "model": ("model",),
    "parallelism": ("t", "p", "d", "cp", "ep", "etp", "sequence_parallel", "cp_comm_type",
                    "hierarchical_context_parallel_sizes", "moe_hot_expert"),
    "schedule": ("m", "schedule", "v", "order", "microbatch_group_size_per_vp_stage",
                 "stage_layers",
                 "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
                 "account_for_embedding_in_pipeline_split",
                 "account_for_loss_in_pipeline_split"),
    "precision": ("precision", "accumulate_allreduce_grads_in_fp32", "fp8", "fp8_recipe",
                  "fp8_param_gather", "logits_bytes", "autocast_device", "fused_projections"),
    "recomputation": ("recompute", "recompute_num_layers", "recompute_modules",
                      "cpu_offloading_num_layers"),
    "states": ("optimizer", "accounting", "zero_stage", "distributed_optimizer",
               "num_distributed_optimizer_instances", "use_torch_fsdp2",
               "reshard_after_forward", "use_megatron_fsdp", "megatron_fsdp_main_grads_dtype",
               "ddp_bucket_size", "suggested_communication_unit_size"),
    "framework": ("loss", "loss_chunk_tokens", "cross_entropy_loss_fusion", "gradient_buffer",
                  "gradient_accumulation_fusion", "create_attention_mask_in_dataloader",
                  "transformer_engine", "global_memory_buffer", "cublas_workspace_config",
                  "moe_grouped_gemm", "defer_embedding_wgrad_compute", "wgrad_deferral_limit",
                  "tp_comm_overlap"),
    "gpu": ("gpu_memory", "reserve", "expandable_segments"),
}
"""The options of a :class:`Job` by group, in the order its repr shows them."""


@dataclass(frozen=True, repr=False)
class Job:
    """A training job: a :class:`actmem.ModelConfig` and how it is trained.

    Every field is an option of :func:`actmem.training_memory`, which
    documents it; the defaults are Megatron-LM's. Built, a Job is checked
    as ``training_memory`` checks its arguments, in the same order, so a job
    that exists can be computed.

    Raises:
        TypeError, ValueError: the first invalid option, named with its
            value and what is allowed; an unknown option, with the list of
            known ones.
    """

    model: ModelConfig
    _: KW_ONLY
    # parallelism
    t: int = 1
    p: int = 1
    d: int = 1
    cp: int = 1
    ep: int = 1
    etp: int | None = None
    sequence_parallel: bool = False
    cp_comm_type: str = "p2p"
    hierarchical_context_parallel_sizes: tuple[int, int] | None = None
    moe_hot_expert: int | float = 1.0
    # schedule
    m: int = 1
    schedule: str = "1f1b"
    v: int = 1
    order: str | None = None
    microbatch_group_size_per_vp_stage: int | None = None
    stage_layers: tuple | list | None = None
    decoder_first_pipeline_num_layers: int | None = None
    decoder_last_pipeline_num_layers: int | None = None
    account_for_embedding_in_pipeline_split: bool = False
    account_for_loss_in_pipeline_split: bool = False
    # precision
    precision: str = "bf16"
    accumulate_allreduce_grads_in_fp32: bool | None = None
    fp8: str | None = None
    fp8_recipe: str = "delayed"
    fp8_param_gather: bool = False
    logits_bytes: int = 4
    autocast_device: str = "cuda"
    fused_projections: bool = True
    # recomputation
    recompute: str = "none"
    recompute_num_layers: int = 1
    recompute_modules: list[str] | tuple[str, ...] | None = None
    cpu_offloading_num_layers: int = 0
    # model states
    optimizer: str = "adam"
    accounting: str = "megatron"
    zero_stage: int = 0
    distributed_optimizer: bool = False
    num_distributed_optimizer_instances: int = 1
    use_torch_fsdp2: bool = False
    reshard_after_forward: bool = True
    use_megatron_fsdp: bool = False
    megatron_fsdp_main_grads_dtype: str = "auto"
    ddp_bucket_size: int | None = None
    suggested_communication_unit_size: int | None = None
    # framework choices (actmem.run.moments.framework)
    loss: str = "vocab_parallel"
    loss_chunk_tokens: int | None = None
    cross_entropy_loss_fusion: bool = False
    gradient_buffer: str = "persistent"
    gradient_accumulation_fusion: bool | None = None
    create_attention_mask_in_dataloader: bool = True
    transformer_engine: bool = True
    global_memory_buffer: bool = False
    cublas_workspace_config: str | None = None
    moe_grouped_gemm: bool = False
    defer_embedding_wgrad_compute: bool = False
    wgrad_deferral_limit: int = 0
    tp_comm_overlap: bool = False
    # the GPU
    gpu_memory: int | str | None = None
    reserve: int | float | str = "default"
    expandable_segments: bool = False

    def __post_init__(self):
        plain_fields(self)
        from .training_checks import check_job   # it reads the job's modules
        check_job(self)

    def with_(self, **changes) -> "Job":
        """A copy with some options, or its ``model``, changed (validated again).

        Raises:
            TypeError: an unknown option (the message lists the known ones).
            ValueError: as :class:`Job`.
        """
        refuse_unknown("Job.with_", {k: v for k, v in changes.items() if k != "model"})
        return replace(self, **changes)

    @classmethod
    def from_megatron_args(cls, argv, *, world_size: int, env: dict | None = None,
                           gpu=None) -> "Job":
        """The job of a Megatron-LM ``pretrain_gpt.py`` launch: its arguments
        (a list, or one string), its number of GPUs, the environment
        variables that change memory and the GPU (a preset name):
        :func:`actmem.run.job.megatron_args.job_from_megatron_args`, which says
        how each argument is read, and which are refused."""
        from .megatron_args import job_from_megatron_args
        return job_from_megatron_args(argv, world_size=world_size, env=env, gpu=gpu)

    @property
    def options(self) -> dict:
        """Every option but the model, by name (``training_memory``'s
        keyword arguments)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "model"}

    def changed(self) -> dict:
        """The options that differ from their defaults, by name."""
        return {name: value for name, value in self.options.items()
                if _differs(value, FIELDS[name].default)}

    def __repr__(self) -> str:
        """The job as it would be built: the model (a preset's name where it
        is one), then each group's options that differ from their defaults,
        a line per group, the group named in a comment. Every option is
        there (a default one by its absence), so the repr keys the job."""
        changed = self.changed()
        lines = [(f"model={_model_text(self.model)}", "")]
        lines += [(", ".join(f"{n}={changed[n]!r}" for n in names if n in changed), group)
                  for group, names in GROUPS.items() if any(n in changed for n in names)]
        ends = [","] * (len(lines) - 1) + [")"]
        return "Job(" + "\n    ".join(text + end + (f"  # {group}" if group else "")
                                      for (text, group), end in zip(lines, ends))


FIELDS = {f.name: f for f in fields(Job) if f.name != "_"}
"""The fields of :class:`Job`, by name."""
Job.__init__ = lists_keywords(Job.__init__)   # unknown options listed; NumPy scalars plain


def refuse_unknown(caller: str, options: dict) -> None:
    """Refuse options a :class:`Job` does not have, listing those it has.

    Raises:
        TypeError: ``{caller}() got unknown keyword argument(s) ...; it takes ...``.
    """
    unknown = [name for name in options if name not in FIELDS or name == "model"]
    if unknown:
        known = ", ".join(name for name in FIELDS if name != "model")
        raise TypeError(f"{caller}() got unknown keyword argument{'s' * (len(unknown) > 1)} "
                        f"{', '.join(unknown)}; it takes {known}")


def as_job(job, options: dict, caller: str = "training_memory") -> Job:
    """``job.with_(**options)`` for a :class:`Job`, else ``Job(job, **options)``
    (``job`` a :class:`actmem.ModelConfig`)."""
    refuse_unknown(caller, options)
    if isinstance(job, Job):
        return replace(job, **options) if options else job
    return Job(job, **options)


def _differs(value, default) -> bool:
    return value != default or type(value) is not type(default)


def _model_text(model) -> str:
    """A preset's name (``PRESETS['llama2-7b']``), or the model's fields that
    differ from their defaults (the others are the defaults)."""
    for table, presets in (("PRESETS", PRESETS), ("MOE_PRESETS", MOE_PRESETS)):
        for name, preset in presets.items():
            if model is preset or (isinstance(model, ModelConfig) and model == preset):
                return f"{table}[{name!r}]"
    if not isinstance(model, ModelConfig):
        return repr(model)
    shown = ", ".join(f"{f.name}={getattr(model, f.name)!r}" for f in fields(model)
                      if _differs(getattr(model, f.name), f.default))
    return f"ModelConfig({shown})"


__all__ = ["GROUPS", "Job", "as_job"]

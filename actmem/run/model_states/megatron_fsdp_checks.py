"""What a job with Megatron-FSDP (``use_megatron_fsdp``) must be for
:mod:`actmem.run.model_states.megatron_fsdp` to model it."""

from __future__ import annotations

from ...validate import choice, flag, positive_int, shown

MAIN_GRADS_DTYPES = ("auto", "fp32", "bf16")
"""``megatron_fsdp_main_grads_dtype``'s values (Megatron-LM's
``--megatron-fsdp-main-grads-dtype`` but fp16): ``auto`` is the parameters'
dtype."""

_NEEDED = dict(p=1, v=1, use_torch_fsdp2=False, zero_stage=0, distributed_optimizer=True,
               num_distributed_optimizer_instances=1, accounting="megatron", precision="bf16",
               fp8=None, optimizer="adam", gradient_buffer="persistent",
               accumulate_allreduce_grads_in_fp32=None, cpu_offloading_num_layers=0)
"""The options Megatron-FSDP is modelled with (:func:`check_megatron_fsdp`
says why)."""


def check_megatron_fsdp(job) -> None:
    """Check ``use_megatron_fsdp``, ``megatron_fsdp_main_grads_dtype``,
    ``ddp_bucket_size`` and ``suggested_communication_unit_size``, and
    refuse what Megatron-FSDP does not run or actmem does not model with
    it: Megatron-LM's own rules (its version 1 needs the distributed
    optimizer, and Adam or SGD: actmem models Adam, ``arguments.py``), and,
    not modelled, pipeline stages, FSDP2, ZeRO stages, several optimizer
    instances (HSDP), 16-bit precisions other than bf16, FP8, a gradient
    buffer made in backward, ``accumulate_allreduce_grads_in_fp32``
    (Megatron-FSDP's own dtype option replaces it), offloading, full
    recomputation, LoRA and multi-token prediction.

    Raises:
        TypeError, ValueError: the message names the option, its value
            and what is allowed.
    """
    dtype = choice("megatron_fsdp_main_grads_dtype", job.megatron_fsdp_main_grads_dtype,
                   MAIN_GRADS_DTYPES)
    size, unit = job.ddp_bucket_size, job.suggested_communication_unit_size
    for name, value in (("ddp_bucket_size", size), ("suggested_communication_unit_size", unit)):
        if value is not None:
            positive_int(name, value)
    if not flag("use_megatron_fsdp", job.use_megatron_fsdp):
        for name, value, default in (("megatron_fsdp_main_grads_dtype", dtype, "auto"),
                                     ("ddp_bucket_size", size, None),
                                     ("suggested_communication_unit_size", unit, None)):
            if value != default:
                raise ValueError(f"{name}={shown(value)} is Megatron-FSDP's; it needs "
                                 f"use_megatron_fsdp=True (or leave it {default!r})")
        return
    given = {name: getattr(job, name) for name in _NEEDED}
    given.update(full_recomputation=job.recompute == "full", lora_rank=job.model.lora_rank,
                 mtp_num_layers=job.model.mtp_num_layers)
    needed = dict(_NEEDED, full_recomputation=False, lora_rank=None, mtp_num_layers=None)
    wrong = {name: value for name, value in given.items() if value != needed[name]}
    if wrong:
        name, value = next(iter(wrong.items()))
        raise ValueError(
            f"{name}={shown(value)} with use_megatron_fsdp=True: Megatron-FSDP is modelled "
            f"with {name}={needed[name]!r} (Megatron-LM's version 1 runs on its distributed "
            "optimizer with Adam; actmem.run.model_states.megatron_fsdp covers one pipeline "
            "stage in bf16 without FP8, HSDP, offloading, full recomputation, LoRA or "
            "multi-token prediction)")

"""Rules that join two options of a :class:`actmem.Job` where an option
mirrors a Megatron-LM flag with conditions of its own: the optimizer, the
gradient buffer's dtype, the embedding's deferred weight gradients, the
compiled cross-entropy. :func:`actmem.run.job.training_checks.check_job` calls them."""

from __future__ import annotations

from ..moments.framework import gradient_fusion
from ..moments.precision import SIXTEEN_BITS
from ..model_states.states import OPTIMIZERS
from ...validate import choice, flag, non_negative_int


def check_megatron_options(job) -> None:
    """Check the job's Megatron-LM options that depend on others.

    Raises:
        TypeError, ValueError: the first invalid option; the message names it
            and what it needs.
    """
    _optimizer(job)
    _gradient_dtype(job)
    _deferral(job)
    if flag("cross_entropy_loss_fusion", job.cross_entropy_loss_fusion) and \
            job.precision != "bf16":
        raise ValueError(f"cross_entropy_loss_fusion=True with precision={job.precision!r}: "
                         "Megatron-LM's compiled loss returns a bfloat16 gradient "
                         "(fused_cross_entropy.py: calculate_gradients); it is modelled under "
                         "precision='bf16'")


def _deferral(job) -> None:
    """``defer_embedding_wgrad_compute`` with Megatron-LM's rules
    (``model_parallel_config.py``: pipeline parallelism, gradient
    accumulation fusion) on its schedules; ``wgrad_deferral_limit`` >= 0,
    and 0 without the deferral."""
    limit = non_negative_int("wgrad_deferral_limit", job.wgrad_deferral_limit)
    if not flag("defer_embedding_wgrad_compute", job.defer_embedding_wgrad_compute):
        if limit:
            raise ValueError(f"wgrad_deferral_limit={limit} limits "
                             "defer_embedding_wgrad_compute, which is False; leave it 0")
        return
    fusion = gradient_fusion(job.gradient_accumulation_fusion, job.gradient_buffer)
    if job.p == 1 or not fusion or job.schedule not in ("1f1b", "interleaved"):
        raise ValueError(
            "defer_embedding_wgrad_compute=True needs p > 1, gradient accumulation fusion "
            "and Megatron-LM's schedule, '1f1b' or 'interleaved' (model_parallel_config.py; "
            f"got p={job.p}, gradient fusion {fusion}, schedule={job.schedule!r})")


def _gradient_dtype(job) -> None:
    """``accumulate_allreduce_grads_in_fp32``: None (Megatron-LM's rule), or a
    bool where it chooses Megatron-LM's gradient buffer: precision bf16 or
    fp16 with accounting "megatron" and no FSDP2."""
    value = job.accumulate_allreduce_grads_in_fp32
    if value is None:
        return
    flag("accumulate_allreduce_grads_in_fp32", value)
    if job.precision not in SIXTEEN_BITS or job.accounting != "megatron" or job.use_torch_fsdp2:
        raise ValueError(
            f"accumulate_allreduce_grads_in_fp32={value!r} chooses the dtype of Megatron-LM's "
            "gradient buffer: it needs precision 'bf16' or 'fp16', accounting='megatron' and "
            f"use_torch_fsdp2=False (got precision={job.precision!r}, accounting="
            f"{job.accounting!r}, use_torch_fsdp2={job.use_torch_fsdp2!r}); leave it None")


def _optimizer(job) -> None:
    """``optimizer``: Adam, or Muon as modelled (:mod:`actmem.run.model_states.muon`):
    Megatron-LM's accounting under bf16, on one tensor-parallel rank, without
    the distributed optimizer, FSDP2, FP8 or LoRA."""
    if choice("optimizer", job.optimizer, OPTIMIZERS) == "adam":
        return
    model = job.model
    given = dict(accounting=job.accounting, precision=job.precision, t=job.t,
                 etp=job.etp, distributed_optimizer=job.distributed_optimizer,
                 use_torch_fsdp2=job.use_torch_fsdp2, fp8=job.fp8, lora_rank=model.lora_rank)
    needed = dict(accounting="megatron", precision="bf16", t=1,
                  etp=None if job.etp is None else 1, distributed_optimizer=False,
                  use_torch_fsdp2=False, fp8=None, lora_rank=None)
    wrong = {k: v for k, v in given.items() if v != needed[k]}
    if wrong:
        raise ValueError(
            f"optimizer='muon' with {', '.join(f'{k}={v!r}' for k, v in wrong.items())}: actmem "
            "models Megatron-LM's Muon with accounting='megatron', precision='bf16' "
            "(Megatron-LM refuses fp16), t=1 and whole experts (the tensor-parallel "
            "Newton-Schulz of --muon-tp-mode is not modelled), no distributed optimizer "
            "(Megatron-LM turns it into a layer-wise optimizer of whole parameters per rank, "
            "not modelled), no FSDP2, FP8 or LoRA")

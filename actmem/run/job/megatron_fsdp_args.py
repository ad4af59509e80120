"""``--use-megatron-fsdp`` and its options, read as Megatron-LM d98e8a64
reads them (``megatron/training/arguments.py``, ``training.py``:
resolve_ddp_bucket_size), into a :class:`actmem.Job`'s Megatron-FSDP
options (:mod:`actmem.run.model_states.megatron_fsdp`)."""

from __future__ import annotations

BUCKET_FLOOR = 40_000_000
"""Elements: ``resolve_ddp_bucket_size``'s default, ``max(40_000_000,
1_000_000 * dp_cp)``."""

_MODELLED = (("--megatron-fsdp-version", "megatron_fsdp_version", 1),
             ("--data-parallel-sharding-strategy", "data_parallel_sharding_strategy",
              "optim_grads_params"),
             ("--megatron-fsdp-main-params-dtype", "megatron_fsdp_main_params_dtype", "fp32"),
             ("--ddp-num-buckets", "ddp_num_buckets", None))
"""(flag, dest, the one value modelled) of the options that change
Megatron-FSDP in ways actmem does not model."""


def megatron_fsdp_options(a: dict, dp_cp: int) -> dict:
    """The Job options of a launch with ``--use-megatron-fsdp`` (none
    without): the distributed optimizer (version 1 turns it on), the main
    gradients' dtype, the resolved bucket size and the communication unit;
    ``accumulate_allreduce_grads_in_fp32`` is left to Megatron-FSDP's own
    dtype options.

    Raises:
        ValueError: an option modelled with one value only, given another,
            or a gradient communication dtype other than the main
            gradients'; the message names the flag.
    """
    if not a["use_megatron_fsdp"]:
        return {}
    for flag, dest, value in _MODELLED:
        if a[dest] != value:
            raise ValueError(f"{flag} {a[dest]} with --use-megatron-fsdp: actmem models "
                             f"Megatron-FSDP with {flag} {value} (version 1, sharding "
                             "optim_grads_params, fp32 main parameters, buckets by size)")
    main, comm = a["megatron_fsdp_main_grads_dtype"], a["megatron_fsdp_grad_comm_dtype"]
    if comm not in ("auto", main) and not (main == "auto" and comm == "bf16" and a["bf16"]):
        raise ValueError(f"--megatron-fsdp-grad-comm-dtype {comm} with "
                         f"--megatron-fsdp-main-grads-dtype {main}: a communication dtype "
                         "other than the main gradients' adds buffers actmem does not model")
    size = None
    if a["overlap_grad_reduce"]:
        size = a["ddp_bucket_size"] or max(BUCKET_FLOOR, 1_000_000 * dp_cp)
    return dict(use_megatron_fsdp=True, distributed_optimizer=True,
                accumulate_allreduce_grads_in_fp32=None, megatron_fsdp_main_grads_dtype=main,
                ddp_bucket_size=size,
                suggested_communication_unit_size=a["suggested_communication_unit_size"])

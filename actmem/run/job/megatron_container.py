"""What NGC's PyTorch container of a Megatron-LM launch decides
(``NVIDIA_PYTORCH_VERSION``, which the container sets: it fixes the PyTorch
and Transformer Engine versions): the cuBLAS workspace on Blackwell, and
where the compiled cross-entropy is modelled. Read by
:mod:`actmem.run.job.megatron_fields`."""

from __future__ import annotations


def cublas_workspace_config(a: dict, env: dict, gpu) -> str | None:
    """PyTorch's ``CUBLAS_WORKSPACE_CONFIG``: the environment's;
    ``:4096:8`` under ``--deterministic-mode``, which sets it where the
    launch does not (``megatron/training/determinism.py``); ``:4096:2:16:8``
    on a Blackwell GPU (compute capability 10.x, 12.x) in an NGC PyTorch
    container before 26.03 (``NVIDIA_PYTORCH_VERSION``): PyTorch's
    ``parseChosenWorkspaceSize`` gave 32 MiB to compute capability 9.0 alone
    until pytorch#175344 (merged 2026-02-19; the first container with it is
    inferred from that date, and Megatron-LM's GB200 golden values agree: the
    runs whose memory series CI last wrote in its 25.11 and 26.02 containers
    measure the 8 MiB workspaces, those written in 26.04 the 32 MiB ones);
    None otherwise (actmem's default for the GPU,
    :func:`actmem.run.moments.framework.default_cublas_workspace_config`)."""
    from .gpus import find_gpu
    if env.get("CUBLAS_WORKSPACE_CONFIG"):
        return env["CUBLAS_WORKSPACE_CONFIG"]
    if a["deterministic_mode"]:
        return ":4096:8"
    found = find_gpu(gpu)
    if found and found.compute_capability and found.compute_capability[0] in (10, 12) \
            and _container(env) < (26, 3):
        return ":4096:2:16:8"
    return None


def check_compiled_loss(a: dict, env: dict) -> None:
    """Refuse ``--cross-entropy-loss-fusion`` in an NGC container before 25.11:
    there Megatron-LM's CI (its A100 golden values, written in 25.09) measured
    the compiled loss holding 8 bytes per logit more than the unfused loss,
    twice the fp32 clone that PyTorch 2.9.0, 2.10 and 2.13's inductor make
    (:func:`actmem.loss_bytes`; the same buffers in their generated code),
    and the cause was not found on CPU."""
    if a["cross_entropy_loss_fusion"] and _container(env) < (25, 11):
        raise ValueError(f"--cross-entropy-loss-fusion True: refused in NGC's PyTorch container "
                         f"{env['NVIDIA_PYTORCH_VERSION']} (NVIDIA_PYTORCH_VERSION): Megatron-LM's "
                         "CI measured its compiled loss there holding an fp32 logits tensor "
                         "more than PyTorch 2.9-2.13 make, for a cause not found; modelled "
                         "from 25.11 on")


def _container(env: dict) -> tuple[int, int]:
    """``NVIDIA_PYTORCH_VERSION`` as (year, month); (99, 12) when unset."""
    text = env.get("NVIDIA_PYTORCH_VERSION")
    if text is None:
        return (99, 12)
    parts = text.split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts) or not 1 <= int(parts[1]) <= 12:
        raise ValueError(f"environment variable NVIDIA_PYTORCH_VERSION={text!r}: NGC's "
                         "container version YY.MM is expected, e.g. '25.09'")
    return (int(parts[0]), int(parts[1]))

"""A training framework's choices that decide bytes, as named options with a source.

The ledger (:mod:`actmem.ledger`) says what a layer keeps for backward; the
model states (:mod:`actmem.states`) what the optimizer keeps. What else is
alive, and when, depends on how the framework is written. Each choice here is
an option with the code it follows; :mod:`actmem.timeline` is its only reader.
The defaults reproduce Megatron-LM, the paper's framework.

* ``loss``: how the cross-entropy handles the logits (``LOSSES``):

  - ``"vocab_parallel"``: Megatron-LM ``megatron/core/tensor_parallel/
    cross_entropy.py`` (``_VocabParallelCrossEntropy``). ``calculate_logits_max``
    makes an fp32 copy of the 16-bit logits (``.float()``) while they are still
    alive; subtraction, ``exp`` and division then work in place, and the fp32
    softmax is saved for backward, whose gradient is written into it in place
    and cast back to the logits' dtype for the output layer.
  - ``"torch"``: PyTorch's eager ``F.cross_entropy`` (``log_softmax`` then
    ``nll_loss``) in the logits' dtype: the log-probabilities are saved; in
    backward ``nll_loss_backward`` writes their gradient and
    ``_log_softmax_backward_data`` the logits' gradient, while the saved
    log-probabilities are alive (``aten/src/ATen/native/LossNLL.cpp``,
    ``SoftMax.cpp``).
  - ``"fused"``: a loss that never materialises the logits (cut cross-entropy,
    Wijmans et al. 2024, arXiv 2411.09009): it keeps the log-sum-exp, 4 bytes
    per token.

* ``gradient_buffer`` (``GRADIENT_BUFFERS``): ``"persistent"``, Megatron-LM's
  ``DistributedDataParallel`` allocates its gradient buffer when the model is
  built (``megatron/core/distributed/param_and_grad_buffer.py``), so it is alive
  in the forward pass; ``"backward"``, plain PyTorch with
  ``optimizer.zero_grad(set_to_none=True)``: ``AccumulateGrad`` creates each
  ``.grad`` during the first backward pass of the step.

* Workspaces, allocated once through PyTorch's caching allocator:
  :func:`torch_cublas_workspace` and :func:`te_cublas_workspace`.

* ``create_attention_mask_in_dataloader`` (Megatron-LM's flag, default True):
  the data loader's boolean causal mask, ``b*s*s`` bytes, is moved to the GPU
  with every micro-batch on the stages that load data (the first and the last,
  ``megatron/core/utils.py`` ``get_batch_on_this_tp_rank``) and is alive while
  that micro-batch's forward step runs.
"""

from __future__ import annotations

import re

from ..validate import choice

LOSSES = ("vocab_parallel", "torch", "fused")
"""Loss implementations (module docstring)."""
GRADIENT_BUFFERS = ("persistent", "backward")
"""When gradient memory exists: from the start, or from the first backward."""
MiB = 2**20


def loss_bytes(loss: str, logits: int, tokens: int, logits_dtype: int = 2,
               loss_dtype: int = 4) -> dict[str, int]:
    """Bytes the loss holds at its three moments, for ``logits`` elements on
    this GPU (``s*b*V/t``, V padded) and ``tokens`` tokens (``s*b``).

    Args:
        loss: one of :data:`LOSSES`.
        logits: elements of the logits on this GPU. tokens: tokens per
            micro-batch.
        logits_dtype: bytes per element of the output layer's logits (2:
            16-bit activations, sec. 4.1). loss_dtype: bytes per element the
            loss computes in and keeps (4: fp32; ``"vocab_parallel"`` always
            4; ``"torch"`` 4 under autocast or in fp32, 2 in bf16).

    Returns:
        ``{"forward": ..., "saved": ..., "backward": ...}``: the most alive
        inside the loss's forward (the logits included), what it keeps until
        backward, and the most alive inside its backward (the saved bytes
        included).

    Raises:
        ValueError: an unknown ``loss``, a dtype not 2 or 4, or
            ``"vocab_parallel"`` with ``loss_dtype=2``.
    """
    choice("loss", loss, LOSSES)
    for name, value in (("logits_dtype", logits_dtype), ("loss_dtype", loss_dtype)):
        if isinstance(value, bool) or value not in (2, 4):
            raise ValueError(f"{name} must be 2 or 4 bytes, got {value!r}")
    if loss == "fused":
        return {"forward": 4 * tokens, "saved": 4 * tokens, "backward": 4 * tokens}
    if loss == "vocab_parallel" and loss_dtype != 4:
        raise ValueError("loss='vocab_parallel' keeps fp32 logits (logits_bytes=4): "
                         "Megatron-LM's cross-entropy always calls .float(); for 16-bit "
                         "logits use loss='torch'")
    cast = loss_dtype if loss_dtype != logits_dtype else 0   # .float() of fp32 is itself
    if loss == "vocab_parallel":
        return {"forward": (logits_dtype + cast) * logits, "saved": 4 * logits,
                "backward": (4 + logits_dtype * bool(cast)) * logits}
    # torch: the logits, their cast copy and the log-probs in forward; the
    # saved log-probs, their gradient and the logits' gradient in backward
    return {"forward": (logits_dtype + cast + loss_dtype) * logits,
            "saved": loss_dtype * logits, "backward": 3 * loss_dtype * logits}


def torch_cublas_workspace(compute_capability: tuple[int, int] | None = (9, 0),
                           cublas_workspace_config: str | None = None) -> int:
    """Bytes of one cuBLAS workspace PyTorch allocates per (handle, stream).

    PyTorch ``aten/src/ATen/cuda/CublasHandlePool.cpp``,
    ``parseChosenWorkspaceSize``: the environment variable
    ``CUBLAS_WORKSPACE_CONFIG`` (``":SIZE_KiB:COUNT"`` pairs, summed), or by
    default ``:4096:8`` (32 MiB) on compute capability 9.x to 12.x and
    ``:4096:2:16:8`` (8 MiB + 128 KiB) before; on ROCm (``compute_capability``
    None: the MI300X, gfx942) 128 MiB. Handles are per thread, so a
    training step has two: the Python thread's (forward) and autograd's device
    thread (backward).

    Raises:
        ValueError: a config with no ``:SIZE:COUNT`` pair.
    """
    if cublas_workspace_config is not None:
        if not isinstance(cublas_workspace_config, str):
            raise TypeError(f"cublas_workspace_config must be a string such as ':4096:8' "
                            f"or None, got {cublas_workspace_config!r}")
        pairs = re.findall(r":([0-9]+):([0-9]+)", cublas_workspace_config)
        if not pairs:
            raise ValueError(f"cublas_workspace_config must be ':SIZE:COUNT' pairs in KiB "
                             f"(e.g. ':4096:8'), got {cublas_workspace_config!r}")
        return sum(int(size) * 1024 * int(count) for size, count in pairs)
    if compute_capability is None:
        return 128 * MiB
    if 9 <= compute_capability[0] <= 12:
        return 4096 * 1024 * 8
    return 4096 * 1024 * 2 + 16 * 1024 * 8


def te_cublas_workspace(compute_capability: tuple[int, int] | None = (9, 0)) -> int:
    """Bytes of Transformer Engine's cuBLASLt workspace (one per GPU).

    Transformer Engine ``transformer_engine/pytorch/module/base.py``,
    ``get_cublas_workspace_size_bytes``: 32 MiB on compute capability 9.0 and
    newer, 4 MiB before. On ROCm (``compute_capability`` None) AMD's fork is
    not modelled: 0 bytes, so pass ``transformer_engine=False`` knowingly.
    """
    if compute_capability is None:
        return 0
    return 32 * MiB if compute_capability[0] >= 9 else 4 * MiB


def workspace_bytes(compute_capability: tuple[int, int] | None = (9, 0),
                    cublas_workspace_config: str | None = None,
                    transformer_engine: bool = True) -> dict[str, int]:
    """Persistent workspaces on one GPU, by name (bytes): PyTorch's two cuBLAS
    workspaces (forward and backward threads) and, with Transformer Engine,
    its cuBLASLt workspace. ``compute_capability``: the NVIDIA GPU's, or None
    for an AMD GPU (ROCm)."""
    one = torch_cublas_workspace(compute_capability, cublas_workspace_config)
    parts = {"PyTorch cuBLAS workspace (forward thread)": one,
             "PyTorch cuBLAS workspace (autograd thread)": one}
    if transformer_engine:
        parts["Transformer Engine cuBLASLt workspace"] = te_cublas_workspace(compute_capability)
    return parts

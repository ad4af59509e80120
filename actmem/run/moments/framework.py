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
    ``cross_entropy_loss_fusion`` (Megatron-LM's ``--cross-entropy-loss-fusion``,
    ``megatron/core/fusions/fused_cross_entropy.py``) runs the same steps as
    functions compiled by ``torch.compile`` (``megatron/core/jit.py``:
    jit_fuser): the forward keeps the same bytes, but in backward the
    compiled ``calculate_gradients`` does not update the saved softmax in
    place: its ``grad_2d[arange, target] -= update`` on a view of that
    input is lowered as ``index_put`` of a clone (inductor reinplaces an
    ``index_put`` only when a later ``copy_`` writes that op's own result
    back, and here the ``mul_`` result is written back), a second fp32
    logits tensor beside the softmax and the bf16 gradient it returns
    (``.to(torch.bfloat16)``). Found in inductor's generated code for its C++
    and its Triton scheduler alike (the same buffers), and measured on CPU:
    6, 4 and 10 bytes per logit at the three moments, against 6, 4, 6
    unfused.
  - ``"torch"``: PyTorch's eager ``F.cross_entropy`` (``log_softmax`` then
    ``nll_loss``) in the logits' dtype: the log-probabilities are saved; in
    backward ``nll_loss_backward`` writes their gradient and
    ``_log_softmax_backward_data`` the logits' gradient, while the saved
    log-probabilities are alive (``aten/src/ATen/native/LossNLL.cpp``,
    ``SoftMax.cpp``).
  - ``"fused"``: the output layer and the loss in one, never keeping the
    logits (cut cross-entropy, Wijmans et al. 2024, arXiv 2411.09009): it
    keeps the fp32 log-sum-exp, 4 bytes per token, and recomputes the logits
    in backward; the logits of one chunk of tokens are materialised at a
    time (Liger-Kernel's chunks, :func:`fused_loss_chunk`), in the logits'
    dtype and as an fp32 copy, and its backward makes the output layer's
    input and weight gradients.

* ``gradient_buffer`` (``GRADIENT_BUFFERS``): ``"persistent"``, Megatron-LM's
  ``DistributedDataParallel`` allocates its gradient buffer when the model is
  built (``megatron/core/distributed/param_and_grad_buffer.py``), so it is alive
  in the forward pass; ``"backward"``, plain PyTorch with
  ``optimizer.zero_grad(set_to_none=True)``: ``AccumulateGrad`` creates each
  ``.grad`` during the first backward pass of the step.

* ``gradient_accumulation_fusion`` (Megatron-LM's flag, on by default):
  ``LinearWithGradAccumulationAndAsyncCommunication.backward``
  (``megatron/core/tensor_parallel/layers.py``) adds each weight gradient
  into the fp32 ``main_grad`` inside the GEMM (``wgrad_gemm_accum_fp32``), so
  no weight-gradient tensor is made (Transformer Engine's ``get_dummy_wgrad``
  hands autograd one reused dummy). Without it (``False``, and always
  without a persistent buffer) a linear layer's weight gradient is a tensor
  autograd passes to ``AccumulateGrad``: the MLP's sits beside its input
  gradient, and a tied output weight's waits for the embedding's
  (:mod:`actmem.run.moments.timeline`).

* Workspaces, allocated once through PyTorch's caching allocator:
  :func:`torch_cublas_workspace` and :func:`te_cublas_workspace`, and
  Megatron-LM's global memory buffer under its local layers
  (:func:`megatron_global_buffer`).

* ``create_attention_mask_in_dataloader`` (Megatron-LM's flag, default True):
  the data loader's boolean causal mask, ``b*s*s`` bytes, is moved to the GPU
  with every micro-batch on the stages that load data (the first and the last,
  ``megatron/core/utils.py`` ``get_batch_on_this_tp_rank``) and is alive while
  that micro-batch's forward step runs.
"""

from __future__ import annotations

import re

from ...validate import (choice, compute_capability as capability, flag, lists_keywords,
                        non_negative_int, one_of_ints, optional, positive_int, shown)

LOSSES = ("vocab_parallel", "torch", "fused")
"""Loss implementations (module docstring)."""
GRADIENT_BUFFERS = ("persistent", "backward")
"""When gradient memory exists: from the start, or from the first backward."""
MiB = 2**20


@lists_keywords
def loss_bytes(loss: str, logits: int, tokens: int, logits_dtype: int = 2,
               loss_dtype: int = 4, chunk: int | None = None,
               output_gradients: int = 0,
               cross_entropy_loss_fusion: bool = False) -> dict[str, int]:
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
        chunk: ``"fused"`` only: tokens per chunk whose logits are
            materialised (:func:`fused_loss_chunk`; None: none, as cut
            cross-entropy's kernel keeps its blocks on chip). A chunk of
            more than ``tokens`` holds ``tokens``, as ``chunk == tokens``:
            a chunked loss takes ``min(chunk, tokens)`` rows at a time (its
            last, here its only, chunk has the tokens there are;
            :mod:`actmem.measure.step_losses`, ``range(0, x.size(0), chunk)``;
            Liger-Kernel's ``end_idx = min((chunk_id + 1) * chunk_size, BT)``).
            output_gradients: ``"fused"`` only:
            bytes of the output layer's input and weight gradients, which
            the fused loss's backward makes.
        cross_entropy_loss_fusion: ``"vocab_parallel"`` with 16-bit logits
            only: Megatron-LM's compiled cross-entropy, whose backward
            holds an fp32 clone of the softmax (module docstring).

    Returns:
        ``{"forward": ..., "saved": ..., "backward": ...}``: the most alive
        inside the loss's forward (the logits included), what it keeps until
        backward, and the most alive inside its backward (the saved bytes
        included).

    Raises:
        TypeError: a size or dtype that is not an int.
        ValueError: an unknown ``loss``, a dtype not 2 or 4, ``logits`` or
            ``tokens`` < 1, ``chunk`` < 1, ``output_gradients`` < 0, a
            ``chunk`` or non-zero ``output_gradients`` with a loss other
            than ``"fused"`` (which would ignore them), or
            ``"vocab_parallel"`` with ``loss_dtype=2``, or
            ``cross_entropy_loss_fusion`` without ``"vocab_parallel"`` and
            16-bit logits (its backward returns bf16).
    """
    choice("loss", loss, LOSSES)
    logits, tokens = positive_int("logits", logits), positive_int("tokens", tokens)
    logits_dtype = one_of_ints("logits_dtype", logits_dtype, (2, 4))
    loss_dtype = one_of_ints("loss_dtype", loss_dtype, (2, 4))
    chunk = optional(positive_int, "chunk", chunk)
    output_gradients = non_negative_int("output_gradients", output_gradients)
    if flag("cross_entropy_loss_fusion", cross_entropy_loss_fusion) and (
            loss != "vocab_parallel" or logits_dtype != 2):
        raise ValueError(f"cross_entropy_loss_fusion=True is Megatron-LM's compiled "
                         f"vocab-parallel loss over 16-bit logits (got loss={loss!r}, "
                         f"logits_dtype={logits_dtype}); leave it False")
    for name, value in (("chunk", chunk), ("output_gradients", output_gradients or None)):
        if value is not None and loss != "fused":
            raise ValueError(f"{name}={value!r} is for loss='fused' only (got loss={loss!r}, "
                             f"which would ignore it); leave {name} out")
    if loss == "fused":
        # one chunk's logits and their fp32 copy; per token the fp32
        # log-sum-exp it keeps and, in forward, the fp32 target logit; a
        # chunk holds at most the tokens there are
        window = (logits_dtype + (4 if logits_dtype != 4 else 0)) * min(chunk or 0, tokens) * (
            logits // tokens)
        return {"forward": 8 * tokens + window, "saved": 4 * tokens,
                "backward": 4 * tokens + window + output_gradients}
    if loss == "vocab_parallel" and loss_dtype != 4:
        raise ValueError("loss='vocab_parallel' keeps fp32 logits (logits_bytes=4): "
                         "Megatron-LM's cross-entropy always calls .float(); for 16-bit "
                         "logits use loss='torch'")
    cast = loss_dtype if loss_dtype != logits_dtype else 0   # .float() of fp32 is itself
    if loss == "vocab_parallel":   # compiled: an fp32 clone in backward
        return {"forward": (logits_dtype + cast) * logits, "saved": 4 * logits,
                "backward": (4 + logits_dtype * bool(cast) + 4 * cross_entropy_loss_fusion)
                * logits}
    # torch: the logits, their cast copy and the log-probs in forward; the
    # saved log-probs, their gradient and the logits' gradient in backward
    return {"forward": (logits_dtype + cast + loss_dtype) * logits,
            "saved": loss_dtype * logits, "backward": 3 * loss_dtype * logits}


def gradient_fusion(gradient_accumulation_fusion: bool | None, gradient_buffer: str) -> bool:
    """Whether weight gradients are fused into the gradient buffer: the
    option, or by default Megatron-LM's (on) with the persistent buffer.

    Raises:
        TypeError: not a bool or None. ValueError: ``True`` without the
            persistent buffer, whose ``main_grad`` the fused GEMM writes.
    """
    if gradient_accumulation_fusion is None:
        return gradient_buffer == "persistent"
    if not isinstance(gradient_accumulation_fusion, bool):
        raise TypeError(f"gradient_accumulation_fusion must be True, False or None, "
                        f"got {shown(gradient_accumulation_fusion)}")
    if gradient_accumulation_fusion and gradient_buffer != "persistent":
        raise ValueError(f"gradient_accumulation_fusion=True contradicts gradient_buffer="
                         f"{gradient_buffer!r}: the fused GEMM adds into the persistent "
                         "buffer's main_grad; use gradient_buffer='persistent' or False")
    return gradient_accumulation_fusion


def fused_loss_chunk(tokens: int, vocab: int, h: int) -> int:
    """Tokens per chunk of a fused linear + cross-entropy loss whose chunk's
    logits are about the size of its input: Liger-Kernel's rule
    (``src/liger_kernel/ops/fused_linear_cross_entropy.py``,
    ``fused_linear_cross_entropy_forward``): ``next_power_of_2(ceil(tokens /
    ceil(V / h)))``, at most ``tokens``.

    Args:
        tokens: tokens per micro-batch (``s*b``). vocab: the vocabulary on
            this GPU (``V/t``, padded). h: hidden size.

    >>> fused_loss_chunk(4096 * 4, 32000, 4096)   # Liger-Kernel's example
    2048
    """
    growth = -(-vocab // h)
    return min(tokens, 1 << (-(-tokens // growth) - 1).bit_length())


def default_cublas_workspace_config(compute_capability: tuple[int, int] | None = (9, 0)) -> str:
    """PyTorch's default ``CUBLAS_WORKSPACE_CONFIG`` for a GPU (PyTorch
    ``aten/src/ATen/cuda/CublasHandlePool.cpp``, ``parseChosenWorkspaceSize``):
    ``":4096:8"`` (32 MiB) on compute capability 9.x to 12.x, ``":4096:2:16:8"``
    (8 MiB + 128 KiB) before; on ROCm (``compute_capability`` None: the MI300X,
    gfx942) hipBLAS's 128 MiB, written ``":131072:1"``."""
    if compute_capability is None:
        return ":131072:1"
    return ":4096:8" if 9 <= compute_capability[0] <= 12 else ":4096:2:16:8"


def torch_cublas_workspace(compute_capability: tuple[int, int] | None = (9, 0),
                           cublas_workspace_config: str | None = None) -> int:
    """Bytes of one cuBLAS workspace PyTorch allocates per (handle, stream):
    the environment variable ``CUBLAS_WORKSPACE_CONFIG`` (``":SIZE_KiB:COUNT"``
    pairs, summed), or :func:`default_cublas_workspace_config`. Handles are
    per thread, so a training step has two: the Python thread's (forward) and
    autograd's device thread (backward).

    Raises:
        TypeError: a config that is not a string. ValueError: a config
            that is not, as a whole, one or more ``:SIZE:COUNT`` pairs of
            decimal digits (CUDA's documented form: ``":4096:8"``,
            ``":4096:2:16:8"``; nothing before, between or after), or a
            SIZE or COUNT above 2**31 - 1 (PyTorch reads each with
            ``std::stoi``, which refuses them).
    """
    config = cublas_workspace_config
    if config is None:
        config = default_cublas_workspace_config(compute_capability)
    if not isinstance(config, str):
        raise TypeError(f"cublas_workspace_config must be a string such as ':4096:8' "
                        f"or None, got {shown(config)}")
    numbers = config.split(":")[1:]
    if (not re.fullmatch(r"(:[0-9]+:[0-9]+)+", config)
            or any(len(n.lstrip("0")) > 10 or int(n) > 2**31 - 1 for n in numbers)):
        raise ValueError(f"cublas_workspace_config must be one or more ':SIZE:COUNT' pairs "
                         f"and nothing else, SIZE in KiB and COUNT each a whole number up "
                         f"to 2**31 - 1 (e.g. ':4096:8' or ':4096:2:16:8'), got {shown(config)}")
    return sum(int(size) * 1024 * int(count) for size, count in zip(numbers[::2], numbers[1::2]))


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


@lists_keywords
def workspace_bytes(compute_capability: tuple[int, int] | None = (9, 0),
                    cublas_workspace_config: str | None = None,
                    transformer_engine: bool = True,
                    grouped_gemm: bool = False) -> dict[str, int]:
    """Persistent workspaces on one GPU, by name (bytes): PyTorch's two cuBLAS
    workspaces (forward and backward threads) and, with Transformer Engine,
    its cuBLASLt workspace, and with its grouped GEMM (the experts'
    ``--moe-grouped-gemm``) one more per compute stream: TE's
    ``cpp_extensions/gemm.py``: get_cublas_workspace(grouped_gemm=True)
    allocates ``nvte_get_num_compute_streams()`` = 4 of them
    (``common/util/multi_stream.cpp``). ``compute_capability``: the NVIDIA
    GPU's, or None for an AMD GPU (ROCm)."""
    compute_capability = capability("compute_capability", compute_capability)
    flag("transformer_engine", transformer_engine)
    flag("moe_grouped_gemm", grouped_gemm)
    one = torch_cublas_workspace(compute_capability, cublas_workspace_config)
    parts = {"PyTorch cuBLAS workspace (forward thread)": one,
             "PyTorch cuBLAS workspace (autograd thread)": one}
    if transformer_engine:
        parts["Transformer Engine cuBLASLt workspace"] = te_cublas_workspace(compute_capability)
    if transformer_engine and grouped_gemm:
        parts["Transformer Engine grouped-GEMM workspaces (4 streams)"] = \
            TE_COMPUTE_STREAMS * te_cublas_workspace(compute_capability)
    return parts


TE_COMPUTE_STREAMS = 4
"""Transformer Engine's compute streams, one grouped-GEMM workspace each
(``transformer_engine/common/util/multi_stream.cpp``: get_num_compute_streams)."""


def megatron_global_buffer(s: int, b: int, h: int, heads: int, sequence_parallel: bool,
                           dtype_bytes: int) -> int:
    """Bytes of Megatron-LM's global memory buffer ``"mpu"`` under its local
    layers (``heads`` 0 where the attention keeps no map), allocated once and kept
    (``megatron/core/utils.py``: GlobalMemoryBuffer.get_tensor keeps the
    largest request per name and dtype).

    The local DotProductAttention (``megatron/core/transformer/dot_product_attention.py``)
    asks it for the ``baddbmm`` output, the scores of ``heads`` maps of
    ``s x s`` (b*a/t per rank); under sequence parallelism the local linear
    layers gather their ``s x b x h`` input into the same buffer
    (``megatron/core/tensor_parallel/layers.py``:
    LinearWithGradAccumulationAndAsyncCommunication). ``dtype_bytes``: the
    activations' (2 for bf16 and fp16)."""
    gathered = s * b * h if sequence_parallel else 0
    return max(b * heads * s * s, gathered) * dtype_bytes

"""A training framework's choices that decide bytes, as named options with a source.

The ledger (:mod:`actmem.ledger`) says what a layer keeps for backward; the
model states (:mod:`actmem.states`) what the optimizer keeps. What else is
alive, and when, depends on how the framework is written. Each choice here is
an option with the code it follows; :mod:`actmem.timeline` is its only reader.
The defaults reproduce Megatron-LM, the paper's framework.

* ``loss``: how the cross-entropy handles the logits, :mod:`actmem.run.moments.loss`.

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

from ...validate import compute_capability as capability, flag, lists_keywords, shown

GRADIENT_BUFFERS = ("persistent", "backward")
"""When gradient memory exists: from the start, or from the first backward."""
MiB = 2**20


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
                    grouped_gemm: bool = False, tp_comm_overlap: bool = False
                    ) -> dict[str, int]:
    """Persistent workspaces on one GPU, by name (bytes): PyTorch's two cuBLAS
    workspaces (forward and backward threads) and, with Transformer Engine,
    its cuBLASLt workspace, and with its grouped GEMM (the experts'
    ``--moe-grouped-gemm``) one more per compute stream: TE's
    ``cpp_extensions/gemm.py``: get_cublas_workspace(grouped_gemm=True)
    allocates ``nvte_get_num_compute_streams()`` = 4 of them
    (``common/util/multi_stream.cpp``); with Megatron-LM's
    ``--tp-comm-overlap`` the GEMMs that overlap their communication use
    get_cublas_workspace(ub=True), one workspace per Userbuffers stream
    (``_NUM_MAX_UB_STREAMS`` = 3) in a tensor of its own. The Userbuffers
    themselves are allocated outside PyTorch's allocator
    (``common/comm_gemm_overlap/userbuffers/userbuffers-host.cpp``:
    register_user_buffer_collective, ``cudaMalloc`` or ``cuMemCreate``), so
    they are in no peak ``torch.cuda.max_memory_allocated()`` reports.
    ``compute_capability``: the NVIDIA GPU's, or None for an AMD GPU (ROCm)."""
    compute_capability = capability("compute_capability", compute_capability)
    flag("transformer_engine", transformer_engine)
    flag("moe_grouped_gemm", grouped_gemm)
    flag("tp_comm_overlap", tp_comm_overlap)
    one = torch_cublas_workspace(compute_capability, cublas_workspace_config)
    parts = {"PyTorch cuBLAS workspace (forward thread)": one,
             "PyTorch cuBLAS workspace (autograd thread)": one}
    if transformer_engine:
        parts["Transformer Engine cuBLASLt workspace"] = te_cublas_workspace(compute_capability)
    if transformer_engine and grouped_gemm:
        parts["Transformer Engine grouped-GEMM workspaces (4 streams)"] = \
            TE_COMPUTE_STREAMS * te_cublas_workspace(compute_capability)
    if transformer_engine and tp_comm_overlap:
        parts["Transformer Engine Userbuffers GEMM workspaces (3 streams)"] = \
            UB_STREAMS * te_cublas_workspace(compute_capability)
    return parts


UB_STREAMS = 3
"""Transformer Engine's Userbuffers streams, one GEMM workspace each in one
tensor (``transformer_engine/pytorch/cpp_extensions/gemm.py``: _NUM_MAX_UB_STREAMS)."""
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

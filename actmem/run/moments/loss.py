"""How the cross-entropy handles the logits, as named options (``LOSSES``)
with the code each follows; :func:`loss_bytes` gives the bytes it holds at
its three moments, which :mod:`actmem.run.moments.timeline` reads.

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
"""

from __future__ import annotations

from ...validate import (choice, flag, lists_keywords, non_negative_int, one_of_ints, optional,
                         positive_int)

LOSSES = ("vocab_parallel", "torch", "fused")
"""Loss implementations (module docstring)."""


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

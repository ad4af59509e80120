"""The numeric precision of training, as a named option: bytes it changes.

The ledger (:mod:`actmem.ledger`) follows the paper: 16-bit activations and
16-bit weights with fp32 copies (Megatron-LM's ``--bf16``). Plain PyTorch
also trains in two other ways, and :func:`actmem.training_memory` names them
with ``precision`` (:data:`PRECISIONS`):

* ``"bf16"``: the paper's and Megatron-LM's (``--bf16``): bf16 parameters and
  activations; ``accounting`` decides the model states.
* ``"fp16"``: Megatron-LM's ``--fp16``: every activation as in bf16 (2
  bytes; the fused softmax and the loss's ``.float()`` read and write the
  same bytes, ``megatron/core/fusions/fused_softmax.py``,
  ``tensor_parallel/cross_entropy.py``); what differs is the gradient
  buffer, which Megatron-LM keeps in the parameters' dtype, 2 bytes,
  unless ``--accumulate-allreduce-grads-in-fp32`` (``arguments.py`` turns
  that on for ``--bf16`` only; ``param_and_grad_buffer.py`` takes
  ``param.dtype`` otherwise), and the optimizer step's fp32 copies of those
  gradients (:func:`actmem.run.model_states.states.sixteen_bit_gradients`).
* ``"fp32"``: Megatron-LM without ``--fp16``/``--bf16`` (``params_dtype`` is
  ``torch.float``), or plain PyTorch in float32: every 16-bit ledger row takes
  4 bytes per element (dropout masks stay 1 byte, FlashAttention's
  log-sum-exp 4); model states are fp32 parameters, fp32 gradients and Adam's
  two fp32 moments, 4 + 4 + 8 bytes per parameter (no main copy).
* ``"autocast"``: PyTorch's automatic mixed precision, ``torch.autocast``
  with bf16 over fp32 parameters (``torch/amp/autocast_mode.py``; the op
  lists in ``aten/src/ATen/autocast_mode.h``): model states as ``"fp32"``.
  Matrix products (``linear``, ``matmul``, ``scaled_dot_product_attention``:
  ``AT_FORALL_LOWER_PRECISION_FP``) cast their inputs to bf16, so their
  outputs and the inputs they save are bf16; ``layer_norm`` (``AT_FORALL_FP32``)
  and ``softmax`` / ``log_softmax`` (``AT_FORALL_FP32_SET_OPT_DTYPE``) run in
  fp32 on CUDA (``autocast_device="cuda"``); on CPU (``"cpu"``, the lists of
  ``TORCH_LIBRARY_IMPL(aten, AutocastCPU, m)`` in ``autocast_mode.cpp``)
  softmax is not cast and stays bf16; an addition of an fp32 and a bf16
  tensor is fp32 (type promotion), so the residual stream from the fp32
  embedding stays fp32. Ledger rows: the LayerNorm inputs and a
  full-recomputation checkpoint (the residual stream) and, on CUDA, the
  softmax output take 4 bytes; a linear layer's input is a bf16 cast of the
  fp32 LayerNorm output made by each linear that reads it (one for
  Megatron-LM's fused ``linear_qkv`` / ``linear_fc1``, one per projection when
  Q, K, V or SwiGLU's gate and up are separate linears:
  ``fused_projections=False``); on CUDA without dropout the matmul with V
  saves its own bf16 cast of the fp32 softmax output.

  ``cached_cast`` (``aten/src/ATen/autocast_mode.cpp``) keeps the bf16 copy of
  each fp32 leaf parameter it casts until the autocast region ends
  (:mod:`actmem.run.moments.autocast`); a linear layer also saves its
  weight's copy for backward, so weight copies live until that layer's
  backward, biases (which no backward reads) until the region ends.
"""

from __future__ import annotations

from dataclasses import asdict

from ...layer.memory import activation_memory
from ...memo import kept_by_repr, warns_at_t1
from ...layer.recompute_modules import working_set
from ..job.model import ModelConfig
from .timeline_events import LayerMoments
from ...validate import choice, shown

PRECISIONS = ("bf16", "fp16", "fp32", "autocast")
"""Ways to train (module docstring)."""
SIXTEEN_BITS = ("bf16", "fp16")
"""Megatron-LM's mixed precisions: 16-bit parameters and activations, the
same bytes in every ledger row."""
PLAIN_PYTORCH = {
    "num_experts": (None, "MoE layers' rows and token dispatch are modelled in bf16"),
    "kv_channels": (None, "heads are h/a wide"),
    "qk_layernorm": (False, "attention has no query/key norms"),
    "multi_latent_attention": (False, "attention is the paper's"),
    "lora_rank": (None, "LoRA adapters are modelled over bf16 training"),
    "fp8": (None, "Transformer Engine's FP8 linears are modelled over bf16 training"),
    "recompute_modules": (None, "the modules' working set is modelled over 16-bit rows"),
    "cp": (1, "context parallelism runs in Transformer Engine's FlashAttention or fused "
              "attention, on 16-bit inputs"),
    "cpu_offloading_num_layers": (0, "Transformer Engine's offload is modelled over "
                                     "16-bit rows"),
    "logits_bytes": (4, "the loss keeps fp32 logits: log_softmax runs in fp32"),
}
"""What ``"fp32"`` and ``"autocast"`` model: the paper's dense layer in plain
PyTorch. Feature -> (the only value they take, why); ``"bf16"`` takes every
feature (:func:`check_precision_features`)."""
FULL_PRECISION_STATES = (4, 4, 8)
"""fp32 weights, gradients and Adam's two moments, bytes per parameter."""
AUTOCAST_DEVICES = ("cuda", "cpu")
"""Whose autocast op lists apply (module docstring)."""
AUTOCAST_FP32_ROWS = {"cuda": ("attn_norm_input", "mlp_norm_input", "softmax_output",
                               "layer_input"),
                      "cpu": ("attn_norm_input", "mlp_norm_input", "layer_input")}
"""Ledger rows that are fp32 under autocast, by device (module docstring)."""


def check_precision_features(precision: str, **features) -> None:
    """The one rule for the precisions other than ``"bf16"`` and ``"fp16"``: fp32 and
    autocast are modelled for the paper's dense layer in plain PyTorch
    (module docstring), so each feature of :data:`PLAIN_PYTORCH` (given
    as a keyword, already checked alone) must have its plain value there.

    Raises:
        ValueError: ``precision='fp32' does not model {feature}={value}
            ({why}): use {feature}={plain value}, or precision='bf16'``.
    """
    if precision in SIXTEEN_BITS:
        return
    for name, value in features.items():
        plain, why = PLAIN_PYTORCH[name]
        if value != plain:
            raise ValueError(f"precision={precision!r} does not model {name}={shown(value)} "
                             f"({why}; fp32 and autocast are modelled for the paper's dense "
                             f"layer): use {name}={plain!r}, or precision='bf16'")


def activation_bytes(precision: str) -> int:
    """Bytes per element of the activations: 4 in fp32, else 2 (bf16, fp16,
    and autocast's bf16 computation)."""
    return 4 if precision == "fp32" else 2


def sixteen_bit_buffer(precision: str, accumulate_allreduce_grads_in_fp32: bool | None) -> bool:
    """Whether Megatron-LM's gradient buffer holds 16 bits: ``arguments.py``
    turns ``accumulate_allreduce_grads_in_fp32`` on for ``--bf16`` (off with
    ``--grad-reduce-in-bf16``) and leaves it as given for ``--fp16`` (off by
    default); None is that rule. fp32 and autocast keep fp32 gradients."""
    default = precision == "bf16"
    in_fp32 = default if accumulate_allreduce_grads_in_fp32 is None \
        else accumulate_allreduce_grads_in_fp32
    return precision in SIXTEEN_BITS and not in_fp32


def full_precision_states(parameters: int, d: int, zero_stage: int,
                          distributed_optimizer: bool) -> dict[str, int]:
    """fp32 model states on one GPU, bytes: ``{"weights", "gradients",
    "optimizer"}`` for ``parameters`` on it, 4 + 4 + 8 bytes each, sharded
    over ``d`` as ZeRO (stage 1: optimizer, 2: also gradients, 3: also
    weights) or Megatron-LM's distributed optimizer (the optimizer) does,
    rounded up to whole bytes per rank."""
    cut = (zero_stage >= 3, zero_stage >= 2, zero_stage >= 1 or distributed_optimizer)
    return {name: -(-parameters * k // d) if split else parameters * k
            for name, k, split in zip(("weights", "gradients", "optimizer"),
                                      FULL_PRECISION_STATES, cut)}


def row_bytes(row, precision: str, copies: dict[str, int], device: str = "cuda") -> int:
    """Bytes of ledger ``row`` on one GPU under ``precision``; ``copies``:
    ledger key -> how many linears cast it (autocast on ``device``)."""
    if precision in SIXTEEN_BITS or row.bytes_per_element != 2:
        return row.bytes
    if precision == "fp32" or row.key in AUTOCAST_FP32_ROWS[device]:
        return 2 * row.bytes
    return copies.get(row.key, 1) * row.bytes


@kept_by_repr(256, skip=warns_at_t1)  # a frozen result, asked for at every planner change
def layer_rows(model: ModelConfig, t: int, sequence_parallel: bool, recompute: str,
               precision: str, fused_projections: bool = True,
               device: str = "cuda", layer_options: dict | None = None
               ) -> tuple[tuple[str, int], ...]:
    """(ledger key, bytes) of one layer's rows under ``precision`` (module
    docstring; ``device``: whose autocast lists; ``layer_options``: the
    run's other layer options, :meth:`actmem.ModelConfig.layer`), in the
    ledger's order."""
    choice("precision", precision, PRECISIONS)
    choice("autocast_device", device, AUTOCAST_DEVICES)
    c = model.layer(t, sequence_parallel, recompute, **(layer_options or {}))
    rows = activation_memory(**asdict(c)).rows
    copies = {} if fused_projections else {
        "qkv_input": 3, "fc1_input": 2 if c.activation == "swiglu" else 1}
    out = [(r.key, row_bytes(r, precision, copies, device)) for r in rows]
    fp32_softmax = precision == "autocast" and device == "cuda"
    if fp32_softmax and "softmax_output" in dict(out) and not c.dropout:
        at = [k for k, _ in out].index("softmax_output") + 1
        out.insert(at, ("softmax_output_bf16", dict(out)["softmax_output"] // 2))
    return tuple(out)


@kept_by_repr(256, skip=warns_at_t1)  # a frozen result; training_memory asks again and again
def precision_moments(model: ModelConfig, t: int, sequence_parallel: bool, recompute: str,
                      k: int, precision: str, fused_projections: bool = True,
                      device: str = "cuda", weight_gradients: bool = True,
                      layer_options: dict | None = None) -> LayerMoments:
    """One layer's bytes at the moments :mod:`actmem.run.moments.timeline` looks at,
    under ``precision``, from the ledger: what a
    layer keeps, its rows up to the softmax output, the pre-softmax scores
    (the matmul's output; under CUDA's autocast also ``softmax``'s fp32 copy,
    ``aten/src/ATen/native/SoftMax.cpp``: ``input_.toType(dtype)``), the
    softmax gradients ``dP`` and ``dS`` (each the softmax output's size), the
    MLP's gradients (:func:`mlp_gradients`) and the checkpoint;
    ``weight_gradients``: the MLP's weight gradient is a tensor of its own;
    ``layer_options``: as :func:`layer_rows`."""
    none = layer_rows(model, t, sequence_parallel, "none", precision, fused_projections,
                      device, layer_options)
    kept = sum(b for _, b in layer_rows(model, t, sequence_parallel, recompute, precision,
                                        fused_projections, device, layer_options))
    keys, sizes = [key for key, _ in none], dict(none)
    upto = keys.index("softmax_output") + 1 if "softmax_output" in keys else 0
    softmax = sizes.get("softmax_output", 0)
    fp32_softmax = precision == "autocast" and device == "cuda"
    return LayerMoments(kept=kept, full=sum(sizes.values()),
                        to_softmax=sum(b for _, b in none[:upto]),
                        scores=softmax + softmax // 2 if fp32_softmax else softmax,
                        score_gradients=2 * softmax,
                        mlp_gradients=mlp_gradients(model, t, sequence_parallel, precision,
                                                    weight_gradients, layer_options),
                        checkpoint=kept if recompute == "full" else 0,
                        recompute=recompute, group=k,
                        rebuilt=_modules_rebuilt(model, t, sequence_parallel, recompute,
                                                 precision, layer_options))


def _modules_rebuilt(model, t, sequence_parallel, recompute, precision, layer_options):
    """:attr:`LayerMoments.rebuilt` under named-module recomputation, else
    None. Modelled for 16-bit rows: :func:`actmem.training_memory` refuses
    ``recompute_modules`` with another precision."""
    options = layer_options or {}
    if recompute != "selective" or options.get("recompute_modules") is None \
            or precision not in SIXTEEN_BITS:
        return None
    return working_set(model.layer(t, sequence_parallel, recompute, **options))


MLP_GRADIENT_BYTES = {"bf16": (2, 2, 2, 2), "fp16": (2, 2, 2, 2), "fp32": (4, 4, 4, 4),
                      "autocast": (4, 4, 2, 2)}
"""Bytes per element of the layer output's gradient, the dropout's, the MLP's
second linear's input gradient and its weight gradient: under autocast the
first two follow the fp32 residual stream, the linear's are bf16 (its
backward runs in the dtype of its forward)."""


def mlp_gradients(model: ModelConfig, t: int, sequence_parallel: bool, precision: str,
                  weight_gradients: bool = True, layer_options: dict | None = None) -> int:
    """Bytes alive beside the saved rows when the MLP's second linear is
    differentiated (PyTorch's ``mm`` backward makes the input gradient, then
    the weight gradient): the layer output's gradient (``sbh``, split by t
    under sequence parallelism), the dropout's gradient (with dropout),
    the second linear's input gradient (``sbf/t``) and weight gradient
    (``fh/t``; none with ``weight_gradients=False``: Megatron-LM's gradient
    accumulation fusion adds it into the fp32 buffer inside the GEMM); 0 for
    an MoE model (its experts' backward is not looked at). Measured for GeLU;
    SwiGLU's gate and up gradients come after this moment and are not
    looked at."""
    if getattr(model, "num_experts", None) is not None:
        return 0
    c = model.layer(t, sequence_parallel, **(layer_options or {}))
    sbh = c.s * c.b * c.h // (c.t if sequence_parallel else 1)
    out, drop, inner, weight = MLP_GRADIENT_BYTES[precision]
    return ((out + drop * c.dropout) * sbh + inner * c.s * c.b * c.f // c.t
            + weight * weight_gradients * c.f * c.h // c.t)


def moment_parts(moments: LayerMoments, layers: int) -> tuple[int, int]:
    """(bytes one pass keeps for ``layers`` layers, recomputation working
    set), from ``moments``: a
    full-recomputation group rebuilds its ``k`` layers from its checkpoint,
    which is the first layer's input (not counted twice); a stage without
    layers (``stage_layers`` with a 0) recomputes nothing."""
    kept, full = moments.kept, moments.full
    if moments.recompute == "none" or layers == 0:
        return layers * kept, 0
    if moments.recompute == "selective":
        return layers * kept, moments.selective_working_set
    return -(-layers // moments.group) * kept, min(moments.group, layers) * full - kept


def precision_outputs(parts: dict[str, int], precision: str) -> dict[str, int]:
    """:func:`actmem.run.moments.pass_parts.output_activations` under ``precision``:
    the final norm's input is the fp32 residual stream in fp32 and under
    autocast; the output layer's input is fp32 in fp32 and a bf16 cast under
    autocast."""
    scale = {"bf16": (1, 1), "fp16": (1, 1), "fp32": (2, 2), "autocast": (2, 1)}[precision]
    return {**parts, "final norm input": scale[0] * parts["final norm input"],
            "output layer input": scale[1] * parts["output layer input"]}

"""What Transformer Engine keeps per layer beside the bf16 weights under FP8.

:func:`fp8_state_bytes` counts, for each GEMM Transformer Engine runs in
FP8 (:func:`fp8_gemm_shapes`), its cached FP8 weight copies, the scaling
state of its recipe, and what FP8 parameters change; the saved inputs are
:mod:`actmem.layer.fp8`'s rows. :mod:`actmem.run.model_states.fp8_states`
puts these bytes on each pipeline stage.
"""

from __future__ import annotations

from .fp8_scales import PER_BLOCK, weight_copy_bytes

AMAX_HISTORY_LEN = 1
"""Megatron-LM's ``--fp8-amax-history-len`` default (TE's recipe default is 1024)."""


def fp8_state_bytes(c, amax_history_len: int = AMAX_HISTORY_LEN, *, transpose: bool = True,
                    param_gather: bool = False) -> dict[str, int]:
    """Bytes TE keeps per layer on one GPU beside the bf16 weights, under
    FP8 (:class:`actmem.LayerConfig` ``c``; 0s without ``fp8``). Sources:
    TE 2.17's ``transformer_engine/pytorch/`` (Megatron-LM's CI image).

    * ``"weight_copies"``: each linear weight's FP8 copy, cached across
      micro-batches (``module/linear.py``: ``_fp8_workspaces["weight"]``,
      kept because Megatron-LM passes ``is_first_microbatch``;
      ``grouped_linear.py``: ``weight{i}`` per local expert), one per GEMM
      of :func:`fp8_gemm_shapes`: the row-wise
      data and, with ``transpose`` (a GPU whose FP8 GEMMs are TN only,
      compute capability below 10.0: ``utils.py``:
      is_non_tn_fp8_gemm_supported), the column-wise transpose for the
      input gradient's GEMM: 2 bytes per weight element on Hopper, 1 on
      Blackwell (``csrc/quantizer.cpp``: create_tensor), plus its 4-byte
      scale inverse; with ``param_gather`` (Megatron-LM's
      ``--fp8-param-gather``) the parameter is the FP8 tensor and nothing is
      cached (``module/base.py``: quantize_weight returns it); under
      ``"blockwise"`` both copies on every GPU and their 128 x 128 blocks'
      scales, under ``"mxfp8"`` both copies and their E8M0 scales per 32
      elements (:func:`actmem.layer.fp8_scales.weight_copy_bytes`);
    * ``"parameters"``: with ``param_gather``, what the FP8 parameters change
      against 16-bit ones: 1 byte of data (in the distributed optimizer's
      uint8 buffer, ``param_and_grad_buffer.py``) and the transpose that is
      rebuilt after every all-gather and never freed (``tensor/utils.py``:
      post_all_gather_processing): -1 byte per element without a transpose,
      0 with it, and each weight's 4-byte scale inverse;
    * ``"scaling"``: under delayed scaling, each TE module's state
      (``quantization.py``: DelayedScalingRecipeState, fp32 ``scale`` and
      ``amax_history`` of ``amax_history_len`` rows) for 3 forward tensors
      (input, weight, output) and 2 backward ones (``base.py``:
      set_meta_tensor, per GEMM): 4*(3 + 3L) + 4*(2 + 2L) = 20*(1 + L)
      bytes per GEMM, 4 GEMMs in a dense layer; none under the other
      recipes (their recipe states allocate no buffers).

    >>> from actmem import LayerConfig
    >>> fp8_state_bytes(LayerConfig(8, 1, 64, 4, fp8="hybrid"))
    {'weight_copies': 98320, 'parameters': 0, 'scaling': 160}
    """
    if c.fp8 is None:
        return {"weight_copies": 0, "parameters": 0, "scaling": 0}
    gemms = fp8_gemm_shapes(c)
    weights, n = sum(N * K for N, K in gemms), len(gemms)
    copy = (1 + transpose) * weights + 4 * n
    scaling = n * 20 * (1 + amax_history_len) if c.fp8_recipe == "delayed" else 0
    if c.fp8_recipe in PER_BLOCK:
        copy = sum(weight_copy_bytes(N, K, c.fp8_recipe) for N, K in gemms)
    if param_gather:
        return {"weight_copies": 0, "parameters": (transpose - 1) * weights + 4 * n,
                "scaling": scaling}
    return {"weight_copies": copy, "parameters": 0, "scaling": scaling}


def fp8_gemm_shapes(c) -> list[tuple[int, int]]:
    """The weight [N, K] (outputs, inputs) on one GPU of each GEMM
    Transformer Engine runs in FP8 in layer ``c``: Q/K/V and the output
    projection (over t), then the dense MLP's fc1 and fc2 (over t), or an
    MoE layer's shared experts' fc1 and fc2 (over t) and each local
    expert's fc1 and fc2 (E/ep experts, over etp; a GroupedLinear of E/ep
    GEMMs keeps per GEMM what a Linear keeps: ``module/base.py``:
    set_meta_tensor sizes the scaling state by ``num_gemms``). The router
    stays in 16 bits (Megatron-LM's own GEMM)."""
    from .head_dim import head_dim  # Q's a*d, K's and V's g*d columns
    q, kv, t, h = c.a * head_dim(c), c.g * head_dim(c), c.t, c.h
    glu = 2 if c.activation == "swiglu" else 1
    gemms = [((q + 2 * kv) // t, h), (h, q // t)]
    if c.num_experts is None:
        return gemms + [(glu * c.f // t, h), (h, c.f // t)]
    fs = c.moe_shared_expert_intermediate_size
    if fs:
        gemms += [(glu * fs // t, h), (h, fs // t)]
    local, x = c.num_experts // c.ep, c.expert_t
    return gemms + [(glu * c.f_e // x, h)] * local + [(h, c.f_e // x)] * local

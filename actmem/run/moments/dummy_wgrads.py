"""Transformer Engine's dummy weight gradients under gradient accumulation fusion.

With Megatron-LM's gradient accumulation fusion a linear layer adds its
weight gradient into the fp32 ``main_grad`` inside the GEMM and hands autograd
a placeholder instead, so that DistributedDataParallel's hooks run on the
main thread. Transformer Engine makes that placeholder with
``get_dummy_wgrad`` (``transformer_engine/pytorch/module/base.py``): one
tensor per (shape, dtype), allocated the first time it is asked for and kept
in the module-level cache ``_dummy_wgrads`` for the life of the process.
TE's ``Linear``, ``LayerNormLinear``, ``LayerNormMLP`` and ``GroupedLinear``
ask for it in their backward when the weight has Megatron-LM's
``grad_added_to_main_grad`` (``linear.py``: ``get_dummy_wgrad(list(
weight.shape), weight.dtype)``), which ``DistributedDataParallel`` sets on
every trainable parameter (``distributed_data_parallel.py``); so does
Megatron-LM's own ``LinearWithGradAccumulationAndAsyncCommunication``, the
output layer's, when Transformer Engine is installed
(``megatron/core/tensor_parallel/layers.py``).

So from its first backward on, a GPU keeps one weight-sized tensor for each
distinct shape among the linear weights it trains, in the parameters' dtype:
Q/K/V and the output projection (multi-latent attention's down and up
projections instead), the MLP's two linears, an MoE layer's experts' two
(one shape each, however many experts: ``E/ep`` weights of the same shape)
and its shared experts', and on the last stage the output layer (``V/t x
h``; with tied embeddings the embedding's weight, the same shape) and
multi-token prediction's ``eh_proj``. The
router's weight is multiplied by PyTorch, not by a linear layer, and gets an
ordinary gradient. A LoRA model's base weights are frozen and make no weight
gradient; its adapters' few ``r``-wide shapes are not counted. Without
Transformer Engine, Megatron-LM's linear allocates its placeholder anew in
each backward (``torch.empty``), a transient not modelled.
"""

from __future__ import annotations

from ..job.model import ModelConfig
from ..job.weight_shapes import attention_weights, mlp_weights
from .precision import SIXTEEN_BITS


def stage_dummy_wgrads(setup, i: int, output_layer: bool) -> int:
    """Bytes of the dummies on a GPU of stage ``i`` of the job of ``setup``
    (:class:`actmem.run.step_setup.StepSetup`): with gradient fusion and
    Transformer Engine, for a model without LoRA; ``output_layer``: the
    stage holds the output layer."""
    j, model = setup.job, setup.whole
    if not (setup.fusion and j.transformer_engine) or model.lora_rank is not None:
        return 0
    moe, mtp = setup.moe_layers_on(i), output_layer and bool(model.mtp_num_layers)
    dense = sum(setup.split[i]) - moe
    if mtp:   # the modules' layers, of the last layer's kind
        last = model.moe_pattern()[-1]
        moe, dense = moe + last, dense + 1 - last
    return dummy_wgrad_bytes(model, j.t, j.etp, j.sequence_parallel, dense, moe, output_layer,
                             2 if j.precision in SIXTEEN_BITS else 4, mtp)


def dummy_wgrad_bytes(model: ModelConfig, t: int, etp: int | None, sequence_parallel: bool,
                      dense_layers: int, moe_layers: int, output_layer: bool,
                      dtype_bytes: int, mtp: bool = False) -> int:
    """Bytes of the dummies one GPU keeps (module docstring): the distinct
    weight shapes of its ``dense_layers`` dense and ``moe_layers`` MoE
    layers (split over t, the experts' over etp, default t; the layers as
    built with ``sequence_parallel``, which changes no shape) and, with
    ``output_layer``, the output layer's, ``dtype_bytes`` per element; with
    ``mtp``, multi-token prediction's ``eh_proj`` (h/t x 2h, a column-parallel
    TE linear; its layers are among the dense or MoE ones)."""
    shapes = {(model.padded_vocab(t) // t, model.h)} if output_layer else set()
    if mtp:
        shapes.add((model.h // t, 2 * model.h))
    if dense_layers:
        c = model.layer(t, sequence_parallel, moe=False)
        shapes |= {*attention_weights(c), *mlp_weights(c.h, c.f, c.activation, t)}
    if moe_layers:
        c = model.layer(t, sequence_parallel, moe=True, etp=etp)
        shapes |= {*attention_weights(c), *mlp_weights(c.h, c.f_e, c.activation, c.expert_t)}
        if c.moe_shared_expert_intermediate_size:
            shapes |= {*mlp_weights(c.h, c.moe_shared_expert_intermediate_size, c.activation, t)}
    return dtype_bytes * sum(rows * columns for rows, columns in shapes)


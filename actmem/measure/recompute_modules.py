"""Named-module recomputation measured: :class:`.layer.ReferenceLayer` with
Megatron-LM's ``--recompute-modules`` mechanisms, on CPU.

Megatron-LM (``megatron/core/tensor_parallel/random.py``) recomputes a
module in one of two ways, both rebuilt here in plain PyTorch:

* ``core_attn`` and ``mlp``: ``checkpoint`` (CheckpointFunction, reentrant):
  ``torch.utils.checkpoint.checkpoint(..., use_reentrant=True)`` around the
  core attention (the reference layer's own ``recompute="selective"``) and
  around the MLP after its norm (``transformer_layer.py``: _forward_mlp);
* ``layernorm``: ``CheckpointWithoutOutput`` (:class:`WithoutOutput`): the
  norm runs under ``no_grad`` and saves its input; once the block after it
  has run, the output's storage is freed (``untyped_storage().resize_(0)``)
  and a hook on the block output's gradient recomputes it before the block's
  backward reads it (``transformer_layer.py``: _run_input_layernorm,
  _forward_pre_mlp_layernorm, discard_output_and_register_recompute). Here
  the storages are freed when the layer's forward ends, not at once: the
  recorder (:mod:`.saved`) tells storages apart by address, which a freed
  storage would hand on to the next tensor; what is saved is the same.

:func:`measure_recompute_modules` records what the forward saves (a freed
storage counts 0 bytes, as on the GPU), so :func:`.compare.compare` sets it
against the ledger of the same :class:`actmem.LayerConfig` row by row, and
:func:`gradients_match` checks that the recomputation gives the same
gradients as the layer without it. The MoE names are measured on
:class:`.moe.ReferenceMoELayer` (:class:`ModuleRecomputeMoELayer`).
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..layer.config import LayerConfig
from ..layer.recompute_modules import modules_of
from .layer import ReferenceLayer, dropout, layer_input
from .moe import ReferenceMoELayer, WeightedSwiGLU
from .run import Measurement, recorded
from .saved import block, named

MEASURED = ("core_attn", "layernorm", "mlp")
"""The names measured on a dense layer."""
MEASURED_MOE = ("core_attn", "moe", "moe_act", "shared_experts")
"""The names measured on an MoE layer."""


class _NoOutputFunction(torch.autograd.Function):
    """CheckpointWithoutOutputFunction: run under no_grad, save the input;
    backward differentiates the recomputed graph (:meth:`WithoutOutput.recompute`)."""

    @staticmethod
    def forward(ctx, holder, *xs):
        with torch.no_grad():
            y = holder.module(*xs)
        ctx.save_for_backward(*xs)
        holder.ctx = ctx
        return y

    @staticmethod
    def backward(ctx, grad):
        torch.autograd.backward(ctx.outputs, grad)
        return (None, *(x.grad for x in ctx.inputs))


class WithoutOutput(nn.Module):
    """A module whose output is freed after use and recomputed in backward
    (Megatron-LM's CheckpointWithoutOutput, see the module docstring)."""

    def __init__(self, module):
        super().__init__()
        self.module, self.ctx, self.output = module, None, None

    def forward(self, *xs):
        self.output = _NoOutputFunction.apply(self, *xs)
        return self.output

    def discard(self, later: torch.Tensor):
        """Recompute the output when ``later``'s gradient arrives; returns the
        function that frees the output's storage."""
        output = self.output
        nbytes, ctx = output.untyped_storage().nbytes(), self.ctx

        def recompute(_):
            xs = tuple(x.detach().requires_grad_() for x in ctx.saved_tensors)
            with torch.enable_grad():
                y = self.module(*xs)
            output.untyped_storage().resize_(nbytes)
            output.untyped_storage().copy_(y.untyped_storage())
            ctx.outputs, ctx.inputs = y, xs

        later.register_hook(recompute)
        self.output = self.ctx = None
        return lambda: output.untyped_storage().resize_(0)


class ModuleRecomputeLayer(ReferenceLayer):
    """:class:`.layer.ReferenceLayer` recomputing the modules of
    ``config.recompute_modules`` (``core_attn``, ``layernorm``, ``mlp``).

    Raises:
        ValueError: an MoE layer, a name other than those of :data:`MEASURED`,
            or as :class:`.layer.ReferenceLayer`.
    """

    def __init__(self, config: LayerConfig, rank: int = 0, *, mask="bool", seed=0,
                 dtype=torch.bfloat16):
        modules = modules_of(config)
        if config.num_experts is not None or not set(modules) <= set(MEASURED):
            raise ValueError(f"ModuleRecomputeLayer measures a dense layer's "
                             f"{', '.join(MEASURED)}, got num_experts={config.num_experts}, "
                             f"recompute_modules={config.recompute_modules!r}")
        core = "selective" if "core_attn" in modules else "none"
        super().__init__(replace(config, recompute=core, recompute_modules=None), rank,
                         mask=mask, seed=seed, dtype=dtype)
        self.modules, self._frees = modules, []
        if "layernorm" in modules:
            self.norm1, self.norm2 = WithoutOutput(self.norm1), WithoutOutput(self.norm2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """As :meth:`.layer.ReferenceLayer.forward`; the norms' outputs are
        freed at the end (module docstring)."""
        out = super().forward(x)
        for free in self._frees:
            free()
        self._frees = []
        return out

    def _attention(self, x, map_seed, out_seed):
        out = super()._attention(x, map_seed, out_seed)
        if isinstance(self.norm1, WithoutOutput):
            self._frees.append(self.norm1.discard(out))
        return out

    def _mlp(self, x, seed):
        with block("mlp_norm"):
            y = named("fc1_input", self.norm2(x))
        with block("mlp"):
            if "mlp" in self.modules:
                out = checkpoint(self._mlp_inner, y, use_reentrant=True)
            else:
                out = self._mlp_inner(y)
            if isinstance(self.norm2, WithoutOutput):
                self._frees.append(self.norm2.discard(out))
            if seed is None:
                return out
            return dropout(out, seed, "mlp_out_dropout_mask", self.mask)


def measure_recompute_modules(config: LayerConfig, mask: str = "bool") -> Measurement:
    """One forward of :class:`ModuleRecomputeLayer` at t = 1, every saved
    storage recorded (freed ones with 0 bytes); the Measurement's config is
    ``config``, so :func:`.compare.compare` uses its ledger.

    Raises:
        ValueError: see :class:`ModuleRecomputeLayer`.
    """
    layer = ModuleRecomputeLayer(config, mask=mask)
    return recorded(layer, config, mask)


def gradients_match(config: LayerConfig) -> bool:
    """Whether :class:`ModuleRecomputeLayer` (:class:`ModuleRecomputeMoELayer`
    for an MoE layer) gives the same input and weight gradients as the same
    layer without recomputation (bit for bit: the
    recomputation repeats the same bf16 operations)."""
    moe = config.num_experts is not None
    plain = (ReferenceMoELayer if moe else ReferenceLayer)(
        replace(config, recompute="none", recompute_modules=None))
    grads = []
    for layer in (plain, (ModuleRecomputeMoELayer if moe else ModuleRecomputeLayer)(config)):
        x = layer_input(config)
        layer(x).float().square().sum().backward()
        grads.append([x.grad] + [p.grad for p in layer.parameters()])
    return all(a is b is None or (a is not None and b is not None and torch.equal(a, b))
               for a, b in zip(*grads))   # None: a weight the layer does not use


class ModuleRecomputeMoELayer(ReferenceMoELayer):
    """:class:`.moe.ReferenceMoELayer` recomputing ``moe`` (a reentrant
    checkpoint around the routed experts and, inside Megatron-LM's one
    checkpoint, the shared experts: ``moe/moe_layer.py``: MoELayer.forward),
    ``shared_experts`` (``shared_experts_compute``) and ``moe_act`` (the
    weighted SwiGLU of each expert without its output, ``moe/experts.py``:
    TEGroupedMLP.forward); ``core_attn`` as the reference layer's.

    Raises:
        ValueError: a dense layer or another name; as
            :class:`.moe.ReferenceMoELayer`.
    """

    def __init__(self, config: LayerConfig, *, mask="bool", seed=0, dtype=torch.bfloat16):
        modules = modules_of(config)
        if config.num_experts is None or not set(modules) <= set(MEASURED_MOE):
            raise ValueError(f"ModuleRecomputeMoELayer measures an MoE layer's "
                             f"{', '.join(MEASURED_MOE)}, got num_experts={config.num_experts}, "
                             f"recompute_modules={config.recompute_modules!r}")
        core = "selective" if "core_attn" in modules else "none"
        super().__init__(replace(config, recompute=core, recompute_modules=None), mask=mask,
                         seed=seed, dtype=dtype)
        self.modules, self._frees = modules, []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """As the reference layer's; freed outputs at the end (:class:`ModuleRecomputeLayer`)."""
        out = super().forward(x)
        for free in self._frees:
            free()
        self._frees = []
        return out

    def _shared_experts(self, y):
        if self.shared and {"moe", "shared_experts"} & set(self.modules):
            return checkpoint(super()._shared_experts, y, use_reentrant=True)
        return super()._shared_experts(y)

    def _moe(self, tokens):
        if "moe" in self.modules:
            return checkpoint(super()._moe, tokens, use_reentrant=True)
        return super()._moe(tokens)

    def _experts(self, tokens, probs, counts):
        if "moe_act" not in self.modules:
            return super()._experts(tokens, probs, counts)
        outs = []
        for e, (x, w) in enumerate(zip(torch.split(tokens, counts),
                                       torch.split(probs, counts)), start=self.first_expert):
            y = named("expert_fc1_output", x @ self.fc1[e])
            act = WithoutOutput(WeightedSwiGLU.apply)
            out = named("expert_fc2_input", act(y, w.unsqueeze(-1))) @ self.fc2[e]
            self._frees.append(act.discard(out))
            outs.append(out)
        return torch.cat(outs)


def measure_recompute_moe(config: LayerConfig, mask: str = "bool") -> Measurement:
    """One forward of :class:`ModuleRecomputeMoELayer`, recorded as
    :func:`measure_recompute_modules`."""
    layer = ModuleRecomputeMoELayer(config, mask=mask)
    return recorded(layer, config, mask)

"""A frozen reference layer with LoRA adapters, measured on CPU.

:class:`ReferenceLoRALayer` is :class:`.layer.ReferenceLayer` (t = 1) with
every parameter frozen (``requires_grad=False``, as PEFT and Megatron-Bridge
freeze the base model) and an adapter ``(X A^T) B^T * alpha/r`` added to each
target of ``config.lora_targets`` (:mod:`actmem.layer.lora`): one adapter
over Q, K and V for ``linear_qkv`` (its output split among the three, as
Megatron's fused projection), over gate and up for SwiGLU's ``linear_fc1``.
A's output is tagged as the ledger row ``lora_<name>_a_output``.

:func:`measure_lora` records what autograd saves (:class:`.saved.Recorder`,
parameters excluded; set it against the ledger with :func:`.compare.compare`);
:func:`measure_lora_states` counts, after a backward pass and one Adam step,
which parameters have gradients and optimizer states, element by element.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..layer.config import LayerConfig
from ..layer.lora import adapters
from .layer import ReferenceLayer, layer_input
from .run import Measurement
from .saved import Recorder, named

ALPHA = 32
"""LoRA's alpha (Megatron-Bridge's default); the scale alpha/r saves nothing."""


class LoRAAdapter(nn.Module):
    """``(x A^T) B^T * alpha/r`` for one adapter; computed once per input,
    however many base projections share it (the fused ``linear_qkv``)."""

    def __init__(self, name: str, in_features: int, out_features: int, r: int,
                 gen: torch.Generator, dtype):
        super().__init__()
        self.key = f"lora_{name}_a_output"
        self.A = nn.Parameter((torch.randn(r, in_features, generator=gen)
                               * in_features ** -0.5).to(dtype))
        self.B = nn.Parameter(torch.zeros(out_features, r, dtype=dtype))  # LoRA's B = 0
        self.scale = ALPHA / r
        self._last: tuple[torch.Tensor, torch.Tensor] | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._last is None or self._last[0] is not x:
            z = named(self.key, F.linear(x, self.A))
            self._last = (x, F.linear(z, self.B) * self.scale)
        return self._last[1]


class Adapted(nn.Module):
    """A frozen base linear plus columns ``cols`` of an adapter's output."""

    def __init__(self, base: nn.Module, adapter: LoRAAdapter, cols: slice):
        super().__init__()
        self.base, self.adapter, self.cols = base, adapter, cols

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.adapter(x)[..., self.cols]


class ReferenceLoRALayer(ReferenceLayer):
    """The reference layer, frozen, with LoRA adapters on ``config.lora_targets``.

    Args:
        config: a layer with ``lora_rank`` (t = 1).
        mask, seed, dtype: as :class:`.layer.ReferenceLayer`.

    Raises:
        ValueError: ``config`` has no ``lora_rank``, or t > 1.
    """

    def __init__(self, config: LayerConfig, *, mask="bool", seed=0, dtype=torch.bfloat16):
        if config.lora_rank is None or config.t != 1:
            raise ValueError(f"ReferenceLoRALayer needs lora_rank and t = 1, got "
                             f"lora_rank={config.lora_rank}, t={config.t}")
        super().__init__(config, 0, mask=mask, seed=seed, dtype=dtype)
        self.requires_grad_(False)
        gen = torch.Generator().manual_seed(seed + 2)
        self.adapters = nn.ModuleList()
        for a in adapters(config):
            adapter = LoRAAdapter(a.name, a.in_features, a.out_features, config.lora_rank,
                                  gen, dtype)
            self.adapters.append(adapter)
            for base, cols in _bases(a.name, config):
                self.linears[base] = Adapted(self.linears[base], adapter, cols)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for adapter in self.adapters:
            adapter._last = None
        return super().forward(x)


def _bases(name: str, c: LayerConfig) -> list[tuple[str, slice]]:
    """The reference layer's linears an adapter feeds, with its output columns."""
    h, kv, f = c.h, c.g * c.h // c.a, c.f
    whole = slice(None)
    if name == "linear_qkv":
        return [("q", slice(0, h)), ("k", slice(h, h + kv)), ("v", slice(h + kv, h + 2 * kv))]
    if name == "linear_fc1":
        if c.activation == "gelu":
            return [("fc1", whole)]
        return [("gate", slice(0, f)), ("up", slice(f, 2 * f))]
    base = {"linear_q": "q", "linear_k": "k", "linear_v": "v", "linear_proj": "proj",
            "linear_fc1_gate": "gate", "linear_fc1_up": "up", "linear_fc2": "fc2"}[name]
    return [(base, whole)]


def measure_lora(config: LayerConfig, mask: str = "bool") -> Measurement:
    """One forward pass of :class:`ReferenceLoRALayer`, every saved storage
    recorded (parameters excluded), as :func:`.run.measure_layer`.

    Raises:
        ValueError: see :class:`ReferenceLoRALayer`.
    """
    layer = ReferenceLoRALayer(config, mask=mask)
    with Recorder(layer.parameters()) as rec:
        out = layer(layer_input(config))
    return Measurement(config, 0, mask, rec.storages(out))


@dataclass(frozen=True)
class LoRAStates:
    """Elements of one layer's model states after a backward pass and one
    ``torch.optim.Adam`` step over the parameters that require gradients.

    Attributes:
        trainable, frozen: parameters with and without ``requires_grad``.
        gradients: elements of the ``.grad`` tensors (frozen ones have none).
        optimizer: elements of Adam's ``exp_avg`` and ``exp_avg_sq``.
        frozen_with_state: frozen parameters that got a gradient or a state.
    """

    trainable: int
    frozen: int
    gradients: int
    optimizer: int
    frozen_with_state: int


def measure_lora_states(config: LayerConfig) -> LoRAStates:
    """Count :class:`LoRAStates` of a :class:`ReferenceLoRALayer`.

    Raises:
        ValueError: see :class:`ReferenceLoRALayer`.
    """
    layer = ReferenceLoRALayer(config)
    params = list(layer.parameters())
    trainable = [p for p in params if p.requires_grad]
    optimizer = torch.optim.Adam(trainable, lr=1e-3)
    layer(layer_input(config)).float().square().mean().backward()
    optimizer.step()
    moments = sum(state[k].numel() for state in optimizer.state.values()
                  for k in ("exp_avg", "exp_avg_sq"))
    frozen = [p for p in params if not p.requires_grad]
    return LoRAStates(
        trainable=sum(p.numel() for p in trainable), frozen=sum(p.numel() for p in frozen),
        gradients=sum(p.grad.numel() for p in params if p.grad is not None),
        optimizer=moments,
        frozen_with_state=sum(1 for p in frozen if p.grad is not None or p in optimizer.state))

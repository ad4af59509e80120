"""A frozen reference layer with LoRA adapters, measured on CPU.

:class:`ReferenceLoRALayer` is :class:`.layer.ReferenceLayer` (t = 1) with
every parameter frozen (``requires_grad=False``, as PEFT and Megatron-Bridge
freeze the base model) and an adapter ``(X A^T) B^T * alpha/r`` added to each
target of ``config.lora_targets`` (:mod:`actmem.layer.lora`): one adapter
over Q, K and V for ``linear_qkv`` (its output split among the three, as
Megatron's fused projection), over gate and up for SwiGLU's ``linear_fc1``.
A's output is tagged as the ledger row ``lora_<name>_a_output``.

On t tensor-parallel ranks (gloo, :func:`measure_lora_parallel`) each
adapter is split as Megatron-Bridge's ParallelLinearAdapter
(``src/megatron/bridge/peft/utils.py``): on a column-parallel base, A is a
ColumnParallelLinear over r with ``gather_output=True`` (every rank then
keeps A's whole output for B, itself column-parallel over the base's
outputs); on a row-parallel base, A is a RowParallelLinear over the base's
input slice (its output all-reduced) and B a ColumnParallelLinear with
``gather_output=True``. The adapters' weights are drawn once (t = 1) and
sliced; B is zero, as LoRA initialises it.

:func:`measure_lora` records what autograd saves (:class:`.saved.Recorder`,
parameters excluded; set it against the ledger with :func:`.compare.compare`);
:func:`measure_lora_states` counts, after a backward pass and one Adam step,
which parameters have gradients and optimizer states, element by element.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from ..layer.config import LayerConfig
from ..layer.lora import adapters
from .launch import on_ranks
from .layer import ReferenceLayer, layer_input
from .parallel import TensorParallel, copy_to_parallel, reduce_from_parallel
from .run import Measurement, recorded
from .saved import named

ALPHA = 32
"""LoRA's alpha (Megatron-Bridge's default); the scale alpha/r saves nothing."""


class _GatherLast(torch.autograd.Function):
    """All-gather along the last dimension; backward keeps this rank's slice
    (``megatron/core/tensor_parallel/mappings.py``: _GatherFromModelParallelRegion).
    Saves no tensor."""

    @staticmethod
    def forward(ctx, x, tp):
        ctx.tp = tp
        if tp.size == 1:
            return x.view_as(x)
        parts = [torch.empty_like(x) for _ in range(tp.size)]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts, dim=-1)

    @staticmethod
    def backward(ctx, grad):
        tp = ctx.tp
        return grad.chunk(tp.size, dim=-1)[tp.rank].contiguous(), None


class LoRAAdapter(nn.Module):
    """``(x A^T) B^T * alpha/r`` for one adapter on rank ``tp.rank``;
    computed once per input, however many base projections share it (the
    fused ``linear_qkv``)."""

    def __init__(self, adapter, r: int, tp: TensorParallel, gen: torch.Generator, dtype):
        super().__init__()
        self.key, self.tp, self.column = f"lora_{adapter.name}_a_output", tp, adapter.column
        n_in, n_out = adapter.in_features, adapter.out_features
        A = torch.randn(r, n_in, generator=gen) * n_in ** -0.5
        rows = tp.shard(r, "lora_rank") if self.column else r
        cols = n_in if self.column else tp.shard(n_in, "in_features")
        at = tp.rank * (rows if self.column else cols)
        A = A[at:at + rows] if self.column else A[:, at:at + cols]
        self.A = nn.Parameter(A.contiguous().to(dtype))
        self.B = nn.Parameter(torch.zeros(tp.shard(n_out, "out_features"), r, dtype=dtype))
        self.scale = ALPHA / r
        self._last: tuple[torch.Tensor, torch.Tensor] | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._last is None or self._last[0] is not x:
            if self.column:  # A column-parallel over r, its output gathered
                z = _GatherLast.apply(F.linear(copy_to_parallel(x, self.tp), self.A), self.tp)
                delta = F.linear(named(self.key, z), self.B)
            else:  # A row-parallel over the base's input slice, its output all-reduced
                z = reduce_from_parallel(F.linear(x, self.A), self.tp)
                delta = _GatherLast.apply(F.linear(named(self.key, z), self.B), self.tp)
            self._last = (x, delta * self.scale)
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
        config: a layer with ``lora_rank`` (t > 1 inside a process group of t
            ranks, :func:`actmem.measure.launch.on_ranks`).
        rank: this process's tensor-parallel rank.
        mask, seed, dtype: as :class:`.layer.ReferenceLayer`.

    Raises:
        ValueError: ``config`` has no ``lora_rank``; as
            :class:`.layer.ReferenceLayer` (sequence parallelism is not
            measured).
    """

    def __init__(self, config: LayerConfig, rank: int = 0, *, mask="bool", seed=0,
                 dtype=torch.bfloat16):
        if config.lora_rank is None:
            raise ValueError("ReferenceLoRALayer needs lora_rank, got None")
        super().__init__(config, rank, mask=mask, seed=seed, dtype=dtype)
        self.requires_grad_(False)
        gen = torch.Generator().manual_seed(seed + 2)
        self.adapters = nn.ModuleList()
        for a in adapters(config):
            adapter = LoRAAdapter(a, config.lora_rank, self.tp, gen, dtype)
            self.adapters.append(adapter)
            for base, cols in _bases(a.name, config):
                self.linears[base] = Adapted(self.linears[base], adapter, cols)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for adapter in self.adapters:
            adapter._last = None
        return super().forward(x)


def _bases(name: str, c: LayerConfig) -> list[tuple[str, slice]]:
    """The reference layer's linears an adapter feeds, with its output
    columns on one rank (a column-parallel base keeps 1/t of its outputs)."""
    from ..layer.head_dim import head_dim
    h, kv, f = (n // c.t for n in (c.a * head_dim(c), c.g * head_dim(c), c.f))
    whole = slice(None)
    if name == "linear_qkv":
        return [("q", slice(0, h)), ("k", slice(h, h + kv)), ("v", slice(h + kv, h + 2 * kv))]
    if name == "linear_fc1":
        if c.activation != "swiglu":
            return [("fc1", whole)]
        return [("gate", slice(0, f)), ("up", slice(f, 2 * f))]
    base = {"linear_q": "q", "linear_k": "k", "linear_v": "v", "linear_proj": "proj",
            "linear_fc1_gate": "gate", "linear_fc1_up": "up", "linear_fc2": "fc2"}[name]
    return [(base, whole)]


def measure_lora(config: LayerConfig, rank: int = 0, mask: str = "bool") -> Measurement:
    """One forward pass of rank ``rank``'s :class:`ReferenceLoRALayer`,
    every saved storage recorded (parameters excluded), as
    :func:`.run.measure_layer` (t > 1: inside a process group of t ranks).

    Raises:
        ValueError: see :class:`ReferenceLoRALayer`.
    """
    layer = ReferenceLoRALayer(config, rank, mask=mask)
    return recorded(layer, config, mask, rank)


def measure_lora_parallel(config: LayerConfig, mask: str = "bool") -> list[Measurement]:
    """:func:`measure_lora` on each of ``config.t`` gloo ranks, rank 0 first.

    Raises:
        ValueError: see :class:`ReferenceLoRALayer`.
    """
    return on_ranks(_measure_rank, config.t, config, mask)


def _measure_rank(rank: int, config: LayerConfig, mask: str) -> Measurement:
    return measure_lora(config, rank, mask)


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

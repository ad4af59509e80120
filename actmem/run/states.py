"""Model states per GPU: weights, gradients and optimizer states, in bytes.

Which parameters a GPU holds: pipeline stage ``i`` has ``L/p`` layers; the
first stage also holds the input embedding (and a learned position table),
the last stage the final norm and the output layer, or, with tied
embeddings and ``p > 1``, its own copy of the embedding (Megatron-LM keeps
one on each end and all-reduces their gradients). Tensor parallelism
divides the matrices, column-parallel biases and the vocabulary by t and
replicates norms, row-parallel biases and positions (:mod:`actmem.model`).

Two accountings of mixed-precision Adam (``ACCOUNTINGS``):

* ``"zero"``: Rajbhandari et al. 2020 (ZeRO), sec. 3.1: 2 bytes of fp16
  weights, 2 of fp16 gradients and K = 12 of optimizer states (fp32
  weights, momentum, variance) per parameter. ZeRO stage 1 divides the
  optimizer states by the data-parallel size d, stage 2 also the
  gradients, stage 3 also the weights.
* ``"megatron"``: Megatron-LM: bf16 weights (2), fp32 gradient buffers
  (4), fp32 main weights and Adam moments (12): 18 bytes per parameter;
  the distributed optimizer divides the 12 by d (``6 + 12/d``,
  ``theoretical_memory_usage.py``).

A share divided by d is rounded up to whole bytes per rank (each rank
holds an equal, padded shard).
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import ModelConfig, ParameterCount, parameter_count
from .stage_split import split_layers
from .training import chunk_layers
from ..validate import choice, flag, integer, lists_keywords, positive_int

ACCOUNTINGS = ("zero", "megatron")
OPTIMIZERS = ("adam",)
BYTES_PER_PARAMETER = {"zero": (2, 2, 12), "megatron": (2, 4, 12)}
"""(weights, gradients, optimizer states) bytes per parameter."""


@dataclass(frozen=True)
class ModelStates:
    """Bytes of model states on one GPU.

    Attributes:
        parameters: parameters on this GPU (before any ZeRO division).
        weights, gradients, optimizer: bytes of each.
        stage: the pipeline stage this GPU belongs to (0 = first).
    """

    parameters: int
    weights: int
    gradients: int
    optimizer: int
    stage: int = 0

    @property
    def total(self) -> int:
        """weights + gradients + optimizer states, bytes."""
        return self.weights + self.gradients + self.optimizer


def stage_parameters(model: ModelConfig, t: int = 1, p: int = 1,
                     stage_layers=None) -> list[int]:
    """Parameters on one GPU of each pipeline stage (stage 0 first), with
    the vocabulary padded for t as Megatron-LM pads it.

    Args:
        stage_layers: layers per stage (:func:`actmem.split_layers`);
            default ``L/p`` each.

    Raises:
        TypeError, ValueError: t or p invalid for the model (t must divide
            the split dimensions; without ``stage_layers``, p must divide L).
    """
    t = model.layer(t).t  # a plain int that divides a, h, kv_heads, f
    count = parameter_count(model, vocab=model.padded_vocab(t))
    if stage_layers is None:
        stage_layers = [chunk_layers(model.L, p)] * p
    else:
        stage_layers = [sum(chunks) for chunks in split_layers(model.L, p,
                                                               stage_layers=stage_layers)]
    per_layer = sum(count.layer_split.values()) // t + sum(count.layer_replicated.values())
    stages = [layers * per_layer for layers in stage_layers]
    stages[0] += count.embedding // t + count.positions
    stages[-1] += count.final_norm + _output_weights(count, p) // t
    return stages


def _output_weights(count: ParameterCount, p: int) -> int:
    """The output layer's matrix on the last stage: untied, or the tied
    embedding's second copy when the last stage is not the first."""
    if count.output_layer:
        return count.output_layer
    return count.embedding if p > 1 else 0


@lists_keywords
def model_states(model_or_params: ModelConfig | int, *, t: int = 1, p: int = 1,
                 d: int = 1, optimizer: str = "adam", accounting: str = "zero",
                 zero_stage: int = 0, distributed_optimizer: bool = False,
                 stage: int | None = None, stage_layers=None) -> ModelStates:
    """Weights, gradients and optimizer states on one GPU, in bytes.

    Args:
        model_or_params: a :class:`ModelConfig`, or a parameter count for
            one GPU (then t and p must be 1).
        t, p, d: tensor-, pipeline- and data-parallel sizes.
        optimizer: ``"adam"``. accounting: ``"zero"`` or ``"megatron"``
            (module docstring). zero_stage: 0-3 (``"zero"`` only).
        distributed_optimizer: Megatron-LM's (``"megatron"`` only).
        stage: the pipeline stage; default the most loaded one (the stage
            with the most parameters: the first or the last, which hold the
            embedding and the output layer, unless stages are uneven).
        stage_layers: layers per stage, ``p`` ints summing to L
            (:func:`actmem.split_layers`); default ``L/p`` each.

    Raises:
        TypeError, ValueError: a value out of range, an option of the other
            accounting, or t, p invalid for the model.

    >>> model_states(7_500_000_000, d=64, zero_stage=1).total / 1e9   # ZeRO Fig. 1
    31.40625
    """
    choice("optimizer", optimizer, OPTIMIZERS)
    choice("accounting", accounting, ACCOUNTINGS)
    d = positive_int("d", d)
    flag("distributed_optimizer", distributed_optimizer)
    if integer("zero_stage", zero_stage, "0, 1, 2 or 3") not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage!r}")
    if accounting == "megatron" and zero_stage:
        raise ValueError(f"zero_stage={zero_stage} belongs to accounting='zero'; "
                         "Megatron-LM shards optimizer states with distributed_optimizer=True")
    if accounting == "zero" and distributed_optimizer:
        raise ValueError("distributed_optimizer=True belongs to accounting='megatron'; "
                         "with accounting='zero' use zero_stage=1")
    per_stage = _per_stage(model_or_params, t, p, stage_layers)
    if stage is None:
        stage = max(range(len(per_stage)), key=per_stage.__getitem__)
    elif integer("stage", stage, "a stage index") not in range(len(per_stage)):
        raise ValueError(f"stage must be an int in 0..{len(per_stage) - 1}, got {stage!r}")
    n = per_stage[int(stage)]
    w, g, o = (n * k for k in BYTES_PER_PARAMETER[accounting])
    sharded = {"zero": (zero_stage >= 3, zero_stage >= 2, zero_stage >= 1),
               "megatron": (False, False, distributed_optimizer)}[accounting]
    w, g, o = (-(-x // d) if cut else x for x, cut in zip((w, g, o), sharded))
    return ModelStates(n, w, g, o, int(stage))


def _per_stage(model_or_params, t: int, p: int, stage_layers) -> list[int]:
    if isinstance(model_or_params, ModelConfig):
        return stage_parameters(model_or_params, t, p, stage_layers)
    params = positive_int("model_or_params", model_or_params)
    if (positive_int("t", t), positive_int("p", p)) != (1, 1):
        raise ValueError(f"t={t}, p={p}: a bare parameter count cannot be split over "
                         "GPUs; pass a ModelConfig (e.g. actmem.PRESETS[...])")
    return [params]

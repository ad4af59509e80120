"""Model states per GPU: weights, gradients and optimizer states, in bytes.

Which parameters a GPU holds is :mod:`actmem.run.model_states.placement`'s; this module
puts bytes on them.

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

Mixture-of-experts models (Megatron-LM's ``parallel_state.py``:
initialize_model_parallel, expert groups): a GPU keeps E/ep of each MoE
layer's routed experts, each split over etp (the expert tensor-parallel
size, default t), so ``3 h f_e E / (ep * etp)`` expert parameters per MoE
layer; the router (E x h) and the norms stay whole on every tensor-parallel
rank, the attention and the shared experts split over t. The ranks of one
pipeline stage (t x d of them) are regrouped as etp x ep x e_d, so the
expert data-parallel size is e_d = t*d/(ep*etp): the distributed optimizer
(``distributed/distributed_data_parallel.py`` builds separate buffers,
``expert_parallel_buffers``, over the expert data-parallel group) and ZeRO
shard the expert parameters' states over e_d and the others over d, as
Megatron-LM's estimate does (``theoretical_memory_usage.py``:
compute_weight_and_optimizer_memory, ``6 + 12/expert_data_parallel_size``
bytes per expert parameter).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...layer.fp8 import fp8_format
from ...memo import kept_by_repr
from ..job.model import ModelConfig
from .placement import expert_sizes, stage_parameter_groups
from ..job.record_fields import check_fields
from ...validate import choice, flag, instance, integer, lists_keywords, positive_int, shown

ACCOUNTINGS = ("zero", "megatron")
OPTIMIZERS = ("adam", "muon")
"""The optimizers a job may name: Adam, and Megatron-LM's Muon, whose states
:func:`actmem.training_memory` counts (:mod:`actmem.run.model_states.muon`).
:func:`model_states` counts Adam's."""
BYTES_PER_PARAMETER = {"zero": (2, 2, 12), "megatron": (2, 4, 12)}
"""(weights, gradients, optimizer states) bytes per parameter."""


@dataclass(frozen=True)
class ModelStates:
    """Bytes of model states on one GPU.

    Attributes:
        parameters: parameters on this GPU (before any ZeRO division).
        weights, gradients, optimizer: bytes of each.
        stage: the pipeline stage this GPU belongs to (0 = first).
        expert_parameters: how many of ``parameters`` are routed experts'
            (sharded over the expert data-parallel group).
        frozen_parameters: how many of ``parameters`` are frozen (LoRA:
            the whole base model; weights only, :mod:`actmem.run.model_states.lora_states`).
        step_gradients: bytes the optimizer step makes beside the states:
            the fp32 copies of a 16-bit gradient buffer
            (:func:`sixteen_bit_gradients`), 0 otherwise.
        step_transient: the most bytes the optimizer step allocates and
            frees within itself (Muon's Newton-Schulz iteration,
            :mod:`actmem.run.model_states.muon`), 0 for Adam.
    """

    parameters: int
    weights: int
    gradients: int
    optimizer: int
    stage: int = 0
    expert_parameters: int = 0
    frozen_parameters: int = 0
    step_gradients: int = 0
    step_transient: int = 0

    def __post_init__(self):
        """Raises TypeError, ValueError: a field that is not an integer >= 0,
        expert or frozen parameters more than ``parameters``."""
        check_fields(self)
        for name in ("expert_parameters", "frozen_parameters"):
            if getattr(self, name) > self.parameters:
                raise ValueError(f"ModelStates.{name} must be <= parameters="
                                 f"{self.parameters}, got {getattr(self, name)}")

    @property
    def total(self) -> int:
        """weights + gradients + optimizer states, bytes."""
        return self.weights + self.gradients + self.optimizer


@lists_keywords
def model_states(model_or_params: ModelConfig | int, *, t: int = 1, p: int = 1,
                 d: int = 1, optimizer: str = "adam", accounting: str = "zero",
                 zero_stage: int = 0, distributed_optimizer: bool = False,
                 stage: int | None = None, stage_layers=None, ep: int = 1,
                 etp: int | None = None, cp: int = 1, moe_layers=None,
                 fp8: str | None = None,
                 num_distributed_optimizer_instances: int = 1) -> ModelStates:
    """Weights, gradients and optimizer states on one GPU, in bytes.

    Args:
        model_or_params: a :class:`ModelConfig`, or a parameter count for
            one GPU (then t and p must be 1).
        t, p, d: tensor-, pipeline- and data-parallel sizes.
        optimizer: ``"adam"`` (Muon: :func:`actmem.training_memory`).
            accounting: ``"zero"`` or ``"megatron"``
            (module docstring). zero_stage: 0-3 (``"zero"`` only).
        distributed_optimizer: Megatron-LM's (``"megatron"`` only).
        stage: the pipeline stage; default the most loaded one (the stage
            with the most parameters: the first or the last, which hold the
            embedding and the output layer, unless stages are uneven).
        stage_layers: layers per stage, ``p`` ints summing to L
            (:func:`actmem.split_layers`); default ``L/p`` each.
        ep, etp: expert-parallel and expert tensor-parallel sizes of an MoE
            model (``--expert-model-parallel-size``,
            ``--expert-tensor-parallel-size``; etp default t). The routed
            experts' states are sharded over the expert data-parallel size
            t*d/(ep*etp), the others over d (module docstring).
        cp: context-parallel size (``--context-parallel-size``): the cp
            ranks of one sequence hold the same weights, and Megatron-LM
            reduces gradients and shards the distributed optimizer over the
            data-parallel group with context parallelism, d*cp ranks
            (``parallel_state.py``: get_data_parallel_group(
            with_context_parallel=True); ``distributed_data_parallel.py``
            builds the gradient buffers the distributed optimizer shards over
            ``intra_dp_cp_group``; ``finalize_model_grads.py``); the
            expert data-parallel size becomes t*cp*d/(ep*etp)
            (``parallel_state.py``: expert_data_parallel_size = world_size //
            (etp*ep*p), world size t*p*d*cp). ZeRO shards over d*cp too.
        moe_layers: MoE layers on each stage when its chunks are not
            consecutive layers (:func:`stage_parameter_groups`), p ints.
        fp8: ``None`` or Megatron-LM's ``--fp8-format`` (``"e4m3"``,
            ``"hybrid"``): the weights gain each layer's Transformer Engine
            FP8 weight copies and scaling state
            (:func:`actmem.run.model_states.fp8_states.fp8_stage_bytes`).
        num_distributed_optimizer_instances: N, Megatron-LM's
            ``--num-distributed-optimizer-instances``: the distributed
            optimizer is replicated N times, each copy sharding the states
            over d*cp/N ranks (the experts' over e_d/N): ``parallel_state.py``
            builds intra_partial_data_parallel_size = d*cp // N and
            intra_partial_expert_data_parallel_size = e_d // N.

    Raises:
        TypeError, ValueError: a value out of range, an option of the other
            accounting, t, p invalid for the model, ep not dividing
            num_experts, etp not dividing moe_ffn_hidden_size, ep*etp not
            dividing t*d, ep/etp for a dense model, or N > 1 without the
            distributed optimizer or not dividing d*cp and e_d.

    >>> model_states(7_500_000_000, d=64, zero_stage=1).total / 1e9   # ZeRO Fig. 1
    31.40625
    """
    choice("optimizer", optimizer, OPTIMIZERS[:1])   # Muon needs the layers' matrices
    choice("accounting", accounting, ACCOUNTINGS)
    if fp8_format(fp8):  # the states without FP8, plus TE's per-layer FP8 state
        from .fp8_states import fp8_stage_bytes
        states = model_states(model_or_params, t=t, p=p, d=d, optimizer=optimizer,
                              accounting=accounting, zero_stage=zero_stage,
                              distributed_optimizer=distributed_optimizer, stage=stage,
                              stage_layers=stage_layers, ep=ep, etp=etp, cp=cp,
                              moe_layers=moe_layers,
                              num_distributed_optimizer_instances=(
                                  num_distributed_optimizer_instances))
        extra = fp8_stage_bytes(model_or_params, fp8, t, p, stage_layers, ep=ep, etp=etp,
                                moe_layers=moe_layers)[states.stage]
        return replace(states, weights=states.weights + extra)
    d, cp = positive_int("d", d), positive_int("cp", cp)
    flag("distributed_optimizer", distributed_optimizer)
    if integer("zero_stage", zero_stage, "0, 1, 2 or 3") not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage!r}")
    if accounting == "megatron" and zero_stage:
        raise ValueError(f"zero_stage={zero_stage} belongs to accounting='zero'; "
                         "Megatron-LM shards optimizer states with distributed_optimizer=True")
    if accounting == "zero" and distributed_optimizer:
        raise ValueError("distributed_optimizer=True belongs to accounting='megatron'; "
                         "with accounting='zero' use zero_stage=1")
    per_stage = _per_stage(model_or_params, t, p, stage_layers, ep, etp, moe_layers)
    if stage is None:
        stage = max(range(len(per_stage)), key=lambda i: sum(per_stage[i]))
    elif integer("stage", stage, "a stage index") not in range(len(per_stage)):
        raise ValueError(f"stage must be an int in 0..{len(per_stage) - 1}, got {stage!r}")
    dense, experts = per_stage[int(stage)]
    e_d = expert_data_parallel(model_or_params, t, d, ep, etp, cp) if experts else d * cp
    instances = _instances(num_distributed_optimizer_instances, distributed_optimizer, d * cp, e_d)
    sharded = {"zero": (zero_stage >= 3, zero_stage >= 2, zero_stage >= 1),
               "megatron": (False, False, distributed_optimizer)}[accounting]
    if getattr(model_or_params, "lora_rank", None) is not None:  # frozen base, adapters
        from .lora_states import adapter_parameters, lora_model_states
        adapters = adapter_parameters(model_or_params, t, p, stage_layers)[int(stage)]
        return ModelStates(dense + adapters, stage=int(stage), frozen_parameters=dense,
                           **lora_model_states(dense, adapters, BYTES_PER_PARAMETER[accounting],
                                               d * cp // instances, sharded))
    ranks, expert_ranks = d * cp // instances, e_d // instances
    w, g, o = (_share(dense * k, ranks, cut) + _share(experts * k, expert_ranks, cut)
               for k, cut in zip(BYTES_PER_PARAMETER[accounting], sharded))
    return ModelStates(dense + experts, w, g, o, int(stage), experts)


def _instances(n, distributed_optimizer: bool, dense_ranks: int, expert_ranks: int) -> int:
    """``num_distributed_optimizer_instances`` checked (:func:`model_states`)."""
    n = positive_int("num_distributed_optimizer_instances", n)
    if n > 1 and not distributed_optimizer:
        raise ValueError(f"num_distributed_optimizer_instances={n} replicates the distributed "
                         "optimizer: it needs distributed_optimizer=True")
    if dense_ranks % n or expert_ranks % n:
        raise ValueError(f"num_distributed_optimizer_instances={n} must divide d*cp={dense_ranks}"
                         f" and the expert data-parallel size {expert_ranks} (parallel_state.py)")
    return n


def sixteen_bit_gradients(states: ModelStates, ranks: int, expert_ranks: int,
                          distributed_optimizer: bool) -> ModelStates:
    """``states`` (accounting ``"megatron"``) with Megatron-LM's 16-bit
    gradient buffer: ``--fp16`` without ``--accumulate-allreduce-grads-in-fp32``,
    or ``--grad-reduce-in-bf16``.

    The buffer takes the parameters' dtype, 2 bytes per trainable parameter
    (``megatron/core/distributed/param_and_grad_buffer.py``: ``param.dtype``
    unless ``grad_reduce_in_fp32``), not 4. The optimizer's fp32 main
    parameters need fp32 gradients, so its step copies them:
    ``Float16OptimizerWithFloat16Params._copy_model_grads_to_main_grads``
    (``main_param.grad = model_param.main_grad.float()``, 4 bytes per
    parameter) or, with the distributed optimizer, the rank's shard
    (``distrib_optimizer.py``: ``shard_model_grad.float()``, 4 bytes over
    ``ranks``, ``expert_ranks`` for the routed experts). Of an fp32 buffer
    ``.float()`` is the tensor itself, so the 4-byte buffer makes no copy.
    The copies stay until the next step's ``zero_grad`` (``set_to_none``),
    after the step: :attr:`ModelStates.step_gradients`.

    Args:
        states: the states with an fp32 buffer (4 bytes per trainable
            parameter, never sharded in Megatron-LM's accounting).
        ranks, expert_ranks: the ranks the distributed optimizer shards the
            dense and the expert parameters over.
    """
    trainable, experts = states.gradients // 4, states.expert_parameters
    copies = (_share(4 * (trainable - experts), ranks, distributed_optimizer)
              + _share(4 * experts, expert_ranks, distributed_optimizer))
    return replace(states, gradients=2 * trainable, step_gradients=copies)


def _share(nbytes: int, ranks: int, cut: bool) -> int:
    return -(-nbytes // ranks) if cut else nbytes


@lists_keywords
def expert_data_parallel(model: ModelConfig, t: int, d: int, ep: int = 1,
                         etp: int | None = None, cp: int = 1) -> int:
    """The expert data-parallel size e_d = t*cp*d/(ep*etp): Megatron-LM
    regroups a pipeline stage's t*cp*d ranks as etp x ep x e_d
    (``parallel_state.py``: initialize_model_parallel; world size
    t*p*d*cp); cp is the context-parallel size, default 1.

    Raises:
        TypeError, ValueError: as :func:`expert_sizes`, or ep*etp not
            dividing t*cp*d.
    """
    instance("model", model, ModelConfig, "actmem.PRESETS['mixtral-8x7b']")
    t, d = positive_int("t", t), positive_int("d", d)  # before any arithmetic
    ep, etp = expert_sizes(model, t, ep, etp)
    ranks = t * positive_int("cp", cp) * d
    if ranks % (ep * etp):
        where = "t*d" if cp == 1 else "t*cp*d"
        raise ValueError(f"ep*etp={ep * etp} (ep={ep}, etp={etp}) must divide {where}={ranks}: "
                         f"Megatron-LM folds the expert groups over the {where} ranks of a "
                         "pipeline stage")
    return ranks // (ep * etp)


@kept_by_repr(64)  # a frozen model: training_memory asks once per stage
def _per_stage(model_or_params, t: int, p: int, stage_layers, ep, etp, moe_layers=None
               ) -> tuple[tuple[int, int], ...]:
    if isinstance(model_or_params, ModelConfig):
        return tuple(stage_parameter_groups(model_or_params, t, p, stage_layers, ep, etp,
                                            moe_layers))
    params = positive_int("model_or_params", model_or_params)
    if (positive_int("t", t), positive_int("p", p)) != (1, 1) or stage_layers is not None:
        raise ValueError(f"t={t}, p={p}, stage_layers={shown(stage_layers)}: a bare parameter "
                         "count cannot be split over GPUs; it takes t=1, p=1 and "
                         "stage_layers=None, or pass a ModelConfig (e.g. actmem.PRESETS[...])")
    etp = None if etp is None else positive_int("etp", etp)
    if positive_int("ep", ep) != 1 or etp is not None or moe_layers is not None:
        raise ValueError(f"ep={ep}, etp={etp}, moe_layers={shown(moe_layers)}: a bare "
                         "parameter count has no experts to split; it takes ep=1, etp=None "
                         "and moe_layers=None, or pass an MoE ModelConfig (e.g. "
                         "actmem.MOE_PRESETS[...])")
    return ((params, 0),)

"""Which parameters one GPU of each pipeline stage holds (counts, not bytes).

Which parameters a GPU holds: pipeline stage ``i`` has ``L/p`` layers; the
first stage also holds the input embedding (and a learned position table),
the last stage the final norm and the output layer, or, with tied
embeddings and ``p > 1``, its own copy of the embedding (Megatron-LM keeps
one on each end and all-reduces their gradients), and any multi-token
prediction modules. Tensor parallelism
divides the matrices, column-parallel biases and the vocabulary by t and
replicates norms, row-parallel biases and positions (:mod:`actmem.run.job.parameters`).

An MoE layer's routed experts are split over ``ep * etp`` GPUs
(:func:`expert_sizes`); :mod:`actmem.run.model_states.states` puts bytes on these counts.
"""

from __future__ import annotations

from ..job.model import ModelConfig
from ..job.parameters import ParameterCount, parameter_count
from ..schedule.stage_split import split_layers
from ..schedule.training import chunk_layers
from ...validate import divides, integer, positive_int, shown


def stage_parameters(model: ModelConfig, t: int = 1, p: int = 1,
                     stage_layers=None, ep: int = 1, etp: int | None = None) -> list[int]:
    """Parameters on one GPU of each pipeline stage (stage 0 first), with
    the vocabulary padded for t as Megatron-LM pads it: the sums of
    :func:`stage_parameter_groups`.

    Raises:
        TypeError, ValueError: as :func:`stage_parameter_groups`.
    """
    return [sum(groups) for groups in stage_parameter_groups(model, t, p, stage_layers,
                                                             ep, etp)]


def stage_parameter_groups(model: ModelConfig, t: int = 1, p: int = 1, stage_layers=None,
                           ep: int = 1, etp: int | None = None,
                           moe_layers=None) -> list[tuple[int, int]]:
    """(other parameters, routed experts' parameters) on one GPU of each
    pipeline stage, stage 0 first; the stages hold consecutive layers.

    Args:
        stage_layers: layers per stage (:func:`actmem.split_layers`);
            default ``L/p`` each.
        ep, etp: expert-parallel and expert tensor-parallel sizes (MoE
            models only; etp default t).
        moe_layers: MoE layers on each stage, where its chunks hold layers
            that are not consecutive (interleaved or V schedules,
            :func:`actmem.run.moments.moe_timeline.stage_moe_layers`); default those
            among the stage's consecutive layers.

    Raises:
        TypeError, ValueError: t or p invalid for the model (t must divide
            the split dimensions; without ``stage_layers``, p must divide L);
            ep not dividing num_experts, etp not dividing
            moe_ffn_hidden_size, or ep/etp given for a dense model.
    """
    t = model.layer(t, moe=False).t  # a plain int that divides a, h, kv_heads, f
    ep, etp = expert_sizes(model, t, ep, etp)
    count = parameter_count(model, vocab=model.padded_vocab(t))
    dense = layer_parameters(count, False, t, ep, etp)[0]
    moe = layer_parameters(count, True, t, ep, etp)[0] if count.moe_layers else 0
    stages = [[(layers - n_moe) * dense + n_moe * moe, n_moe * count.experts // (ep * etp)]
              for layers, n_moe in stage_layer_kinds(model, p, stage_layers, moe_layers)]
    stages[0][0] += count.embedding // t + count.positions
    stages[-1][0] += count.final_norm + _output_weights(count, p) // t
    stages[-1] = [a + b for a, b in zip(stages[-1], _mtp_parameters(count, t, p, dense, moe,
                                                                     ep * etp))]
    return [tuple(groups) for groups in stages]


def layers_per_stage(model: ModelConfig, p: int = 1, stage_layers=None) -> list[int]:
    """Layers on each of the p pipeline stages: ``stage_layers`` checked by
    :func:`actmem.split_layers`, or L/p each."""
    if stage_layers is None:
        return [chunk_layers(model.L, p)] * p
    return [sum(chunks) for chunks in split_layers(model.L, p, stage_layers=stage_layers)]


def stage_layer_kinds(model: ModelConfig, p: int = 1, stage_layers=None,
                      moe_layers=None) -> list[tuple[int, int]]:
    """(layers, MoE layers among them) on each pipeline stage, stage 0
    first: ``stage_layers`` checked by :func:`actmem.split_layers` (default
    ``L/p`` each), and ``moe_layers`` (as :func:`stage_parameter_groups`)
    or the MoE layers among each stage's consecutive layers.

    Raises:
        TypeError, ValueError: as :func:`actmem.split_layers` and
            :func:`stage_parameter_groups`' ``moe_layers``.
    """
    stage_layers = layers_per_stage(model, p, stage_layers)
    pattern = model.moe_pattern()
    counts = _moe_layers(moe_layers, stage_layers, sum(pattern))
    firsts = [sum(stage_layers[:i]) for i in range(len(stage_layers))]
    if counts is None:
        counts = [sum(pattern[first:first + n]) for first, n in zip(firsts, stage_layers)]
    return list(zip(stage_layers, counts))


def layer_parameters(count: ParameterCount, moe: bool, t: int, ep: int,
                     etp: int) -> tuple[int, int]:
    """One layer's parameters on one GPU (``count``: :func:`actmem.parameter_count`
    at the padded vocabulary): (its own, split over t where tensor parallelism
    splits them, and its routed experts', over ep x etp; 0 for a dense layer)."""
    if not moe:
        return sum(count.layer_split.values()) // t + sum(count.layer_replicated.values()), 0
    return (sum(count.moe_split.values()) // t + sum(count.moe_replicated.values()),
            count.experts // (ep * etp))


def _mtp_parameters(count: ParameterCount, t: int, p: int, dense: int, moe: int,
                    expert_ranks: int) -> tuple[int, int]:
    """(other parameters, routed experts') of the multi-token prediction
    modules on one GPU of the last stage, where Megatron-LM builds them
    without a custom layout (``multi_token_prediction.py``:
    mtp_on_this_rank): per module a layer of the last layer's kind, its
    ``eh_proj`` (split over t) and its three norms; and with p > 1 the
    stage's own embedding (``gpt_model.py``: ``pre_process or
    mtp_process`` builds ``LanguageModelEmbedding``), a copy kept in step
    with the first stage's beside the output layer's own weight
    (``language_module.py``: setup_embeddings_and_output_layer)."""
    n = count.mtp_layers
    if not n:
        return 0, 0
    layer = moe if count.mtp_moe else dense
    experts = n * count.experts // expert_ranks if count.mtp_moe else 0
    embedding = count.embedding // t + count.positions if p > 1 else 0
    return n * (layer + count.mtp_split // t + count.mtp_replicated) + embedding, experts


def _moe_layers(moe_layers, stage_layers, total: int) -> list[int] | None:
    """``moe_layers`` checked: None, or per stage an int from 0 to the
    stage's layers, ``total`` in all.

    Raises:
        TypeError: not None nor a list or tuple of ints.
        ValueError: the wrong number of stages, a count out of its range, or
            the wrong sum; the message says what each stage may take.
    """
    if moe_layers is None:
        return None
    allowed = (f"None or a list of p={len(stage_layers)} ints, each stage's MoE layers: at most "
               f"its layers {list(stage_layers)}, {total} MoE layers in all")
    try:
        if not isinstance(moe_layers, (list, tuple)):
            raise TypeError
        counts = [integer("moe_layers", n) for n in moe_layers]
    except TypeError:
        raise TypeError(f"moe_layers must be {allowed}, got {shown(moe_layers)} "
                        f"({type(moe_layers).__name__})") from None
    if (len(counts) != len(stage_layers) or sum(counts) != total
            or any(not 0 <= n <= s for n, s in zip(counts, stage_layers))):
        raise ValueError(f"moe_layers={shown(moe_layers)} must give each of the "
                         f"{len(stage_layers)} stages at most its layers {list(stage_layers)}, "
                         f"{total} MoE layers in all (moe_layers must be {allowed})")
    return counts


def expert_sizes(model: ModelConfig, t: int, ep: int, etp: int | None) -> tuple[int, int]:
    """``(ep, etp)`` checked against the model, etp defaulting to t.

    Raises:
        TypeError, ValueError: a size is not a positive int (etp: or
            None; checked before the rest); ep does not
            divide num_experts or etp does not divide moe_ffn_hidden_size (the
            message lists the valid values); ep or etp for a dense model.
    """
    ep = positive_int("ep", ep)
    etp = None if etp is None else positive_int("etp", etp)  # its own value named first
    if model.num_experts is None:
        if ep != 1 or etp is not None:
            raise ValueError(f"ep={ep}, etp={etp}: expert parallelism needs an MoE model "
                             "(num_experts); a dense model takes ep=1 and etp=None")
        return 1, 1
    etp = t if etp is None else etp
    divides("ep", ep, num_experts=model.num_experts)
    divides("etp", etp, moe_ffn_hidden_size=model.moe_ffn_hidden_size or model.layer(moe=False).f)
    return ep, etp


def _output_weights(count: ParameterCount, p: int) -> int:
    """The output layer's matrix on the last stage: untied, or the tied
    embedding's second copy when the last stage is not the first."""
    if count.output_layer:
        return count.output_layer
    return count.embedding if p > 1 else 0

"""Notebook 09's planner: pick a model, a parallel layout, the framework's
choices and a GPU; see every stage's parts, its peak (the most alive at one
moment of the step, and the event that sets it), the timeline of the first,
the last and the most loaded stage, and a fits / does-not-fit verdict.

The menus offer only what :func:`actmem.training_memory` accepts: t divides
the heads, hidden size, key/value heads and MLP width (and s under sequence
parallelism); p is any stage count up to 64 for which some split of the L
layers is offered (:func:`split_keys`: the even split, Megatron-LM's
first/last-stage layer counts, or its embedding/loss accounting); schedule, v
and m as in notebook 05 (:func:`actmem.schedule_views.couple`); full
recomputation's group size k divides the layers of the largest model chunk;
the GPUs are those of :data:`actmem.GPUS` that run the job (bf16, and
FlashAttention if chosen: compute capability 8.0), with
the capacity their driver reports. Today's levers, context parallelism (cp
and its comm type), FP8 and the modules recomputed under selective
recomputation, offer only what each feature's checks accept
(:mod:`actmem.views.fit_levers`). Like the other view modules it imports
ipywidgets and matplotlib; ``import actmem`` does not import it.

The job's sequence length s and micro-batch size b are menus too (s a
power of two up to the model's position limit,
:func:`actmem.views.fit_levers.sequence_choices`; b 1 to 16), and so is
the reserve: the default estimate of what a GPU needs beyond PyTorch's
peak (:mod:`actmem.run.reserve`), or a fixed number of GiB. The GPU menu
lists the GPUs that run bf16 and the model's attention
(:func:`actmem.views.fit_levers.gpu_choices`: not the V100s). The
planner asks for t, p, cp and d and shows the GPUs they make, t*p*cp*d,
rather than taking a GPU count and offering the d that fill it: a learner
who fixes t, p and cp and doubles d sees the count double and the
per-GPU optimizer states fall, which a fixed count would hide.

Each change recomputes only what changed: the menus and the models are
kept by their arguments (:func:`actmem.views.fit_levers.menu_cache`), and
:func:`actmem.training_memory`'s results by its arguments
(:func:`planner_memory`), so a learner who goes back to a setting costs a
look-up; no number changes.
"""

from __future__ import annotations

import functools
import html

import ipywidgets as widgets

from ..language import english, tr
from ..layer.config import RECOMPUTE
from ..layer.dimensions import valid_tensor_parallel_sizes
from .fit_figures import event_label, timeline_figure
from .fit_levers import (B_MAX, RESERVE_DEFAULT, RESERVE_GIB, comm_arguments, comm_options,
                         cp_choices, fp8_options, gpu_choices, gpus_text, job_model,
                         menu_cache, module_options, offload_choices, reserve_argument,
                         reserve_options, sequence_choices)
from ..run.moments.framework import GRADIENT_BUFFERS
from ..run.moments.loss import LOSSES
from ..run.job.gpus import GPUS as GPU_PRESETS
from ..run.peak import PARTS, TrainingMemory, training_memory
from ..run.job.presets import MOE_PRESETS, PRESETS
from .schedule_views import chunk_choices, microbatch_choices, restrict_schedule, \
    schedule_options, schedule_rule, takes_v
from .train_cli import verdict
from ..run.schedule.stage_split import split_layers
from ..units import format_value
from ..validate import choice, common_divisors, flag, instance
from .readouts import HTML, TEXT
from .widgets import _dropdown, _Explorer, _option_values, closest

D_CHOICES = (1, 2, 4, 8, 16, 32, 64)
"""Data-parallel sizes offered."""
P_MAX = 64
GPUS = tuple(GPU_PRESETS)
GPU_RULE = ("a GPU of actmem.GPUS that runs bf16 and the model's attention: compute "
            "capability 8.0 or newer")
MODEL_NAMES = {"gpt2-large": "GPT-2 774M", "gpt3-175b": "GPT-3 175B",
               "22b": "22B (Korthikanti et al.)", "175b": "175B (Korthikanti et al.)",
               "530b": "530B (Korthikanti et al.)", "1t": "1T (Korthikanti et al.)",
               "llama2-7b": "LLaMA-2-7B", "llama2-13b": "LLaMA-2-13B", "llama2-70b": "LLaMA-2-70B",
               "llama3-8b": "LLaMA-3-8B", "llama3-70b": "LLaMA-3-70B",
               "llama3.1-405b": "Llama-3.1-405B", "mixtral-8x7b": "Mixtral 8x7B",
               "deepseek-moe-16b": "DeepSeekMoE 16B", "deepseek-v3": "DeepSeek-V3",
               "deepseek-v2-lite": "DeepSeek-V2-Lite", "qwen3-30b-a3b": "Qwen3-30B-A3B",
               "qwen3-235b-a22b": "Qwen3-235B-A22B"}
"""The name the planner's model menu shows for each preset of
:data:`actmem.PRESETS` and :data:`actmem.MOE_PRESETS` (its value stays the
preset's key); the sources are in each preset's ``source``."""
MODELS = {**PRESETS, **MOE_PRESETS}
"""The planner's models: the dense presets, then the mixture-of-experts ones."""
"""GPUs offered: the names of :data:`actmem.GPUS` (capacity as the driver
reports it: an "A100 80GB" has 81920 MiB = 80 GiB)."""
LOSS_LABELS = {"vocab_parallel": "Megatron-LM cross-entropy (fp32 copy)",
               "torch": "PyTorch F.cross_entropy",
               "fused": "fused loss (no logits kept)"}
"""Menu labels of :data:`actmem.LOSSES`."""
GRADIENT_LABELS = {"persistent": "gradient buffer from the start",
                   "backward": "gradients made in backward"}
"""Menu labels of :data:`actmem.GRADIENT_BUFFERS`."""
STATES = {
    "Megatron-LM (18 B/param)": ("megatron", 0, False),
    "Megatron-LM distributed optimizer": ("megatron", 0, True),
    "ZeRO stage 0 (16 B/param)": ("zero", 0, False),
    "ZeRO stage 1": ("zero", 1, False),
    "ZeRO stage 2": ("zero", 2, False),
    "ZeRO stage 3": ("zero", 3, False),
}
"""Model-state options: label -> (accounting, zero_stage, distributed_optimizer)."""
SPLITS = {"even": {},
          "embedding": {"account_for_embedding_in_pipeline_split": True},
          "loss": {"account_for_loss_in_pipeline_split": True},
          "embedding+loss": {"account_for_embedding_in_pipeline_split": True,
                             "account_for_loss_in_pipeline_split": True},
          "first": "decoder_first_pipeline_num_layers",
          "last": "decoder_last_pipeline_num_layers"}
"""Stage splits the planner offers: key -> :func:`actmem.split_layers`
options (for ``first:n`` and ``last:n``, the option that takes n).
Megatron-LM's ``--account-for-embedding-in-pipeline-split``,
``--account-for-loss-in-pipeline-split`` and
``--decoder-first/last-pipeline-num-layers``."""


def split_arguments(key: str) -> dict:
    """:func:`actmem.training_memory` options of a split key (:data:`SPLITS`).

    >>> split_arguments("last:6")
    {'decoder_last_pipeline_num_layers': 6}
    """
    kind, _, n = key.partition(":")
    options = SPLITS[kind]
    return {options: int(n)} if n else dict(options)


@functools.lru_cache(maxsize=1024)
def _split(L: int, p: int, v: int, key: str):
    try:
        return split_layers(L, p, v, **split_arguments(key))
    except ValueError:
        return None


@functools.cache
def split_keys(L: int, p: int, v: int = 1) -> tuple[str, ...]:
    """The splits of ``L`` layers over ``p`` stages of ``v`` chunks that
    Megatron-LM accepts (:func:`actmem.split_layers`): the even split, the
    embedding/loss accounting, and a first or last stage of ``n`` layers,
    ``1 <= n <= ceil(L/p)`` (to relieve that stage); none that gives the
    even split's counts again.

    >>> split_keys(32, 3)
    ('embedding', 'loss', 'first:2', 'first:4', 'first:6', 'first:8', 'first:10', 'last:2', \
'last:4', 'last:6', 'last:8', 'last:10')
    """
    return tuple(_offered_splits(L, p, v))


def _offered_splits(L: int, p: int, v: int):
    """:func:`split_keys`, one at a time (a menu that only asks whether
    there is one stops at the first)."""
    even = _split(L, p, v, "even")
    if even is not None:
        yield "even"
    ends = (f"{end}:{n}" for end in ("first", "last") for n in range(1, -(-L // p) + 1)
            if p >= 2)
    yield from (k for k in ("embedding", "loss", "embedding+loss", *ends)
                if _split(L, p, v, k) not in (None, even))


def split_label(key: str, L: int, p: int, v: int = 1, tr=tr) -> str:
    """A split's menu label in ``tr``'s language, with its layers per stage
    (a run of more than two equal stages written ``3 stages of 9``).

    >>> split_label("last:5", 32, 4, tr=english)
    'last stage 5 layers (3 stages of 9, 5)'
    """
    counts = [sum(chunks) for chunks in _split(L, p, v, key)]
    runs, i = [], 0
    while i < len(counts):
        j = i
        while j < len(counts) and counts[j] == counts[i]:
            j += 1
        runs.append(tr("{k} stages of {n}").format(k=j - i, n=counts[i]) if j - i > 2
                    else tr(", ").join(map(str, counts[i:j])))
        i = j
    kind, _, n = key.partition(":")
    names = {"even": tr("even split"), "embedding": tr("embedding counted as a layer"),
             "loss": tr("loss counted as a layer"),
             "embedding+loss": tr("embedding and loss counted as layers"),
             "first": tr("first stage {n} layers"), "last": tr("last stage {n} layers")}
    return tr("{split} ({layers})").format(split=names[kind].format(n=n),
                                           layers=tr(", ").join(runs))


@menu_cache
def split_options(L: int, p: int, v: int = 1, tr=tr) -> list[tuple[str, str]]:
    """The split menu: ``(label, key)`` pairs of :func:`split_keys`."""
    return [(split_label(k, L, p, v, tr), k) for k in split_keys(L, p, v)]


@menu_cache
def pipeline_choices(L: int) -> list[int]:
    """p values up to 64 (and at most L) with some split offered.

    >>> pipeline_choices(8)  # 6: no first or last stage of n <= 2 leaves 5 equal stages
    [1, 2, 3, 4, 5, 7, 8]
    """
    return [p for p in range(1, min(L, P_MAX) + 1) if next(_offered_splits(L, p, 1), None)]


@menu_cache
def tensor_choices(model, sequence_parallel: bool) -> list[int]:
    """t values that divide a, h, kv_heads and f (and s with sequence
    parallelism); for an MoE model those its MoE layers take too (t > 1
    only with sequence parallelism, t dividing the shared experts' width)."""
    c = model.layer(moe=False)
    ts = valid_tensor_parallel_sizes(c.h, c.a, c.s if sequence_parallel else None,
                                     kv_heads=c.g, ffn_hidden_size=c.f)
    if model.num_experts is None:
        return ts
    shared = model.moe_shared_expert_intermediate_size or 0
    return [t for t in ts if (t == 1 or sequence_parallel) and shared % t == 0]


@menu_cache
def expert_choices(model, t: int, d: int, ep: int | None = None,
                   cp: int = 1) -> tuple[list[int], list[int]]:
    """(ep values, etp values) the planner offers: ep divides the experts E,
    etp the experts' width f_e, and ep*etp divides t*cp*d (Megatron-LM folds
    the expert groups over a stage's t*cp*d ranks, :func:`actmem.expert_data_parallel`);
    the etp values for ``ep`` (default its smallest value). A dense model:
    ``([1], [1])`` (no experts to split)."""
    if model.num_experts is None:
        return [1], [1]
    f_e = model.moe_ffn_hidden_size or model.layer(moe=False).f
    ranks = t * cp * d
    eps = [e for e in common_divisors(model.num_experts) if ranks % e == 0]
    ep = eps[0] if ep not in eps else ep
    return eps, [x for x in common_divisors(f_e) if ranks % (ep * x) == 0]


HOT_EXPERT = (1, 1.1, 1.25, 1.5, 2, 3, 4, 6, 8, 16, 32, 64)
"""The busiest expert's loads the planner offers (:func:`hot_expert_choices`)."""


def hot_expert_choices(model) -> list[int | float]:
    """The ``moe_hot_expert`` values the planner offers: those of
    :data:`HOT_EXPERT` up to E/k, and E/k itself (every token picks the hot
    expert); ``[1]`` for a dense model or one with a capacity factor (which
    caps every expert: the what-if is for dropless routing)."""
    if model.num_experts is None or model.moe_expert_capacity_factor is not None:
        return [1]
    top = model.num_experts / model.moe_router_topk
    return sorted({*(f for f in HOT_EXPERT if f <= top), int(top) if top.is_integer() else top})


@menu_cache
def recompute_options(layers: int, model=None, t: int = 1, sequence_parallel: bool = False
                      ) -> list[tuple[str, tuple]]:
    """(label, (recompute, k)) pairs, labelled in the current language:
    none, selective, and full recomputation in groups of k layers for
    every k dividing ``layers``; with ``model`` (at ``t`` and
    ``sequence_parallel``), after ``selective`` the named-module variants
    ``(label, ("selective", 1, modules))`` of
    :func:`actmem.views.fit_levers.module_options` (Megatron-LM's
    ``--recompute-modules``)."""
    plain = [(tr(mode), (mode, 1)) for mode in RECOMPUTE if mode != "full"]
    named = [] if model is None else module_options(model, t, sequence_parallel)
    return plain + named + [(tr("full, k={k}").format(k=k), ("full", k))
                            for k in common_divisors(layers)]


@menu_cache
def interleaving_chunks(L: int, p: int) -> list[int]:
    """The v of :func:`actmem.schedule_views.chunk_choices` for which the
    planner offers some m (at most 32, a multiple of p): none for p > 32,
    so that interleaving is offered only where it can run."""
    return [v for v in chunk_choices(L, p) if microbatch_choices("interleaved", p, v)]


def run_arguments(values: dict) -> dict:
    """The planner's control values as :func:`actmem.training_memory`
    arguments (model excluded); cp, cp_comm_type (a key of
    :func:`actmem.views.fit_levers.comm_keys`), fp8 (``"off"`` or a format)
    and offload (``cpu_offloading_num_layers``) default to off, the reserve
    (GiB, or ``"default"``) to the default estimate, attention_mask
    (``create_attention_mask_in_dataloader``) to Megatron-LM's default, on,
    and a recompute value
    ``("selective", 1, modules)`` gives ``recompute_modules``. s and b are the model's (:func:`planner_model`)."""
    recompute, k, *modules = values["recompute"]
    accounting, zero_stage, distributed = values["states"]
    moe = MODELS[values["model"]].num_experts is not None
    levers = dict(cp=values.get("cp", 1), **comm_arguments(values.get("cp_comm_type", "p2p")),
                  fp8=None if values.get("fp8", "off") == "off" else values["fp8"],
                  recompute_modules=list(modules[0]) if modules else None,
                  cpu_offloading_num_layers=values.get("offload", 0),
                  create_attention_mask_in_dataloader=values.get("attention_mask", True))
    return dict(**split_arguments(values["split"]), **levers,
                ep=values.get("ep", 1) if moe else 1,
                etp=values.get("etp") if moe else None,
                moe_hot_expert=values.get("hot_expert", 1) if moe else 1,
                t=values["t"], p=values["p"], d=values["d"], m=values["m"],
                schedule=values["schedule"], v=values["v"],
                sequence_parallel=values["sequence_parallel"], recompute=recompute,
                recompute_num_layers=k, accounting=accounting, zero_stage=zero_stage,
                distributed_optimizer=distributed, gpu_memory=values["gpu"],
                loss=values["loss"], gradient_buffer=values["gradient_buffer"],
                reserve=reserve_argument(values.get("reserve", RESERVE_DEFAULT)))


def planner_model(values: dict):
    """The planner's model: the preset ``values["model"]`` with its
    FlashAttention choice, at ``values["s"]`` and ``values["b"]`` (default
    the preset's; :func:`actmem.views.fit_levers.job_model`)."""
    return _trained(values["model"], values["flash_attention"], values.get("s"),
                    values.get("b"))


@functools.lru_cache(maxsize=256)
def _trained(name: str, flash_attention: bool, s: int | None, b: int | None):
    preset = MODELS[name]
    return job_model(preset, preset.s if s is None else s, preset.b if b is None else b
                     ).with_(flash_attention=flash_attention)


def planner_memory(model, **arguments) -> TrainingMemory:
    """:func:`actmem.training_memory` of ``model`` and ``arguments``
    (:func:`run_arguments`), kept for the last 64 settings (a pure function:
    the same arguments give the same result)."""
    modules = arguments.get("recompute_modules")
    key = {**arguments, "recompute_modules": None if modules is None else tuple(modules)}
    return _memory(model, tuple(sorted(key.items())))


@functools.lru_cache(maxsize=64)
def _memory(model, arguments: tuple) -> TrainingMemory:
    arguments = dict(arguments)
    if arguments["recompute_modules"] is not None:
        arguments["recompute_modules"] = list(arguments["recompute_modules"])
    return training_memory(model, **arguments)


def stages_html(result: TrainingMemory, tr=english, layers=None) -> str:
    """Parts (rows) by stage (columns), GiB, their sum, each stage's peak
    and the event that sets it (and the host memory of offloaded layers,
    when there is any); with ``layers`` (a count per stage) a first row of
    Transformer layers; words translated by ``tr``
    (:mod:`actmem.language`)."""
    def row(name, cells, bold=False):
        cells = "".join(f"<td><b>{c}</b></td>" if bold else f"<td>{c}</td>" for c in cells)
        return f"<tr><td>{'<b>' + name + '</b>' if bold else name}</td>{cells}</tr>"
    head = "".join(f"<th>{tr('stage {i}').format(i=s.stage)}</th>" for s in result.stages)
    rows = "" if layers is None else row(tr("Transformer layers"), layers)
    rows += "".join(row(tr(part.replace("_", " ")),
                       [format_value(s.parts[part], "GiB") for s in result.stages])
                   for part in PARTS)
    rows += row(tr("sum of the parts"), [format_value(s.total, "GiB") for s in result.stages])
    rows += row(tr("peak (one moment)"), [format_value(s.peak, "GiB") for s in result.stages],
                bold=True)
    rows += row(tr("peak event"), [html.escape(event_label(s.timeline.peak.label, tr))
                                   for s in result.stages])
    if any(s.host_memory for s in result.stages):  # offloaded layers' pinned host buffers
        rows += row(tr("host memory (offload)"), [format_value(s.host_memory, "GiB")
                                                  for s in result.stages])
    return f"<table><tr><th>{tr('GiB per GPU')}</th>{head}</tr>{rows}</table>"


class FitPlanner(_Explorer):
    """Preset, t, p, the stage split, d, m, schedule, v, recomputation (and
    k), FlashAttention,
    sequence parallelism, model-state sharding, the loss, the gradients'
    lifetime and the GPU -> every stage's memory, the verdict, and the
    timeline figure of the first, last and most loaded stages
    (:func:`actmem.fit_figures.timeline_figure`).

    ``flash_attention=None`` (the default) takes the preset's choice, and
    choosing another model takes that model's (the LLaMA presets use it).
    The other defaults are valid for every model: ``sequence_parallel=None``
    is on for a mixture-of-experts model and off for a dense one; ``t=None``
    is 2, ``m=None`` 8 and ``etp=None`` t where the menu offers them, else
    the closest value offered (:func:`actmem.views.widgets.closest`);
    ``v=None`` is the schedule's smallest v (1, or 2 for interleaving).
    ``split``: a key of :func:`split_keys` (``"even"``, ``"last:6"`` ...);
    None takes the even split where p divides L, else the first offered.
    ``ep``, ``etp``: expert-parallel and expert tensor-parallel sizes of a
    mixture-of-experts model (:data:`actmem.MOE_PRESETS`; etp None: t), the
    values of :func:`expert_choices`; choosing an MoE model turns sequence
    parallelism on (Megatron-LM refuses MoE with t > 1 without it).
    ``hot_expert``: the busiest expert's copies over the mean
    (``moe_hot_expert``), a value of :func:`hot_expert_choices`.
    ``cp``, ``cp_comm_type`` (``"p2p"``, ``"allgather"``, ``"a2a"`` or
    ``"a2a+p2p:NxM"``), ``fp8`` (``"off"``, ``"e4m3"``, ``"hybrid"``) and a
    ``recompute`` of ``("selective", 1, modules)`` (Megatron-LM's
    ``--recompute-modules``) and ``offload`` (``--cpu-offloading-num-layers``:
    p = 1, no recomputation, 1F1B, a dense model): the values of
    :mod:`actmem.views.fit_levers`.

    ``attention_mask``: Megatron-LM's ``--create-attention-mask-in-dataloader``
    (on by default; a b x s x s boolean mask per micro-batch; long-context
    launches turn it off with ``--no-create-attention-mask-in-dataloader``).
    ``s``, ``b``: sequence length and micro-batch size (None: the
    preset's; choosing another model takes its s), the values of
    :func:`actmem.views.fit_levers.sequence_choices` and 1 to 16;
    ``reserve``: ``"default"`` (the default estimate,
    :mod:`actmem.run.reserve`) or GiB set aside
    (:data:`actmem.views.fit_levers.RESERVE_GIB`), :func:`actmem.training_memory`'s
    ``reserve``. ``gpu``: a GPU of :func:`actmem.views.fit_levers.gpu_choices`
    (bf16 and FlashAttention need compute capability 8.0: no V100).

    Readouts: ``verdict`` (Label: the most loaded stage's peak and its
    event, the margin, fits or not; :func:`actmem.train_cli.verdict`),
    ``gpus`` (the GPUs the job uses, :func:`actmem.views.fit_levers.gpus_text`),
    ``stages`` (HTML, :func:`stages_html`).

    Raises:
        TypeError, ValueError: a value the planner does not offer; the
            message names the argument, its value, the values offered and
            why, naming the other argument that rules it out (a schedule
            not offered at this p, a v the schedule does not take).
    """

    def __init__(self, model="llama2-7b", t=None, p=2, d=2, m=None, schedule="1f1b", v=None,
                 split=None, recompute=("none", 1), flash_attention=None,
                 sequence_parallel=None,
                 states="Megatron-LM (18 B/param)", loss="vocab_parallel",
                 gradient_buffer="persistent", gpu="A100 80GB", ep=1, etp=None, cp=1,
                 cp_comm_type="p2p", fp8="off", offload=0, s=None, b=None,
                 reserve=RESERVE_DEFAULT, attention_mask=True, hot_expert=1):
        preset = MODELS[choice("model", model, tuple(MODELS))]
        if flash_attention is None:
            flash_attention = preset.flash_attention
        if sequence_parallel is None:  # as choosing the model does (restrict)
            sequence_parallel = preset.num_experts is not None
        flag("flash_attention", flash_attention)
        flag("sequence_parallel", sequence_parallel)
        s, b = preset.s if s is None else s, preset.b if b is None else b
        c = {"model": _dropdown("model", [(tr(MODEL_NAMES[k]), k) for k in MODELS], model),
             "s": _dropdown("s", sequence_choices(preset), s,
                            "a power of two up to the model's position limit"),
             "b": _dropdown("b", range(1, B_MAX + 1), b)}
        shape = planner_model(dict(model=model, flash_attention=preset.flash_attention,
                                   s=s, b=b))
        ts = tensor_choices(shape, sequence_parallel)
        t = _default(t, 2, ts)
        c |= {"t": _dropdown("t", ts, t, _t_rule(shape, sequence_parallel)),
             "p": _dropdown("p", pipeline_choices(shape.L), p,
                            f"p <= {P_MAX} and p <= L={shape.L}, with some split of the L "
                            "layers offered"),
             "d": _dropdown("d", D_CHOICES, d)}
        trained = shape.with_(flash_attention=flash_attention)
        c["cp"] = _dropdown("cp", cp_choices(trained, t, sequence_parallel), cp,
                            "2*cp divides s, FlashAttention for cp > 1")
        c["cp_comm_type"] = _dropdown("cp_comm_type", comm_options(
            trained, t, sequence_parallel, cp), cp_comm_type, "fit_levers.comm_keys")
        c["cp_comm_type"].description = tr("cp comm")
        eps, etps = expert_choices(shape, t, d, ep, cp)
        c["ep"] = _dropdown("ep", eps, ep, "ep divides the experts and t*d")
        etp = _default(etp, t, etps)
        c["etp"] = _dropdown("etp", etps, etp, "etp divides f_e, ep*etp divides t*d")
        c["etp"].description = tr("etp")  # a word in Chinese, not a symbol (the catalog's key)
        c["hot_expert"] = _dropdown("hot_expert", hot_expert_choices(shape), hot_expert,
                                    "1 to E/k, dropless routing (no capacity factor)")
        c["hot_expert"].description = tr("hot expert")
        chunks = interleaving_chunks(shape.L, p)
        c["schedule"] = _dropdown("schedule", schedule_options(chunks), schedule, schedule_rule(
            shape.L, p, chunks, [q for q in pipeline_choices(shape.L)
                                 if interleaving_chunks(shape.L, q)]))
        runs = [x for x in [1, *chunks] if takes_v(schedule, x)]  # not empty: schedule is offered
        v = runs[0] if v is None else v
        c["v"] = _dropdown("v", [1, *chunks], v, f"1, or v >= 2 with p*v dividing L={shape.L} "
                           f"at p={p}")
        if v not in runs:
            raise ValueError(f"v={v} does not run with schedule={schedule!r}; choose v among "
                             f"{', '.join(map(str, runs))}, or a schedule that takes v={v} "
                             f"({'1f1b' if v == 1 else 'interleaved'})")
        ms = microbatch_choices(schedule, p, v)
        m = _default(m, 8, ms)
        c["m"] = _dropdown("m", ms, m, f"the m <= 32 that schedule={schedule!r} takes at p={p}, "
                           f"v={v}" + ": multiples of p" * (schedule == "interleaved"))
        keys = split_keys(shape.L, p, v)
        split = _default_split(keys) if split is None else split
        c["split"] = _dropdown("split", split_options(shape.L, p, v), split,
                               "a key of fit_views.split_keys(L, p, v)")
        c["split"].description = tr("layers per stage")
        instance("recompute", recompute, tuple, "('selective', 1)")  # before it is sliced
        recompute = (*recompute[:2], *(tuple(m) for m in recompute[2:]))
        c["recompute"] = _dropdown("recompute", recompute_options(
            _largest_chunk(shape.L, p, v, split), trained, t, sequence_parallel), recompute,
            "k divides the largest chunk's layers")
        c["gpu"] = _dropdown("gpu", gpu_options(flash_attention), gpu, GPU_RULE)  # fp8 reads it
        c["fp8"] = _dropdown("fp8", fp8_options(trained, t, sequence_parallel, recompute[0],
                                                (*recompute[2:], None)[0], cp, gpu=gpu), fp8,
                             "Transformer Engine's FP8 dimensions, dense layers, cp=1, a GPU "
                             "of compute capability 8.9 or newer")
        c["offload"] = _offload_dropdown(offload_choices(shape, p, recompute[0], schedule),
                                         offload)
        c["flash_attention"] = widgets.Checkbox(value=flash_attention,
                                                description=tr("FlashAttention"))
        c["sequence_parallel"] = widgets.Checkbox(value=sequence_parallel,
                                                  description=tr("sequence parallel"))
        c["attention_mask"] = widgets.Checkbox(value=flag("attention_mask", attention_mask),
                                               description=tr("attention mask from the data loader"))
        c["states"] = _dropdown("states", [(tr(k), k) for k in STATES], states)
        c["loss"] = _dropdown("loss", [(tr(LOSS_LABELS[k]), k) for k in LOSSES], loss)
        c["gradient_buffer"] = _dropdown(
            "gradient_buffer", [(tr(GRADIENT_LABELS[k]), k) for k in GRADIENT_BUFFERS],
            gradient_buffer)
        c["reserve"] = _reserve_dropdown(reserve)
        readouts = {"verdict": TEXT, "gpus": TEXT, "stages": HTML}
        for control in c.values():   # whole labels and options in either language: each
            control.style.description_width = "initial"   # control as wide as its text,
            if isinstance(control, widgets.Dropdown):   # a row wrapping when the page is narrow
                control.layout.width = "max-content"
        rows = [widgets.HBox([c[k] for k in row], layout=widgets.Layout(flex_flow="row wrap"))
                for row in (
            ("model", "t", "p", "d", "ep", "etp", "hot_expert"), ("s", "b", "split"),
            ("schedule", "v", "m", "recompute"), ("cp", "cp_comm_type", "fp8", "offload"),
            ("flash_attention", "sequence_parallel", "attention_mask", "states"),
            ("loss", "gradient_buffer", "gpu", "reserve"))]
        super().__init__(c, readouts, image=True, layout=rows)

    def model(self):
        """The chosen preset with the FlashAttention choice applied, at the
        chosen s and b (:func:`planner_model`)."""
        return planner_model({k: self.controls[k].value
                              for k in ("model", "flash_attention", "s", "b")})

    def restrict(self) -> None:
        chosen = MODELS[self.controls["model"].value]
        if self.cause == "model":  # the model as it is trained
            self.controls["flash_attention"].value = chosen.flash_attention
            if chosen.num_experts is not None:  # MoE with t > 1 needs it
                self.controls["sequence_parallel"].value = True
            self._set_options("s", sequence_choices(chosen), prefer=chosen.s)
        shape = self.model()
        t = self._set_options("t", tensor_choices(shape,
                                                  self.controls["sequence_parallel"].value))
        d, sp = self.controls["d"].value, self.controls["sequence_parallel"].value
        cp = self._set_options("cp", cp_choices(shape, t, sp))
        self._keep("cp_comm_type", comm_options(shape, t, sp, cp))
        ep = self._set_options("ep", expert_choices(shape, t, d, self.controls["ep"].value,
                                                    cp)[0])
        self._set_options("etp", expert_choices(shape, t, d, ep, cp)[1],
                          prefer=t if self.cause in ("model", "t") else None)
        self._set_options("hot_expert", hot_expert_choices(shape))
        p = self._set_options("p", pipeline_choices(shape.L))
        restrict_schedule(self, interleaving_chunks(shape.L, p), p)
        v = self.controls["v"].value
        keys = split_keys(shape.L, p, v)
        split = self.controls["split"].value
        self._set_options("split", split_options(shape.L, p, v),
                          prefer=split if split in keys else _default_split(keys))
        recompute, _, *modules = self._set_options("recompute", recompute_options(
            _largest_chunk(shape.L, p, v, self.controls["split"].value), shape, t, sp))
        self._keep("gpu", gpu_options(shape.flash_attention))
        self._keep("fp8", fp8_options(shape, t, sp, recompute, (*modules, None)[0], cp,
                                      gpu=self.controls["gpu"].value))
        self._set_options("offload", offload_choices(shape, p, recompute,
                                                     self.controls["schedule"].value))

    def _keep(self, name: str, options: list) -> None:
        """Offer ``options`` (``(label, value)`` pairs), keeping the value if
        offered, else taking the first (off, or Megatron-LM's default)."""
        control, values = self.controls[name], [v for _, v in options]
        self._offered[name] = list(options)  # as _set_options, without ordering the values
        if list(control.options) != options:
            control.options = options
        control.value = control.value if control.value in values else values[0]

    def result(self) -> TrainingMemory:
        """:func:`actmem.training_memory` for the current controls."""
        values = {**self.values(), "states": STATES[self.controls["states"].value]}
        return planner_memory(self.model(), **run_arguments(values))

    def refresh(self) -> None:
        result = self.result()
        gpu = self.controls["gpu"].value
        self.say("verdict", lambda tr: verdict(result, tr, gpu))
        shape, c = self.model(), self.controls
        moe = shape.num_experts is not None
        self.say("gpus", lambda tr: gpus_text(
            c["t"].value, c["p"].value, c["d"].value, c["cp"].value,
            c["ep"].value if moe else None, c["etp"].value if moe else None, tr))
        layers = [sum(chunks) for chunks in _split(shape.L, c["p"].value, c["v"].value,
                                                   c["split"].value)]
        self.say("stages", lambda tr: stages_html(result, tr, layers))
        self.show_figure(timeline_figure, result, tr("{model} on {gpu} GPUs").format(
            model=self.controls["model"].label, gpu=gpu), stages="ends")


def _offload_dropdown(choices: list[int], offload) -> "widgets.Dropdown":
    """The offloaded-layers menu (0 is off, which :func:`_dropdown`'s
    positive-integer check would refuse).

    Raises:
        ValueError: ``offload`` is not an offered int (a bool is not).
    """
    if type(offload) is not int or offload not in choices:
        raise ValueError(f"offload={offload!r} is not offered; choose one of {choices[0]}.."
                         f"{choices[-1]} (offloading needs p=1, no recomputation, 1f1b and "
                         "a dense model)")
    return widgets.Dropdown(options=choices, value=offload, description=tr("offloaded layers"))


def gpu_options(flash_attention: bool) -> list[tuple[str, str]]:
    """The GPU menu: the presets that run bf16 (the planner trains in bf16)
    and ``flash_attention`` (:func:`actmem.views.fit_levers.gpu_choices`)."""
    return [(name, name) for name in gpu_choices("bf16", flash_attention)]


def _reserve_dropdown(reserve) -> "widgets.Dropdown":
    """The reserve menu: the default estimate first, then GiB (0, which
    :func:`_dropdown`'s positive-integer check would refuse, is none).

    Raises:
        ValueError: ``reserve`` is neither ``"default"`` nor an offered int
            (a bool is not).
    """
    if reserve != RESERVE_DEFAULT and (type(reserve) is not int or reserve not in RESERVE_GIB):
        raise ValueError(f"reserve={reserve!r} is not offered; choose {RESERVE_DEFAULT!r} (the "
                         f"estimate) or one of {', '.join(map(str, RESERVE_GIB))} (GiB)")
    return widgets.Dropdown(options=reserve_options(tr), value=reserve,
                            description=tr("reserve"))


def _default(value, preferred, options):
    """``value``, or where it is None ``preferred`` if ``options`` offer it,
    else the closest value offered (:func:`actmem.views.widgets.closest`)."""
    return closest(preferred, _option_values(options)) if value is None else value


def _t_rule(model, sequence_parallel: bool) -> str:
    """Why the t menu offers what it does (:func:`tensor_choices`)."""
    rule = "t divides a, h, kv_heads and f" + " and s" * sequence_parallel
    if model.num_experts is not None:
        rule += ("; an MoE model takes t > 1 only with sequence_parallel=True"
                 if not sequence_parallel else "")
        if model.moe_shared_expert_intermediate_size:
            rule += "; t divides the shared experts' width"
    return rule


def _default_split(keys: tuple[str, ...]) -> str:
    return "even" if "even" in keys else keys[0]


def _largest_chunk(L: int, p: int, v: int, key: str) -> int:
    """Layers of the largest model chunk of the split ``key``."""
    return max(max(chunks) for chunks in _split(L, p, v, key))

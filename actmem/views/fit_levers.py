"""The planner's levers of today's jobs (issue 23): context parallelism, FP8
and named-module recomputation, offered only where they run.

Each menu here is narrowed by the feature's own checks, called on the
planner's other controls, so that no entry makes
:func:`actmem.training_memory` raise:

* cp (Megatron-LM's ``--context-parallel-size``): the sizes up to
  :data:`CP_MAX` that :func:`actmem.valid_context_parallel_sizes` gives
  (2*cp divides s; s/cp divisible by t under sequence parallelism), each
  accepted by :func:`actmem.layer.context_parallel.rank_model` (which
  refuses cp > 1 without FlashAttention: Transformer Engine runs context
  parallelism only in its fused attentions);
* the comm type (``--cp-comm-type``, with ``--hierarchical-context-parallel-sizes``
  for ``"a2a+p2p"``): keys ``"p2p"``, ``"allgather"``, ``"a2a"`` and
  ``"a2a+p2p:NxM"`` (a2a groups of N, rings of M, N*M = cp), each accepted
  by ``rank_model`` (a2a needs cp dividing a/t and the key/value heads/t,
  and is modelled for dense models only);
* the modules recomputed under ``recompute="selective"``
  (``--recompute-modules``): the names each kind of layer of the model has,
  checked by :func:`actmem.layer.recompute_modules.check_for_model`, the
  check :func:`actmem.training_memory` makes of them (its other refusals of
  named modules are for precisions other than bf16 and for FSDP2, which the
  planner does not offer; a test runs every offered set of every preset);
* fp8 (``--fp8-format``): ``None``, ``"e4m3"`` or ``"hybrid"`` where
  :func:`actmem.layer.fp8.check_fp8` (Transformer Engine's GEMM dimension
  rules; no LoRA or multi-latent attention, cp = 1) accepts each kind of
  layer as run;
* offloaded layers (``--cpu-offloading-num-layers``): 0 to L-1 where
  :func:`actmem.run.moments.offload.check_offload` accepts the run (p = 1, no
  recomputation, ``"1f1b"``) and the model is dense (:func:`actmem.run.moments.offload.cpu_offload`).

The job's own sizes (issue 20): the sequence length s (``--seq-length``),
the micro-batch size b (``--micro-batch-size``) and the reserve, what a
GPU needs beyond PyTorch's peak (the CUDA context, NCCL's buffers, the
allocator's gap), :func:`actmem.training_memory`'s ``reserve``: the default
estimate (:mod:`actmem.run.reserve`) or a fixed number of GiB
(:func:`reserve_options`). The GPUs offered are those that run the job's
bf16 and the model's attention (:func:`gpu_choices`).
s comes before t and cp in the planner: the t and cp menus are computed
from it (t divides s under sequence parallelism; 2*cp divides s), so every
s offered runs with the t and cp then offered.

Every menu here is a pure function of hashable arguments; the planner
calls them on each change, so each keeps its results
(:func:`functools.lru_cache`, keyed by the label language too where the
labels are translated) and returns a fresh list.
"""

from __future__ import annotations

import functools
import warnings

from ..language import get_language, tr
from ..layer.context_parallel import rank_model, valid_context_parallel_sizes
from ..layer.fp8 import FP8_FORMATS
from ..run.model_states.fp8_states import check_fp8_layers
from ..layer.recompute_modules import MODULES, check_for_model
from ..run.job.gpus import GPUS, gpu_runs
from ..run.moments.offload import check_offload
from ..validate import divisors

CP_MAX = 32
"""Largest context-parallel size the planner offers."""
S_MIN = 256
"""Shortest sequence the planner offers."""
S_MAX = 131072
"""Longest sequence offered for rotary positions (RoPE has no table that
bounds s; 131072 is Llama 3.1's context, the longest the course shows)."""
B_MAX = 16
"""Largest micro-batch size offered."""
RESERVE_GIB = (0, 1, 2, 3, 4, 6, 8, 12, 16)
"""Fixed reserves offered after the default estimate, GiB (2^30 bytes); 0
gives the bare peak."""
RESERVE_DEFAULT = "default"
"""The reserve menu's first choice: :func:`actmem.training_memory`'s default
estimate (:mod:`actmem.run.reserve`)."""


def menu_cache(function):
    """``function`` (a menu of hashable arguments: a list, or a tuple of
    lists for menus that go together) with its results kept, one entry per
    arguments and label language; each call returns a fresh copy."""
    @functools.lru_cache(maxsize=1024)
    def kept(language, args, kwargs):
        result = function(*args, **dict(kwargs))
        return (tuple(map(tuple, result)), True) if isinstance(result, tuple) \
            else (tuple(result), False)

    @functools.wraps(function)
    def menu(*args, **kwargs):
        key = args, tuple(sorted(kwargs.items()))
        try:
            hash(key)
        except TypeError:  # a list given for a tuple: computed, not kept
            return function(*args, **kwargs)
        result, pair = kept(get_language(), *key)
        return tuple(map(list, result)) if pair else list(result)
    menu.cache_clear = kept.cache_clear
    return menu


def sequence_choices(model) -> list[int]:
    """The s values offered for ``model``: powers of two from :data:`S_MIN`
    up to its position limit, the rows of its learned position table
    (``max_positions``, default its s: GPT-2 has 1024) or :data:`S_MAX`
    for rotary positions, and the preset's own s.

    >>> from actmem import PRESETS
    >>> sequence_choices(PRESETS["gpt2-large"]), sequence_choices(PRESETS["llama3-8b"])[-1]
    ([256, 512, 1024], 131072)
    """
    top = (model.max_positions or model.s) if model.positions == "learned" else S_MAX
    powers = [S_MIN << k for k in range(top.bit_length()) if S_MIN << k <= top]
    return sorted({*powers, model.s})


def job_model(model, s: int, b: int):
    """``model`` at sequence length ``s`` and micro-batch size ``b``; a
    learned position table keeps its rows (Megatron-LM's
    ``--max-position-embeddings``), so the parameters do not change with s.

    Raises:
        ValueError: s is longer than the learned table (one row per position).
    """
    if (s, b) == (model.s, model.b):
        return model
    rows = model.max_positions or model.s if model.positions == "learned" else None
    if rows is not None and s > rows:
        raise ValueError(f"s={s}: the model's learned position table has {rows} rows "
                         f"(max_positions), one per position; s must be at most {rows}")
    return model.with_(s=s, b=b, max_positions=rows)


def gpus_text(t: int, p: int, d: int, cp: int = 1, ep: int | None = None,
              etp: int | None = None, tr=tr) -> str:
    """How many GPUs the job uses, t*p*cp*d (Megatron-LM's
    ``initialize_model_parallel`` in ``megatron/core/parallel_state.py``:
    ``data_parallel_size = world_size // (tp * pp * cp)``), and with ``ep``
    (an MoE model) how the experts share those GPUs: their groups of
    ep*etp ranks take no GPUs of their own; the rest of the world is the
    expert data-parallel size, world / (etp * ep * p) (the same function).

    >>> gpus_text(2, 2, 2), gpus_text(2, 1, 4, 1, 4, 1)
    ('GPUs: t·p·cp·d = 2·2·1·2 = 8', 'GPUs: t·p·cp·d = 2·1·1·4 = 8; the experts \
share them: ep·etp = 4·1, expert data-parallel 2')
    """
    world = t * p * cp * d
    line = tr("GPUs: t·p·cp·d = {t}·{p}·{cp}·{d} = {n}").format(t=t, p=p, cp=cp, d=d, n=world)
    if ep is None:
        return line
    etp = t if etp is None else etp
    return line + tr("; the experts share them: ep·etp = {ep}·{etp}, expert data-parallel "
                     "{edp}").format(ep=ep, etp=etp, edp=world // (etp * ep * p))


def reserve_options(tr=tr) -> list[tuple[str, int | str]]:
    """The reserve menu: the default estimate (labelled so), then
    :data:`RESERVE_GIB` in GiB."""
    return [(tr("default estimate"), RESERVE_DEFAULT)] + [(f"{n} GiB", n) for n in RESERVE_GIB]


def reserve_argument(value: int | str) -> int | str:
    """A reserve menu value as :func:`actmem.training_memory`'s ``reserve``:
    the default as it is, GiB as bytes."""
    return value if value == RESERVE_DEFAULT else value * 2**30


def gpu_choices(precision: str, flash_attention: bool) -> list[str]:
    """The names of :data:`actmem.GPUS` that run ``precision`` and the
    model's ``flash_attention`` (:func:`actmem.run.job.gpus.gpu_runs`: bf16 and
    FlashAttention need compute capability 8.0)."""
    return [name for name, gpu in GPUS.items()
            if gpu_runs(gpu, precision, flash_attention) is None]


def _runs(check, *args, **kwargs) -> bool:
    """Whether ``check(*args, **kwargs)`` accepts its arguments; a probe
    for a menu, so its warnings (sequence parallelism at t=1) stay silent."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check(*args, **kwargs)
    except (TypeError, ValueError):
        return False
    return True


@menu_cache
def cp_choices(model, t: int, sequence_parallel: bool) -> list[int]:
    """The cp values offered for ``model`` (a :class:`actmem.ModelConfig`
    as trained: its FlashAttention choice applies) at tensor-parallel size
    ``t``: ``[1]`` without FlashAttention.

    >>> from actmem import PRESETS
    >>> cp_choices(PRESETS["llama2-7b"], 2, False)
    [1, 2, 4, 8, 16, 32]
    """
    c = model.layer(t, moe=False)
    sizes = valid_context_parallel_sizes(c.s, c.a, t, kv_heads=c.g,
                                         sequence_parallel=sequence_parallel)
    return [cp for cp in sizes if cp <= CP_MAX
            and _runs(rank_model, model, t, sequence_parallel, "none", cp)]


def comm_arguments(key: str) -> dict:
    """:func:`actmem.training_memory` options of a comm-type key.

    >>> comm_arguments("a2a+p2p:2x4")
    {'cp_comm_type': 'a2a+p2p', 'hierarchical_context_parallel_sizes': (2, 4)}
    """
    kind, _, sizes = key.partition(":")
    return {"cp_comm_type": kind, "hierarchical_context_parallel_sizes":
            tuple(int(n) for n in sizes.split("x")) if sizes else None}


def comm_keys(model, t: int, sequence_parallel: bool, cp: int) -> list[str]:
    """The comm types offered at context-parallel size ``cp``: only
    ``"p2p"`` (Megatron-LM's default) at cp = 1; else p2p, allgather, a2a
    and every two-level a2a+p2p split of cp that ``rank_model`` accepts.

    >>> from actmem import PRESETS
    >>> comm_keys(PRESETS["llama2-7b"], 2, False, 4)
    ['p2p', 'allgather', 'a2a', 'a2a+p2p:2x2']
    """
    if cp == 1:
        return ["p2p"]
    keys = ["p2p", "allgather", "a2a", *(f"a2a+p2p:{n}x{cp // n}" for n in divisors(cp)
                                          if 1 < n < cp)]
    return [k for k in keys
            if _runs(rank_model, model, t, sequence_parallel, "none", cp, **comm_arguments(k))]


@menu_cache
def comm_options(model, t: int, sequence_parallel: bool, cp: int) -> list[tuple[str, str]]:
    """The comm-type menu: ``(label, key)`` pairs of :func:`comm_keys`
    (``'a2a 2 x p2p 4'`` for ``'a2a+p2p:2x4'``)."""
    def label(key):
        sizes = comm_arguments(key)["hierarchical_context_parallel_sizes"]
        return key if sizes is None else "a2a {} x p2p {}".format(*sizes)
    return [(label(k), k) for k in comm_keys(model, t, sequence_parallel, cp)]


@functools.lru_cache(maxsize=256)
def module_sets(model, t: int, sequence_parallel: bool) -> list[tuple[str, ...]]:
    """Named-module recomputations offered beside plain ``"selective"``
    (which is ``("core_attn",)``): each module the model's layers take
    alone, ``core_attn`` with each, and all of them together, in
    :data:`actmem.layer.recompute_modules.MODULES` order; each accepted by
    ``check_for_model``.

    >>> from actmem import PRESETS
    >>> module_sets(PRESETS["llama2-7b"], 2, False)[-2:]
    [('core_attn', 'mlp'), ('core_attn', 'layernorm', 'mlp')]
    """
    def valid(names):
        return _runs(check_for_model, model, t, sequence_parallel, "selective", list(names))
    names = [n for n in MODULES if valid((n,))]
    sets = [(n,) for n in names if n != "core_attn"]
    if "core_attn" in names:
        sets += [("core_attn", n) for n in names if n != "core_attn"]
    if len(names) > 2:
        sets.append(tuple(names))
    return [s for s in dict.fromkeys(sets) if valid(s)]


@menu_cache
def module_options(model, t: int, sequence_parallel: bool) -> list[tuple[str, tuple]]:
    """Recompute-menu entries of :func:`module_sets`: ``(label, ("selective",
    1, names))``, labelled ``'selective: core_attn + mlp'`` (Megatron-LM's
    names; in Chinese each module's Chinese name)."""
    return [(tr("selective: {modules}").format(modules=" + ".join(map(tr, names))),
             ("selective", 1, names)) for names in module_sets(model, t, sequence_parallel)]


def fp8_choices(model, t: int, sequence_parallel: bool, recompute: str,
                recompute_modules=None, cp: int = 1) -> list[str | None]:
    """``None`` (off) and the formats of :data:`actmem.FP8_FORMATS` that
    each kind of layer accepts as run under delayed scaling
    (:func:`actmem.run.model_states.fp8_states.check_fp8_layers`:
    Transformer Engine's dimension rules, no LoRA or multi-latent
    attention, cp = 1).

    >>> from actmem import MOE_PRESETS, PRESETS
    >>> fp8_choices(PRESETS["llama2-7b"], 2, False, "none"), fp8_choices(
    ...     MOE_PRESETS["mixtral-8x7b"], 1, False, "none"), fp8_choices(
    ...     MOE_PRESETS["deepseek-v3"], 1, False, "none")
    ([None, 'e4m3', 'hybrid'], [None, 'e4m3', 'hybrid'], [None])
    """
    if cp != 1:  # Transformer Engine's FP8 is modelled at cp = 1 under delayed scaling
        return [None]
    return [None, *(f for f in FP8_FORMATS
                    if _runs(check_fp8_layers, model, t, sequence_parallel, recompute, f,
                             recompute_modules))]


@menu_cache
def fp8_options(*args, gpu: str | None = None, **kwargs) -> list[tuple[str, str]]:
    """The fp8 menu: ``(label, value)`` pairs of :func:`fp8_choices`, off
    as ``"off"`` (an ipywidgets menu shows the value None as no selection);
    off only on a ``gpu`` (a preset name) that cannot run FP8
    (:func:`actmem.run.job.gpus.gpu_runs`: compute capability below 8.9)."""
    choices = fp8_choices(*args, **kwargs)
    if gpu_runs(GPUS.get(gpu), "fp32", False, "e4m3") is not None:
        choices = [None]
    return [(tr("off"), "off") if f is None else (f, f) for f in choices]


@menu_cache
def offload_choices(model, p: int, recompute: str, schedule: str) -> list[int]:
    """The ``cpu_offloading_num_layers`` offered: 0 (off), and 1 to L-1
    where offloading runs.

    >>> from actmem import PRESETS
    >>> len(offload_choices(PRESETS["llama2-7b"], 1, "none", "1f1b")), offload_choices(
    ...     PRESETS["llama2-7b"], 2, "none", "1f1b")
    (32, [0])
    """
    if model.num_experts is not None or not _runs(check_offload, 1, L=model.L, p=p,
                                                  recompute=recompute, schedule=schedule):
        return [0]
    return list(range(model.L))

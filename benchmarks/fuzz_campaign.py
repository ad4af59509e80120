"""Hypothesis campaign over actmem's public API, its command line and its
explorers (issue 21): odd values one argument at a time, random valid
combinations, command lines and explorer controls set from code.

Each call is judged:

- ``result``: a value came back; for an input the argument's domain refuses
  this is **accepted nonsense**; a result holding NumPy values, NaN or a
  negative byte count is a **wrong result**;
- ``clear``: TypeError/ValueError whose message names the argument (and,
  for a refused value, the value);
- ``unclear``: any other exception, or a message naming neither;
- ``hang``: more than 10 s of CPU time (``ITIMER_PROF``, so load does not count);
- ``traceback``: the command line let an exception through, or its error
  was not one ``actmem...: error:`` line.

Run: ``.venv/bin/python benchmarks/fuzz_campaign.py [--examples N] [--json FILE]``.
It prints the counts and one example of each fault. The fast subset lives
in ``tests/test_fuzz_api.py`` (which imports :data:`ENTRIES` and :func:`judge`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import math
import signal
import sys
import time
from collections import Counter
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import actmem  # noqa: E402
from actmem.validate import shown  # noqa: E402

HANG_S = 10


# ---- argument domains -------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Int:
    """An integer >= lo (<= hi); None allowed when optional."""
    lo: int = 1
    hi: int | None = None
    optional: bool = False

    def judge(self, v) -> str:
        if v is None:
            return "ok" if self.optional else "bad"
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            return "bad"
        if v < self.lo or (self.hi is not None and v > self.hi):
            return "bad"
        return "ok"


@dataclasses.dataclass(frozen=True)
class Flag:
    optional: bool = False

    def judge(self, v) -> str:
        return "ok" if type(v) is bool or (v is None and self.optional) else "bad"


@dataclasses.dataclass(frozen=True)
class Choice:
    options: tuple
    optional: bool = False

    def judge(self, v) -> str:
        if v is None:
            return "ok" if self.optional else "bad"
        return "ok" if type(v) is str and v in self.options else "bad"


@dataclasses.dataclass(frozen=True)
class Real:
    """A finite real number (int or float, not bool) in [lo, hi] (hi_open: < hi)."""
    lo: float = 0
    hi: float = math.inf
    optional: bool = False
    lo_open: bool = False

    def judge(self, v) -> str:
        if v is None:
            return "ok" if self.optional else "bad"
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                                  np.floating)):
            return "bad"
        if (isinstance(v, float) and not math.isfinite(v)) or v < self.lo or v > self.hi or (self.lo_open and v == self.lo):
            return "bad"
        return "ok"


@dataclasses.dataclass(frozen=True)
class Any_:
    """Not judged: only the error's clarity counts."""

    def judge(self, v) -> str:
        return "?"


# ---- values -----------------------------------------------------------------

WRONG_OBJECTS = [object(), [2], (2,), {"t": 2}, b"2", 2j, Ellipsis, print, {2}, range(3)]
ODD = st.one_of(
    st.integers(-3, 70), st.integers(-10**25, 10**25), st.sampled_from([2**61 - 1, 2**89 - 1,
                                                                       10**4500, -10**4100]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([-0.0, 0.0, 1.0, 2.0, 0.5]),
    st.booleans(), st.none(),
    st.integers(-3, 4096).map(np.int32), st.integers(-3, 2**40).map(np.int64),
    st.sampled_from([np.float64(2.0), np.float32(0.05), np.bool_(True), np.uint8(4)]),
    st.integers(-2, 64).map(np.array), st.sampled_from([np.array([4]), np.array(2.0)]),
    st.integers(-2, 64).map(Decimal), st.sampled_from([Decimal("NaN"), Decimal("-0"),
                                                       Decimal("2.5")]),
    st.sampled_from([Fraction(3, 2), Fraction(4, 1), Fraction(-1, 3)]),
    st.text(max_size=6), st.sampled_from(["٣", "４", "²", "८", "4096", "2", " 2", "nan", "inf",
                                          "80GB", "-0", "1e3", "0x10", "²GB", "٣GB", "none",
                                          "NONE", "1F1B", "Selective", "llama2-7b "]),
    st.sampled_from(WRONG_OBJECTS),
)


def valid_for(domain) -> st.SearchStrategy:
    """Values the domain allows (for random valid combinations)."""
    if isinstance(domain, Int):
        hi = domain.hi if domain.hi is not None else 2**64
        small = st.integers(domain.lo, min(hi, domain.lo + 64))
        low = max(domain.lo, -2**62)
        numpy = st.integers(low, min(hi, low + 64)).map(np.int64)
        base = st.one_of(small, small, small, st.integers(domain.lo, hi), numpy)
        return st.one_of(base, st.none()) if domain.optional else base
    if isinstance(domain, Flag):
        return st.booleans()
    if isinstance(domain, Choice):
        base = st.sampled_from(domain.options)
        return st.one_of(base, st.none()) if domain.optional else base
    if isinstance(domain, Real):
        hi = min(domain.hi, 1e6)
        return st.floats(domain.lo, hi, exclude_min=domain.lo_open, exclude_max=False)
    return st.nothing()


# ---- the entries --------------------------------------------------------------

P = actmem.PRESETS["llama2-7b"]
MIX = actmem.MOE_PRESETS["mixtral-8x7b"]
I, B = Int(), Flag()
OI = Int(optional=True)
LAYER = dict(s=2048, b=1, h=4096, a=32, t=8)
MOE_LAYER = dict(LAYER, num_experts=8, moe_router_topk=2, activation="swiglu",
                 sequence_parallel=True)
LAYER_OPTIONS = dict(
    sequence_parallel=B, recompute=Choice(actmem.RECOMPUTE), flash_attention=B, kv_heads=OI,
    ffn_hidden_size=OI, activation=Choice(actmem.ACTIVATIONS), dropout=B)
MOE_OPTIONS = dict(
    num_experts=OI, moe_router_topk=I, moe_ffn_hidden_size=OI,
    moe_shared_expert_intermediate_size=OI, etp=OI,
    moe_expert_capacity_factor=Real(optional=True, lo_open=True),
    moe_pad_expert_input_to_capacity=B, moe_aux_loss_coeff=Real(),
    moe_token_dispatcher_type=Choice(("alltoall", "allgather", "flex")),
    moe_flex_dispatcher_backend=Choice(("deepep", "hybridep")),
    moe_router_load_balancing_type=Choice(("aux_loss", "seq_aux_loss", "global_aux_loss",
                                           "sinkhorn", "none")),
    moe_router_dtype=Choice(("fp32", "fp64"), optional=True))
FP8_OPTIONS = dict(fp8_recipe=Choice(("delayed", "tensorwise", "blockwise", "mxfp8")))
MODEL_MOE = {k: v for k, v in MOE_OPTIONS.items() if k != "etp"}
LAYER_ARGS = dict(s=I, b=I, h=I, a=I, t=I, **LAYER_OPTIONS)
MODEL_FIELDS = dict(
    s=I, b=I, h=I, a=I, L=I, vocab_size=I, kv_heads=OI, ffn_hidden_size=OI,
    activation=Choice(actmem.ACTIVATIONS), dropout=B, flash_attention=B,
    norm=Choice(actmem.NORMS), bias=B, tied_embeddings=B, positions=Choice(actmem.POSITIONS),
    max_positions=OI, make_vocab_size_divisible_by=I, source=Any_())
RUN = dict(
    t=I, p=I, d=I, ep=I, etp=OI, m=I, schedule=Choice(actmem.SCHEDULES), v=I,
    order=Choice(actmem.ORDERS, optional=True), sequence_parallel=B,
    recompute=Choice(actmem.RECOMPUTE), recompute_num_layers=I,
    accounting=Choice(actmem.ACCOUNTINGS), zero_stage=Int(0, 3), distributed_optimizer=B,
    logits_bytes=Any_(), reserve=Any_(), gpu_memory=Any_(), loss=Choice(actmem.LOSSES),
    gradient_buffer=Choice(actmem.GRADIENT_BUFFERS), create_attention_mask_in_dataloader=B,
    transformer_engine=B, cublas_workspace_config=Any_(), stage_layers=Any_(),
    decoder_first_pipeline_num_layers=OI, decoder_last_pipeline_num_layers=OI,
    account_for_embedding_in_pipeline_split=B, account_for_loss_in_pipeline_split=B,
    precision=Any_(), fused_projections=B, autocast_device=Any_(), loss_chunk_tokens=OI,
    gradient_accumulation_fusion=Flag(optional=True), moe_hot_expert=Real(lo=1, hi=1))


@dataclasses.dataclass
class Entry:
    """``call(**{**base, name: value})`` for each argument in ``args``."""
    name: str
    call: object
    base: dict
    args: dict
    positional: tuple = ()  # names passed positionally, in order
    alias: dict = dataclasses.field(default_factory=dict)  # argument -> names in messages
    keywords: bool = True  # the call takes keywords (not a wrapper of *args)

    def __call__(self, **kw):
        kw = {**self.base, **kw}
        head = [kw.pop(n) for n in self.positional if n in kw]
        return self.call(*head, **kw)


def _per_layer():
    return actmem.activation_memory(**LAYER)


def _states(**kw):
    return actmem.model_states(kw.pop("model_or_params"), **kw)


def _schedule(**kw):
    """simulate_schedule, then each of its summaries (bubble, in flight)."""
    s = actmem.simulate_schedule(**kw)
    return s, s.bubble_fraction()


ENTRIES = [
    Entry("activation_memory", actmem.activation_memory, LAYER, LAYER_ARGS),
    Entry("activation_memory[moe]", actmem.activation_memory, MOE_LAYER, MOE_OPTIONS),
    Entry("LayerConfig", actmem.LayerConfig, LAYER, LAYER_ARGS),
    Entry("LayerConfig[moe]", actmem.LayerConfig, MOE_LAYER, MOE_OPTIONS),
    Entry("LayerConfig[fp8]", actmem.LayerConfig, dict(LAYER, fp8="e4m3"), FP8_OPTIONS),
    Entry("table2", actmem.table2, LAYER, dict(s=I, b=I, h=I, a=I, t=I)),
    Entry("paper_formula", actmem.paper_formula, LAYER, dict(s=I, b=I, h=I, a=I, t=I)),
    Entry("valid_tensor_parallel_sizes", actmem.valid_tensor_parallel_sizes,
          dict(h=4096, a=32), dict(h=I, a=I, s=OI, kv_heads=OI, ffn_hidden_size=OI,
                                   activation=Choice(actmem.ACTIVATIONS))),
    Entry("default_ffn_hidden_size", actmem.default_ffn_hidden_size, dict(h=4096),
          dict(h=I, activation=Choice(actmem.ACTIVATIONS))),
    Entry("coefficients", actmem.coefficients, dict(result=_per_layer()), dict(result=Any_()),
          ("result",)),
    Entry("coefficient_units", actmem.coefficient_units,
          dict(config=actmem.LayerConfig(**LAYER)), dict(config=Any_()), ("config",)),
    Entry("ledger_rows", actmem.ledger_rows, dict(config=actmem.LayerConfig(**LAYER)),
          dict(config=Any_()), ("config",)),
    Entry("row_coefficient", actmem.row_coefficient,
          dict(row=_per_layer().rows[0], config=actmem.LayerConfig(**LAYER)),
          dict(row=Any_(), config=Any_()), ("row", "config")),
    Entry("ModelConfig", actmem.ModelConfig, dataclasses.asdict(P), MODEL_FIELDS),
    Entry("ModelConfig[moe]", actmem.ModelConfig, dataclasses.asdict(MIX),
          dict(MODEL_MOE, moe_layer_freq=Any_())),
    Entry("ModelConfig.with_", lambda **kw: P.with_(**kw), {}, MODEL_FIELDS),
    Entry("parameter_count", actmem.parameter_count, dict(model=P),
          dict(model=Any_(), vocab=OI)),
    Entry("preset", actmem.preset, dict(name="llama2-7b"), dict(name=Any_())),
    Entry("model_states", _states, dict(model_or_params=P, t=2, p=2, d=2),
          dict(model_or_params=Any_(), t=I, p=I, d=I, optimizer=Any_(),
               accounting=Choice(actmem.ACCOUNTINGS), zero_stage=Int(0, 3),
               distributed_optimizer=B, stage=Int(0, optional=True), stage_layers=Any_(),
               ep=I, etp=OI),
          alias=dict(model_or_params=("model_or_params", "a bare parameter count"))),
    Entry("model_states[moe]", _states, dict(model_or_params=MIX, t=2, p=2, d=4, ep=2),
          dict(ep=I, etp=OI, d=I)),
    Entry("training_memory", actmem.training_memory, dict(model=P, t=2, p=2, m=4),
          dict(model=Any_(), **RUN), ("model",)),
    Entry("training_memory[moe]", actmem.training_memory,
          dict(model=MIX, t=2, p=4, d=4, ep=2, m=4), dict(ep=I, etp=OI, d=I, t=I),
          ("model",)),
    Entry("expert_data_parallel", actmem.expert_data_parallel,
          dict(model=MIX, t=2, d=4, ep=2), dict(model=Any_(), t=I, d=I, ep=I, etp=OI)),
    Entry("gpu_capacity", actmem.gpu_capacity, dict(gpu_memory="A100 80GB"),
          dict(gpu_memory=Any_())),
    Entry("loss_bytes", actmem.loss_bytes, dict(loss="vocab_parallel", logits=4096 * 32000,
                                                  tokens=4096),
          dict(loss=Choice(actmem.LOSSES), logits=I, tokens=I, logits_dtype=Any_(),
               loss_dtype=Any_(), chunk=OI, output_gradients=Int(0))),
    Entry("workspace_bytes", actmem.workspace_bytes, {},
          dict(compute_capability=Any_(), cublas_workspace_config=Any_(),
               transformer_engine=B)),
    Entry("split_layers", actmem.split_layers, dict(L=32, p=4),
          dict(L=I, p=I, v=I, stage_layers=Any_(), decoder_first_pipeline_num_layers=OI,
               decoder_last_pipeline_num_layers=OI,
               account_for_embedding_in_pipeline_split=B,
               account_for_loss_in_pipeline_split=B)),
    Entry("simulate_schedule", _schedule, dict(schedule="1f1b", p=4, m=8),
          dict(schedule=Choice(actmem.SCHEDULES), p=I, m=I, v=I,
               order=Choice(actmem.ORDERS, optional=True), microbatch_group_size=OI)),
    Entry("bubble_fraction_formula", actmem.bubble_fraction_formula,
          dict(schedule="1f1b", p=4, m=8), dict(schedule=Choice(actmem.SCHEDULES), p=I, m=I,
                                                 v=I)),
    *[Entry(fn.__name__, fn, dict(per_layer=_per_layer(), L=32, p=4, m=8),
            dict(per_layer=Any_(), L=I, p=I, m=I))
      for fn in (actmem.first_stage_memory_1f1b, actmem.pipeline_stage_memory)],
    Entry("interleaved_first_stage_memory", actmem.interleaved_first_stage_memory,
          dict(per_layer=_per_layer(), L=32, p=4, v=2),
          dict(per_layer=Any_(), L=I, p=I, v=I)),
    Entry("model_activation_memory", actmem.model_activation_memory,
          dict(per_layer=_per_layer(), L=32), dict(per_layer=Any_(), L=I)),
    *[Entry(fn.__name__, fn, dict(p=4, m=8, i=0), dict(p=I, m=I, i=Int(0)))
      for fn in (actmem.gpipe_in_flight, actmem.one_f_one_b_in_flight)],
    Entry("interleaved_in_flight", actmem.interleaved_in_flight, dict(p=4, m=8, v=2, i=0),
          dict(p=I, m=I, v=I, i=Int(0), group=OI)),
    Entry("interleaved_factor", actmem.interleaved_factor, dict(p=4, v=2), dict(p=I, v=I)),
    Entry("interleaved_factor_holds", actmem.interleaved_factor_holds, dict(p=4, m=8, v=2),
          dict(p=I, m=I, v=I)),
    *[Entry(fn.__name__, fn, dict(n_bytes=2**30, unit="MiB"),
            dict(n_bytes=Int(0), unit=Choice(tuple(actmem.UNITS)), digits=Int(0, 20)))
      for fn in (actmem.format_bytes, actmem.format_value)],
    Entry("format_change", actmem.format_change, dict(delta=-2**30),
          dict(delta=Int(-10**30, 10**30), unit=Choice(tuple(actmem.UNITS)), digits=Int(0, 20))),
    Entry("convert", actmem.convert, dict(n_bytes=2**30, unit="GiB"),
          dict(n_bytes=Int(0), unit=Choice(tuple(actmem.UNITS)))),
    *[Entry(fn.__name__, fn, dict(n_bytes=2**30), dict(n_bytes=Int(0)))
      for fn in (actmem.to_gb, actmem.to_gib, actmem.to_mib)],
    Entry("parse_size", actmem.parse_size, dict(name="gpu_memory", value="80GB"),
          dict(value=Any_()), alias=dict(value=("gpu_memory",))),
    Entry("common_divisors", lambda **kw: actmem.common_divisors(*kw.values()),
          dict(numbers=52), dict(numbers=I), alias=dict(numbers=("numbers[0]",)),
          keywords=False),
    Entry("set_language", actmem.set_language, dict(language="en"),
          dict(language=Choice(actmem.LANGUAGES))),
    Entry("preset.with_[moe]", lambda **kw: MIX.with_(**kw), {}, MODEL_MOE),
]
"""Every entry point, with a valid call and the domain of each argument."""


def explorer_entries() -> list[Entry]:
    """The explorers' constructors (no figures where that can be chosen):
    only the clarity of their refusals is judged."""
    from actmem.views.fit_views import FitPlanner
    from actmem.views.schedule_views import ScheduleExplorer
    from actmem.views.variant_views import VariantExplorer
    from actmem.views.widgets import LayerExplorer, LedgerExplorer, ShardingExplorer
    layer = dict(s=I, b=I, h=I, a=I, t=I)
    return [
        Entry("LayerExplorer", LayerExplorer, {}, dict(layer, figure=B)),
        Entry("LedgerExplorer", LedgerExplorer, {}, layer),
        Entry("ShardingExplorer", ShardingExplorer, {}, layer),
        Entry("VariantExplorer", VariantExplorer, dict(figure=False),
              dict(layer, **LAYER_OPTIONS)),
        Entry("ScheduleExplorer", ScheduleExplorer, {},
              dict(layer, L=I, schedule=Choice(actmem.SCHEDULES), p=I, v=I, m=I,
                   order=Choice(actmem.ORDERS, optional=True), N=OI),
              alias=dict(N=("N", "microbatch_group_size"))),
        Entry("FitPlanner", FitPlanner, {},
              dict(model=Choice(tuple(actmem.PRESETS)), t=I, p=I, d=I, m=I,
                   schedule=Choice(actmem.SCHEDULES), v=I, split=Any_(), recompute=Any_(),
                   flash_attention=Flag(optional=True), sequence_parallel=B, states=Any_(),
                   loss=Choice(actmem.LOSSES), gradient_buffer=Choice(actmem.GRADIENT_BUFFERS),
                   gpu=Any_())),
    ]


# ---- judging -----------------------------------------------------------------

class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang


@contextlib.contextmanager
def limit(seconds: int = HANG_S):
    """Raise :class:`Hang` after ``seconds`` of this process's CPU time
    (``ITIMER_PROF``: the same on a loaded machine as on a quiet one)."""
    old = signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)


def suspicious(value, depth: int = 0) -> str | None:
    """Why a result looks wrong: a NumPy value, NaN/inf or an array inside it."""
    if depth > 4:
        return None
    if isinstance(value, (np.ndarray, np.generic)):
        return f"holds a NumPy {type(value).__name__}: {value!r}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"holds {value}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [getattr(value, f.name) for f in dataclasses.fields(value)]
    elif isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (tuple, list)):
        items = list(value)[:200]
    else:
        return None
    for item in items:
        why = suspicious(item, depth + 1)
        if why:
            return why
    return None


def _names_value(message: str, value) -> bool:
    text = shown(value)
    return (text[:30] in message or str(value)[:30] in message
            or "too long to print" in message or "characters" in message
            or (isinstance(value, int) and "digits" in message))


def judge(entry: Entry, name: str | None, value, *, domain_says: str = "?") -> tuple[str, str]:
    """(verdict, detail) of one call: ``entry`` with ``name=value`` (or the
    base call when ``name`` is None)."""
    kw = {} if name is None else {name: value}
    try:
        with limit(), warnings_silenced():
            result = entry(**kw)
    except Hang:
        return "hang", f"{entry.name}({name}={shown(value)[:60]}) > {HANG_S} s"
    except (TypeError, ValueError) as error:
        message = str(error)
        if name is None or any(alias in message for alias in entry.alias.get(name, (name,))):
            if domain_says == "bad" and not _names_value(message, value):
                return "unclear", (f"{entry.name}({name}={shown(value)[:60]}): "
                                   f"value not named: {message[:200]}")
            return "clear", ""
        if domain_says == "ok":  # a valid value refused for another argument's sake
            return "clear", ""
        return "unclear", (f"{entry.name}({name}={shown(value)[:60]}): "
                           f"{type(error).__name__}: {message[:200]}")
    except Exception as error:  # noqa: BLE001 - the point is to catch everything
        return "unclear", (f"{entry.name}({name}={shown(value)[:60]}): "
                           f"{type(error).__name__}: {str(error)[:200]}")
    if domain_says == "bad":
        return "accepted", f"{entry.name}({name}={shown(value)[:60]}) returned a result"
    why = suspicious(result)
    if why:
        return "wrong", f"{entry.name}({name}={shown(value)[:60]}): {why}"
    return "result", ""


def judge_unknown_keyword(entry: Entry) -> tuple[str, str]:
    """An unknown keyword (a typo of the first argument) must be refused by
    name, with the keywords that are allowed."""
    typo = next(iter(entry.args)) + "_typo"
    what = f"{entry.name}({typo}=1)"
    try:
        with limit(), warnings_silenced():
            entry(**{typo: 1})
    except Hang:
        return "hang", what
    except (TypeError, ValueError) as error:
        message = str(error)
        if typo not in message:
            return "unclear", f"{what}: does not name it: {message[:200]}"
        if not any(known in message.replace(typo, "") for known in entry.args):
            return "unclear", f"{what}: lists no allowed keyword: {message[:200]}"
        return "clear", ""
    except Exception as error:  # noqa: BLE001
        return "unclear", f"{what}: {type(error).__name__}: {str(error)[:200]}"
    return "accepted", f"{what} returned a result"


def judge_subprocess(argv: list[str]) -> tuple[str, str]:
    """``python -m actmem ARGV`` in a fresh interpreter: no traceback."""
    import subprocess
    run = subprocess.run([sys.executable, "-m", "actmem", *argv], capture_output=True,
                         text=True, timeout=120, cwd=Path(__file__).resolve().parents[1])
    if "Traceback" in run.stderr or run.returncode not in (0, 2):
        return "traceback", f"python -m actmem {argv!r}: exit {run.returncode}: {run.stderr[-300:]!r}"
    return ("result" if run.returncode == 0 else "clear"), ""


@contextlib.contextmanager
def warnings_silenced():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# ---- the command line -----------------------------------------------------------

CLI_VALUES = st.one_of(
    st.integers(-5, 100).map(str), st.integers(1, 10**40).map(str),
    st.sampled_from(["٣", "４", "²", "0", "-0", "+4", "4.0", "1e3", "nan", "inf", "", " ",
                     "2305843009213693951", "1" + "0" * 4299, "0.05", "5", "4GiB", "80GB",
                     "A100 80GB", "H100 80GB", "llama2-7b", "gpt3-175b", "interleaved",
                     "gpipe", "selective", "full", "zero", "megatron", "torch", "fused",
                     "--", "-h", "--help", "x" * 300, "/dev/full/x.pdf", "a.pdf", ".pdf",
                     "zh", "en"]),
    st.text(max_size=8))
TRAIN_FLAGS = ["--preset", "-s", "-b", "-t", "-p", "-d", "-m", "--schedule", "--v", "--order",
               "--sequence-parallel", "--flash-attention", "--no-flash-attention",
               "--recompute", "--recompute-num-layers", "--accounting", "--zero-stage",
               "--distributed-optimizer", "--logits-bytes", "--loss", "--gradient-buffer",
               "--no-attention-mask", "--reserve", "--gpu-memory", "--timeline", "--json",
               "--seq", "-h"]
TABLE_FLAGS = ["-s", "-b", "--h", "-a", "-t", "-L", "--sequence-parallel", "--recompute",
               "--flash-attention", "--kv-heads", "--ffn-hidden-size", "--activation",
               "--no-dropout", "--json", "--flash"]


@st.composite
def command_lines(draw) -> list[str]:
    command = draw(st.sampled_from(["", "train", "train", "cheatsheet"]))
    argv = [command] if command else []
    if command == "train" and draw(st.booleans()):
        argv += ["--preset", draw(st.sampled_from(list(actmem.PRESETS)))]
    if command == "cheatsheet":
        argv.append(draw(st.sampled_from(["/dev/full/x.pdf", "/nonexistent/x.png",
                                          "x" * 300 + ".pdf", ".pdf", "a.txt", "-"])))
    flags = TRAIN_FLAGS if command == "train" else TABLE_FLAGS
    for _ in range(draw(st.integers(0, 4))):
        argv.append(draw(st.sampled_from(flags)))
        if draw(st.integers(0, 3)):
            argv.append(draw(CLI_VALUES))
    return argv


def judge_cli(argv: list[str]) -> tuple[str, str]:
    """Run ``actmem.views.cli.main(argv)`` in this process: a result, a
    one-line error (exit 2), or a fault."""
    from actmem.views.cli import main
    out, err = io.StringIO(), io.StringIO()
    try:
        with limit(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except Hang:
        return "hang", f"actmem {argv!r}"
    except SystemExit as leave:
        code = leave.code
    except BaseException as error:  # noqa: BLE001
        return "traceback", f"actmem {argv!r}: {type(error).__name__}: {str(error)[:200]}"
    if code in (0, None):
        return "result", ""
    lines = [line for line in err.getvalue().splitlines() if "error:" in line]
    if code == 2 and lines and all(not line.startswith("Traceback") for line in
                                   err.getvalue().splitlines()):
        return "clear", ""
    return "unclear", f"actmem {argv!r}: exit {code}: {err.getvalue()[-300:]!r}"


# ---- the explorers -------------------------------------------------------------------

def explorers():
    """One of each explorer, no figures where that can be chosen."""
    from actmem.views.fit_views import FitPlanner
    from actmem.views.schedule_views import ScheduleExplorer
    from actmem.views.variant_views import VariantExplorer
    from actmem.views.widgets import LayerExplorer, LedgerExplorer
    return [LayerExplorer(), LedgerExplorer(), VariantExplorer(figure=False),
            ScheduleExplorer(), FitPlanner()]


def offered_(value, options) -> bool:
    """``value`` is one of ``options`` and of its kind (NumPy integers are ints)."""
    def kind(v):
        return ("bool" if type(v).__name__ in ("bool", "bool_") else
                "int" if isinstance(v, (int, np.integer)) else type(v).__name__)
    return any(kind(o) == kind(value) and not isinstance(value, np.ndarray) and o == value
               for o in options)


def judge_control(explorer, name: str, value, options: bool = False) -> tuple[str, str]:
    """Set ``explorer.controls[name].value`` (or ``.options``) from code: a
    value the control offers is taken; anything else is refused with a
    message naming the control, and leaves the controls and the readouts
    as they were."""
    control = explorer.controls[name]
    before = explorer.values()
    readouts = {k: r.value for k, r in explorer.readouts.items()}
    offered = [o[1] if isinstance(o, tuple) else o for o in getattr(control, "options", ())]
    ok = (not options) and (isinstance(value, bool) if not offered else offered_(value, offered))
    what = f"{type(explorer).__name__}.{name}.{'options' if options else 'value'}"
    try:
        with limit(), warnings_silenced():
            if options:
                control.options = value
            else:
                control.value = value
    except Hang:
        return "hang", f"{what}={shown(value)[:60]}"
    except (TypeError, ValueError) as error:
        if not options and ok:
            return "unclear", f"{what}={shown(value)[:60]} offered, refused: {error}"
        if repr(explorer.values()) != repr(before) or readouts != {
                k: r.value for k, r in explorer.readouts.items()}:
            return "wrong", f"{what}={shown(value)[:60]} refused but controls or readouts changed"
        if name not in str(error):
            return "unclear", f"{what}={shown(value)[:60]}: {type(error).__name__}: {error}"
        return "clear", ""
    except Exception as error:  # noqa: BLE001
        return "unclear", f"{what}={shown(value)[:60]}: {type(error).__name__}: {error}"
    if not ok and not (options and repr(list(value)) == repr(list(control.options))):
        return "accepted", f"{what}={shown(value)[:60]} accepted: {explorer.values()}"
    return "result", ""


# ---- the campaign -----------------------------------------------------------------

def campaign(examples: int, processes: int = 20) -> dict:
    counts: Counter = Counter()
    faults: dict[str, list[str]] = {}

    def note(verdict: str, detail: str):
        counts[verdict] += 1
        if detail and len(faults.setdefault(verdict, [])) < 400:
            faults[verdict].append(detail)

    quiet = settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                     suppress_health_check=list(HealthCheck))
    longer = settings(quiet, max_examples=examples * 4)
    fewer = settings(quiet, max_examples=max(1, examples // 4))
    for entry in ENTRIES + explorer_entries():
        slow = entry.name.endswith(("Explorer", "Planner"))
        note(*judge(entry, None, None))
        if entry.keywords:
            note(*judge_unknown_keyword(entry))
        for name, domain in entry.args.items():
            @(fewer if slow else quiet)
            @given(value=st.one_of(ODD, valid_for(domain)))
            def one(value):
                note(*judge(entry, name, value, domain_says=domain.judge(value)))
            one()
        ints = {n: d for n, d in entry.args.items() if not isinstance(d, Any_)}
        if ints:
            @(fewer if slow else quiet)
            @given(values=st.fixed_dictionaries({n: valid_for(d) for n, d in ints.items()}))
            def many(values):
                verdict, detail = judge(entry, None, None) if not values else _many(entry,
                                                                                    values)
                note(verdict, detail)
            many()
        print(f"{entry.name}: {sum(counts.values())} calls so far", file=sys.stderr)
    actmem.set_language("en")

    @longer
    @given(argv=command_lines())
    def cli(argv):
        note(*judge_cli(argv))
    cli()

    @settings(quiet, max_examples=processes)
    @given(argv=command_lines())
    def fresh(argv):
        note(*judge_subprocess(argv))
    if processes:
        fresh()
    print(f"cli: {sum(counts.values())} calls so far", file=sys.stderr)

    for explorer in explorers():
        for name in explorer.controls:
            @quiet
            @given(value=st.one_of(ODD, st.sampled_from(
                [o[1] if isinstance(o, tuple) else o
                 for o in getattr(explorer.controls[name], "options", (True, False))])),
                options=st.booleans())
            def control(value, options):
                options = options and hasattr(explorer.controls[name], "options")
                if options:
                    value = value if isinstance(value, (list, tuple)) else [value]
                note(*judge_control(explorer, name, value, options))
            control()
        print(f"{type(explorer).__name__}: {sum(counts.values())} calls so far",
              file=sys.stderr)
    return {"counts": dict(counts), "faults": faults}


def _many(entry: Entry, values: dict) -> tuple[str, str]:
    """Several valid values at once: a result or a clear error, in time."""
    call = Entry(entry.name, entry.call, {**entry.base, **values}, entry.args,
                 entry.positional)
    verdict, detail = judge(call, None, None)
    if verdict == "clear" or not detail:
        return verdict, detail
    return verdict, f"{detail} [with {', '.join(f'{k}={shown(v)[:30]}' for k, v in values.items())}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=60,
                        help="hypothesis examples per argument (60)")
    parser.add_argument("--processes", type=int, default=20,
                        help="command lines run as 'python -m actmem' in a new process (20)")
    parser.add_argument("--json", help="write counts and faults to this file")
    args = parser.parse_args()
    start = time.perf_counter()
    report = campaign(args.examples, args.processes)
    report["seconds"] = round(time.perf_counter() - start)
    print(json.dumps(report["counts"]), f"{report['seconds']} s")
    for verdict, details in report["faults"].items():
        first: dict[str, str] = {}
        for detail in details:  # one example per entry and argument
            first.setdefault(detail.split("=")[0], detail)
        print(f"\n{verdict}: {len(details)} examples kept, {len(first)} entry/argument pairs")
        for detail in first.values():
            print("  ", detail[:300])
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

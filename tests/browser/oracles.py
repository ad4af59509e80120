"""What each actmem explorer's readouts must show, computed here.

An oracle takes what the browser shows (the control values, parsed from the
DOM) plus the explorer's fixed layer sizes (``probe_explorers`` reads the
constructor's ``layer`` dict from the kernel) and calls actmem's pure
functions -- never the explorer's own ``refresh`` -- to give:

* ``readouts``: readout name -> list of strings that readout's text must
  contain (formatted with :func:`actmem.format_bytes`, the widgets' unit),
  or of callables ``text -> problem or None``; words are put in the
  explorer's language (the probe reads it) with the same label templates
  (``tr``) the page uses, numbers are computed here;
  names not listed are only required to be non-empty;
* ``figure``: a hashable key of everything the explorer's figure is drawn
  from, or None when it has no figure. When the key changes, the PNG bytes
  in the DOM must change.

Explorer classes without an oracle here fail the control test with a
message saying so; add one when actmem.widgets grows a new explorer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import actmem
from actmem import activation_memory, format_bytes
from actmem.language import translator


@dataclass(frozen=True)
class Expected:
    readouts: dict
    figure: object | None


def parse(text):
    """A control value as the DOM shows it -> int, float, bool or str."""
    if isinstance(text, bool) or text is None:
        return text
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _layer_explorer(layer, v, image, tr):
    r = activation_memory(s=v["s"], b=v["b"], h=v["h"], a=v["a"], t=v["t"])
    groups = ("fixed", "intermediate", "attention_map", "total")
    chart = {"chart": [f"s={v['s']}, b={v['b']}, h={v['h']}, a={v['a']}",
                       format_bytes(r.fixed)]} if image else {}
    return Expected({**{g: [format_bytes(getattr(r, g))] for g in groups}, **chart},
                    (v["s"], v["b"], v["h"], v["a"], v["t"]) if image else None)


def _ledger_explorer(layer, v, image, tr):
    """Coefficients by hand: each group's bytes per GPU over its unit."""
    from fractions import Fraction
    r = activation_memory(**layer, t=v["t"], activation=v["activation"],
                          flash_attention=v["flash_attention"])
    s, b, h, a, t = layer["s"], layer["b"], layer["h"], layer["a"], v["t"]
    fixed = Fraction(r.fixed, s * b * h)  # replicated: a multiple of sbh
    split = Fraction(r.intermediate * t, s * b * h)
    if v["flash_attention"]:  # fp32 statistics of shape (b, a, s), split by heads
        attention = tr("attention-map statistics {k} bas/t (no s x s map)").format(
            k=Fraction(r.attention_map * t, b * a * s))
    else:
        attention = tr("attention map {term}").format(
            term=f"{Fraction(r.attention_map * t, b * a * s * s)} bas^2/t")
    coefficients = tr("fixed {fixed}, intermediate {intermediate}, {attention}").format(
        fixed=f"{fixed} sbh", intermediate=f"{split} sbh/t", attention=attention)
    return Expected({"total": [format_bytes(r.total)], "coefficients": [coefficients]}, None)


def _sharding_explorer(layer, v, image, tr):
    r = activation_memory(**layer, t=v["t"])
    return Expected({g: [format_bytes(r.group_bytes(g))]
                     for g in ("fixed", "intermediate", "attention_map")},
                    v["t"] if image else None)


def _schedule_explorer(layer, v, image, tr):
    """Bytes per stage from the simulation (not from schedule_views)."""
    L = v["L"]
    per_layer = activation_memory(**layer, t=v["t"])
    from actmem.views.schedule_views import NO_GROUP, ORDER_LABELS, TITLES
    # menus narrowed after Run All show labels the probe did not map
    order = {label: key for key, label in ORDER_LABELS.items()}.get(v.get("order"), v.get("order"))
    group = 0 if v.get("N") == NO_GROUP else v.get("N")
    schedule = actmem.simulate_schedule(v["schedule"], v["p"], v["m"], v["v"], order,
                                        group or None)
    stages = [schedule.stage_activation_memory(i, per_layer, L) for i in range(v["p"])]
    whole = actmem.model_activation_memory(per_layer, L)
    return Expected({"first_stage": [f"= {format_bytes(stages[0])}", format_bytes(whole)],
                     "bubble": [tr("bubble: {fraction} of the ideal time = {percent:.1%} "
                                   "(simulated)").format(
                         fraction=schedule.bubble_fraction(),
                         percent=float(schedule.bubble_fraction()))],
                     "stages": [format_bytes(n) for n in stages],
                     "chart": [tr(TITLES[v["schedule"]]), f"p={v['p']} ", f"m={v['m']} "]},
                    # the chart is drawn from the operations: an order or a group
                    # size that gives the same operations draws the same figure
                    (v["schedule"], v["p"], v["m"], v["v"], schedule.ops) if image else None)


def _fit_planner(layer, v, image, tr):
    """The verdict (the most loaded stage's peak, its event, the GPU by name)
    and per-stage sums and peaks from actmem.training_memory; menu values
    the probe could not map (labels made after Run All, such as
    'full, k=5' or a stage split's 'last stage 5 layers (...)') are read
    from their label."""
    from actmem.views.fit_figures import event_label
    from actmem.layer.recompute_modules import MODULES
    from actmem.views.fit_levers import comm_options, gpus_text
    from actmem.views.schedule_figures import TITLES
    from actmem.views.fit_views import STATES, planner_model, run_arguments, split_keys, \
        split_options
    values = dict(v)
    recompute = values["recompute"]
    if isinstance(recompute, str):  # 'none', 'selective', 'selective: a + b' or 'full, k=N'
        k = re.search(r"k=(\d+)", recompute)
        named = re.search(r"[:：]\s*(\S.*)$", recompute)
        recompute = ("full", int(k.group(1))) if k else \
            ("selective", 1, tuple({tr(n): n for n in MODULES}[n] for n in
                                   _spaces(named.group(1)).split(" + "))) if named else \
            {tr(mode): mode for mode in actmem.RECOMPUTE}[recompute]
    values["recompute"] = (recompute, 1) if isinstance(recompute, str) else tuple(recompute)
    values["states"] = STATES[values["states"]]
    model = planner_model(values)  # the preset at the s, b and FlashAttention shown
    if values.get("fp8") == tr("off"):  # a label made after Run All
        values["fp8"] = "off"
    comm = {_spaces(label): key for label, key in comm_options(
        model, values["t"], values["sequence_parallel"], values.get("cp", 1))}
    values["cp_comm_type"] = comm.get(_spaces(str(values.get("cp_comm_type", "p2p"))),
                                      values.get("cp_comm_type", "p2p"))
    # a schedule label made after Run All (interleaving offered once p > 1): its key
    schedules = {_spaces(tr(title)): name for name, title in TITLES.items()}
    values["schedule"] = schedules.get(_spaces(str(values["schedule"])), values["schedule"])
    keys = split_keys(model.L, values["p"], values["v"])
    if values["split"] not in keys:  # a label made after Run All (p or v changed): its key
        labels = {label.replace("\xa0", " "): key for label, key in
                  split_options(model.L, values["p"], values["v"], tr)}
        values["split"] = labels[str(values["split"]).replace("\xa0", " ")]
    result = actmem.training_memory(model, **run_arguments(values))
    top = result.most_loaded
    line = tr("most loaded: stage {stage}, peak {size} at '{event}'").format(
        stage=top.stage, size=format_bytes(top.peak, "GiB"),
        event=event_label(top.timeline.peak.label, tr))
    parts = top.reserve_parts   # the default reserve, part by part (actmem.run.reserve)
    if parts is not None:
        line += tr(" + reserve {size} (driver {driver}, CUDA context {context}, NCCL {nccl}, "
                   "allocator {allocator} GiB)").format(
            size=format_bytes(top.reserve, "GiB"), driver=actmem.format_value(parts.driver, "GiB"),
            context=actmem.format_value(parts.cuda_context, "GiB"),
            nccl=actmem.format_value(parts.nccl, "GiB"),
            allocator=actmem.format_value(parts.allocator, "GiB"))
    elif top.reserve:
        line += tr(" + reserve {size}").format(size=format_bytes(top.reserve, "GiB"))
    gpu = tr("{size} ({gpu})").format(size=format_bytes(result.gpu_memory, "GiB"),
                                      gpu=values["gpu"])
    verdict = tr("{line}, of {gpu}: margin {margin} GiB, {verdict}").format(
        line=line, gpu=gpu, margin=actmem.format_change(result.margin, "GiB").lstrip("+"),
        verdict=tr("fits") if result.fits else tr("DOES NOT FIT"))
    moe = model.num_experts is not None
    gpus = gpus_text(values["t"], values["p"], values["d"], values.get("cp", 1),
                     values.get("ep", 1) if moe else None, values.get("etp") if moe else None, tr)
    return Expected({"verdict": [verdict], "gpus": [gpus],
                     "stages": [actmem.format_value(n, "GiB") for s in result.stages
                                for n in (s.total, s.peak)]},
                    (_timeline_seen(result), result.gpu_memory, top.reserve,
                     values["model"], values["gpu"]) if image else None)


def _timeline_seen(result) -> tuple:
    """What the planner's timeline figure shows in text and layout, for
    each drawn stage: its title (stage, peak), the peak event's label and
    place, the number of events and the categories stacked. A change below
    one pixel of the stacked areas (a few MiB of a transient on a GiB axis,
    e.g. cp_comm_type p2p -> allgather when the loss sets the peak) leaves
    the PNG as it was, so the areas' bytes are not part of the key."""
    from actmem.views.fit_figures import timeline_stages
    seen = []
    for i in timeline_stages(result, "ends"):
        events = result.stages[i].timeline.events
        peak = result.stages[i].timeline.peak
        seen.append((i, format_bytes(result.stages[i].peak, "GiB"), peak.label,
                     events.index(peak), len(events),
                     tuple(c for c in actmem.CATEGORIES if any(e.by_category[c] for e in events))))
    return tuple(seen)


def _variant_explorer(layer, v, image, tr):
    base = activation_memory(**layer, a=v["a"], t=v["t"])
    chosen = activation_memory(**layer, **v)

    def groups(r):
        return [format_bytes(r.total)] + [format_bytes(r.group_bytes(g))
                                          for g in actmem.GROUPS]
    key = tuple((r.total, *(r.group_bytes(g) for g in actmem.GROUPS))
                for r in (base, chosen))
    return Expected({"chosen": groups(chosen), "baseline": groups(base),
                     "change": [f"{actmem.format_change(chosen.total - base.total)} MiB"]},
                    key if image else None)


def _measure_explorer(layer, v, image, tr):
    """actmem.measure's MeasureExplorer: measured results cannot be redone
    here, but every ledger prediction the summary states can: for each
    't=T rank R: ledger N B' (in the explorer's language), N must be the
    ledger total actmem gives for the chosen variant's options at t=T on
    rank R."""
    from actmem.measure.report import SUMMARY, SUMMARY_PART
    from actmem.measure.variants import VARIANTS
    name = v["variant"]
    options = VARIANTS[name].options
    start = tr(SUMMARY).format(variant=tr(VARIANTS[name].title), parts="")
    part = tr(SUMMARY_PART)
    claim = re.escape(part[:part.index("{ledger}") + len("{ledger} B")])
    for field in ("t", "rank", "ledger"):
        claim = claim.replace(re.escape(f"{{{field}}}"), r"(\d+)")

    def check(text):
        if not text.startswith(start):
            return f"does not start with {start!r}"
        claims = re.findall(claim, text)
        if not claims:
            return "states no ledger total"
        for t, rank, n in claims:
            want = activation_memory(**layer, t=int(t), **options).total
            if int(n) != want:
                return f"t={t} rank {rank}: ledger {n} B, actmem gives {want} B"
        return None
    return Expected({"summary": [check]}, None)


SETUPS = {"FitPlanner": {
    "fp8": [("cp", "1"), ("model", "LLaMA-3-8B"), ("cp", "1"), ("gpu", "H100 80GB SXM")],
    "offload": [("p", "1"), ("schedule", "1F1B"), ("recompute", "none"),
                ("model", "LLaMA-3-8B"), ("p", "1"), ("recompute", "none")],
    "ep": [("model", "Mixtral 8x7B")], "etp": [("model", "Mixtral 8x7B")],
    "hot_expert": [("model", "Mixtral 8x7B")],
    "v": [("p", "2")]}}
"""Menus that offer one value under some settings of the other controls
(FP8 needs cp = 1, a dense model and a GPU of compute capability 8.9 or
newer: notebook 09's planner starts on an A100; offloading p = 1, 1F1B, no
recomputation and a dense model; ep, etp and hot_expert an MoE model; v p > 1):
explorer class -> control name -> the
(control name, English option label) picks a learner makes, in order, until
the menu offers more; the suite makes them only while it offers one value."""

ORACLES = {
    "LayerExplorer": _layer_explorer,
    "LedgerExplorer": _ledger_explorer,
    "ShardingExplorer": _sharding_explorer,
    "ScheduleExplorer": _schedule_explorer,
    "FitPlanner": _fit_planner,
    "VariantExplorer": _variant_explorer,
    "MeasureExplorer": _measure_explorer,
}


def _spaces(text: str) -> str:
    return text.replace("\xa0", " ")


def control_values(info: dict, dom_controls: list) -> dict:
    """Control name -> Python value, from what the DOM shows.

    Controls are matched by description (falling back to display order);
    a selection's shown label is turned into its value with the option
    table the probe read (labels -> values), other values are parsed."""
    by_description = {c["description"]: c for c in info["controls"]}
    values = {}
    for i, dom in enumerate(dom_controls):
        meta = by_description.get(dom["description"])
        if meta is None and i < len(info["controls"]):
            meta = info["controls"][i]
        if meta is None:
            continue
        shown = dom["value"]
        # ipywidgets shows spaces in option labels as no-break spaces
        options = {_spaces(k): v for k, v in (meta.get("options") or {}).items()}
        if isinstance(shown, str) and _spaces(shown) in options:
            values[meta["name"]] = options[_spaces(shown)]
        else:
            values[meta["name"]] = parse(shown)
    return values


def expected(info: dict, dom_controls: list) -> Expected | None:
    """Expected readouts for an explorer described by ``probe_explorers``
    (``info``) whose controls show ``dom_controls`` ({description, value})."""
    oracle = ORACLES.get(info["cls"])
    if oracle is None:
        return None
    values = control_values(info, dom_controls)
    missing = [c["name"] for c in info["controls"] if c["name"] not in values]
    if missing:
        raise LookupError(f"{info['cls']}: controls {missing} not found in the DOM")
    key = (json.dumps(info, sort_keys=True, default=repr), repr(sorted(values.items())))
    if key not in _EXPECTED:  # a settling change polls this every 50 ms
        if len(_EXPECTED) >= 512:
            _EXPECTED.clear()
        _EXPECTED[key] = oracle(info.get("layer") or {}, values, info.get("image", False),
                                translator(info.get("language", "en")))
    return _EXPECTED[key]


_EXPECTED: dict = {}
""":func:`expected`'s results by explorer and control values (the oracles
are pure; a planner's costs a training_memory call)."""


def mismatches(info: dict, exp: Expected, named: dict) -> list[str]:
    """Readouts whose DOM text lacks an expected string ([] when all agree).

    ``named`` is ``state()["named"]``: readout name -> texts of the elements
    with the CSS class ``actmem-readout-<name>`` (the explorer adds it), so a
    readout is found by its name, not by its place on the page. Each readout
    the kernel probe lists must be there exactly once and be non-empty."""
    bad = []
    for name in info["readouts"]:
        texts = named.get(name, [])
        if len(texts) != 1:
            bad.append(f"{name}: {len(texts)} elements with class "
                       f"actmem-readout-{name} in the output, expected 1 "
                       f"({info['cls']} readouts {info['readouts']})")
            continue
        text = texts[0]
        if not text.strip():
            bad.append(f"{name}: empty")
        for want in exp.readouts.get(name, []):
            if callable(want):
                problem = want(text)
                if problem:
                    bad.append(f"{name}: {text[:200]!r} {problem}")
            elif want not in text:
                bad.append(f"{name}: {text!r} lacks {want!r}")
    return bad

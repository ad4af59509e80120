"""Views for notebook 05: per-stage text and an explorer over pipeline schedules.

The choice functions offer only what :func:`actmem.schedules.check_schedule`
accepts (and ``p*v`` dividing ``L``), so a learner can never pick a
schedule Megatron-LM would refuse. :class:`ScheduleExplorer` is an explorer
of :mod:`actmem.widgets` (state widgets, a PNG figure): it redraws the
schedule chart of :mod:`actmem.schedule_figures` and states each stage's
activation bytes for the notebook's layer. Like :mod:`actmem.variant_views`
it imports ipywidgets and matplotlib; ``import actmem`` does not import it.
"""

from __future__ import annotations

import functools

import ipywidgets as widgets

from ..language import english, tr
from ..memo import kept_by_repr
from ..layer.dimensions import valid_tensor_parallel_sizes
from ..layer.memory import ActivationMemory, activation_memory
from .schedule_figures import TITLES, schedule_figure, schedule_title
from ..run.schedule.schedule_orders import megatron_groups
from ..run.schedule.schedules import (ALL_SCHEDULES, ORDERS, PYTORCH_ONLY, SCHEDULES, PipelineSchedule,
                             check_schedule, simulate_schedule)
from ..run.schedule.training import chunk_layers, model_activation_memory
from ..units import format_bytes
from ..validate import common_divisors
from .readouts import HTML, TEXT
from .widgets import L_CHOICES, _dropdown, _Explorer

P_MAX, M_MAX, V_MAX = 16, 32, 4
"""Largest p, m and v offered (the charts stay readable)."""
ORDER_LABELS = {"megatron": "Megatron-LM", "pytorch": "PyTorch"}
"""The order menu's labels (names, the same in every language)."""
NO_GROUP = "-"
"""The group-size menu's only entry where N does not apply (value 0)."""


def _accepted(schedule: str, p: int, m: int, v: int, order: str | None = None,
              group: int | None = None) -> bool:
    try:
        check_schedule(schedule, p, m, v, order, group)
    except ValueError:
        return False
    return True


def chunk_choices(L: int, p: int) -> list[int]:
    """v values for multi-chunk schedules with p stages: 2..4 with ``p*v``
    dividing ``L`` (empty when none does, or p < 2)."""
    return [v for v in range(2, V_MAX + 1) if p >= 2 and L % (p * v) == 0]


def stage_choices(L: int, largest: int = P_MAX) -> list[int]:
    """p values up to ``largest`` (16) that divide ``L``.

    >>> stage_choices(24)
    [1, 2, 3, 4, 6, 8, 12]
    """
    return [p for p in common_divisors(L) if p <= largest]


def order_options(schedule: str) -> list[tuple[str, str]]:
    """Whose order a schedule can take: Megatron-LM's and PyTorch's, or
    PyTorch's only (:data:`actmem.run.schedule.schedules.PYTORCH_ONLY`)."""
    orders = ("pytorch",) if schedule in PYTORCH_ONLY else ORDERS
    return [(ORDER_LABELS[o], o) for o in orders]


@functools.cache
def takes_v(schedule: str, v: int) -> bool:
    """Whether ``schedule`` takes ``v`` chunks per GPU (for some m, at p=2)."""
    return any(_accepted(schedule, 2, m, v, order) for m in range(1, M_MAX + 1)
               for _, order in order_options(schedule))


def schedule_options(chunks: list[int], pytorch: bool = False) -> list[tuple[str, str]]:
    """The schedule menu, ``(label, value)`` pairs labelled in the current
    language: the schedules the figures have a title for
    (:data:`actmem.schedule_figures.TITLES`) that take some v of
    ``[1, *chunks]``; PyTorch's newer ones only with ``pytorch=True``."""
    names = ALL_SCHEDULES if pytorch else SCHEDULES
    return [(tr(TITLES[name]), name) for name in names
            if name in TITLES and any(takes_v(name, v) for v in [1, *chunks])]


def schedule_rule(L: int, p: int, chunks: list[int], interleaving_p: list[int]) -> str:
    """Why the schedule menu for ``L`` layers at ``p`` stages offers what it
    does, for the message that refuses another schedule: ``chunks``, the
    v >= 2 offered at p; ``interleaving_p``, the p at which some v >= 2 is.

    >>> schedule_rule(32, 2, [2, 4], [2, 4])
    'the schedules that run at p=2 with v=1 or v in 2, 4'
    >>> schedule_rule(32, 1, [], [2, 4]).endswith("dividing L=32; choose p among 2, 4 for them")
    True
    """
    if chunks:
        return f"the schedules that run at p={p} with v=1 or v in {', '.join(map(str, chunks))}"
    where = (f"choose p among {', '.join(map(str, interleaving_p))} for them"
             if interleaving_p else "no p offered has them")
    return (f"at p={p} only schedules with v=1 run: v >= 2 model chunks (as interleaving "
            f"needs) need p >= 2 with p*v dividing L={L}; {where}")


def microbatch_choices(schedule: str, p: int, v: int, order: str | None = None,
                       any_group: bool = False) -> list[int]:
    """m values up to 32 that the schedule accepts in ``order``; with
    ``any_group`` Megatron-LM's interleaving takes every m that some group
    size N accepts (N = m always does when m >= p), not only the default N = p."""
    return list(_microbatch_choices(schedule, p, v, order, any_group))


@kept_by_repr(256)  # asked at every change of an explorer's control
def _microbatch_choices(schedule: str, p: int, v: int, order: str | None,
                        any_group: bool) -> tuple[int, ...]:
    def ok(m):
        if any_group and schedule == "interleaved" and order in (None, "megatron"):
            return _accepted(schedule, p, p, v) and bool(megatron_groups(p, m))
        return _accepted(schedule, p, m, v, order)
    return tuple(m for m in range(1, M_MAX + 1) if ok(m))


def group_options(schedule: str, p: int, m: int, order: str) -> list[tuple[str, int]]:
    """Micro-batch group sizes N Megatron-LM accepts for interleaving
    (``schedule_orders.megatron_groups``); ``[("-", 0)]`` where N does not
    apply (0 means none)."""
    if schedule == "interleaved" and order == "megatron":
        return [(str(n), n) for n in megatron_groups(p, m)]
    return [(NO_GROUP, 0)]


def couple(cause: str | None, schedule: str, v: int, chunks: list[int]) -> tuple[str, int]:
    """The schedule and v after a change of ``cause``: picking a v the
    schedule does not take moves it to interleaved 1F1B (v > 1) or 1F1B
    (v = 1); picking a schedule moves v to its first valid value.

    >>> couple("v", "1f1b", 2, [2, 4])
    ('interleaved', 2)
    >>> couple("schedule", "interleaved", 1, [2, 4])
    ('interleaved', 2)
    >>> couple("v", "zbv", 4, [2, 4])
    ('interleaved', 4)
    """
    if cause == "v" and not takes_v(schedule, v):
        schedule = "interleaved" if v > 1 else "1f1b"
    allowed = [x for x in [1, *chunks] if takes_v(schedule, x)]
    if not allowed:
        schedule, allowed = "1f1b", [1]
    return schedule, v if v in allowed else allowed[0]


def restrict_schedule(explorer, chunks: list[int], p: int) -> None:
    """Offer the valid schedule, v and m (and order and N, where the
    explorer has them) of an explorer with those controls."""
    c = explorer.controls
    full = "order" in c
    schedule, v = couple(explorer.cause, c["schedule"].value, c["v"].value, chunks)
    explorer._set_options("schedule", schedule_options(chunks, pytorch=full), prefer=schedule)
    explorer._set_options("v", [1, *chunks], prefer=v)
    if not full:
        explorer._set_options("m", microbatch_choices(schedule, p, v))
        return
    orders = [o for _, o in order_options(schedule)]
    order = c["order"].value if c["order"].value in orders else orders[0]
    explorer._set_options("order", order_options(schedule), prefer=order)
    m = explorer._set_options("m", microbatch_choices(schedule, p, v, order, any_group=True))
    groups = [n for _, n in group_options(schedule, p, m, order)]
    group = next(n for n in (c["N"].value, p, groups[0]) if n in groups)
    explorer._set_options("N", group_options(schedule, p, m, order), prefer=group)


STAGE_COLUMNS = ("stage", "passes held at peak", "layers per pass", "activations", "GiB")
"""Column headings of :func:`stage_table_html`."""


def stage_table_html(schedule: PipelineSchedule, per_layer: ActivationMemory,
                     L: int, tr=english) -> str:
    """One row per stage: peak passes held, layers per pass, and bytes;
    headings translated by ``tr`` (:mod:`actmem.language`)."""
    layers = chunk_layers(L, schedule.p, schedule.v)
    rows = "".join(
        f"<tr><td>{i}</td><td>{schedule.peak_in_flight(i)}</td><td>{layers}</td>"
        f"<td>{format_bytes(n)}</td><td>{format_bytes(n, 'GiB')}</td></tr>"
        for i in range(schedule.p)
        for n in [schedule.stage_activation_memory(i, per_layer, L)])
    head = "".join(f"<th>{tr(c)}</th>" for c in STAGE_COLUMNS)
    return f"<table><tr>{head}</tr>{rows}</table>"


def first_stage_text(schedule: PipelineSchedule, per_layer: ActivationMemory,
                     L: int, tr=english) -> str:
    """The first stage's peak against ``L*M``, the whole model on one GPU;
    words translated by ``tr`` (:mod:`actmem.language`)."""
    first = schedule.stage_activation_memory(0, per_layer, L)
    whole = model_activation_memory(per_layer, L)
    return tr("first stage: {held} x {layers} layers x {M} = {first}, "
              "{ratio:.3f} x L*M ({whole})").format(
        held=schedule.peak_in_flight(0), layers=chunk_layers(L, schedule.p, schedule.v),
        M=format_bytes(per_layer.total), first=format_bytes(first), ratio=first / whole,
        whole=format_bytes(whole))


def chart_text(schedule: PipelineSchedule, tr=english) -> str:
    """The chart's caption, shown above it: its title without the bubble,
    which :func:`bubble_text` states (:func:`schedule_title`); words
    translated by ``tr`` (:mod:`actmem.language`)."""
    return schedule_title(schedule, tr, bubble=False)


def bubble_text(schedule: PipelineSchedule, tr=english) -> str:
    """The simulated bubble, as a fraction and a percentage; words
    translated by ``tr`` (:mod:`actmem.language`)."""
    bubble = schedule.bubble_fraction()
    return tr("bubble: {fraction} of the ideal time = {percent:.1%} (simulated)").format(
        fraction=bubble, percent=float(bubble))


class ScheduleExplorer(_Explorer):
    """L, t, p, schedule, v, m, order, N -> the schedule chart and each
    stage's bytes.

    v = 1 means one chunk per GPU: picking a v the schedule does not take
    switches it to interleaved 1F1B (v > 1) or 1F1B (v = 1), and picking a
    schedule sets its smallest valid v. ``order``: Megatron-LM's or PyTorch's
    (PyTorch's newer schedules only PyTorch's); ``N``: Megatron-LM's
    micro-batch group size for interleaving (0: not applicable), so m need
    not be a multiple of p. Only valid combinations are offered. Readouts:
    ``first_stage`` (Label, :func:`first_stage_text`), ``bubble`` (Label,
    :func:`bubble_text`), ``stages`` (HTML, :func:`stage_table_html`),
    ``chart`` (Label, :func:`chart_text`: the chart's title, as text
    above the image the browser sets rather than pixels drawn on each
    change).
    """

    def __init__(self, s=2048, b=1, h=4096, a=32, L=32, t=8, schedule="1f1b",
                 p=4, v=1, m=8, order=None, N=None):
        activation_memory(s, b, h, a, t)
        self.layer = dict(s=s, b=b, h=h, a=a)
        controls = {"L": _dropdown("L", L_CHOICES, L)}
        controls["t"] = _dropdown("t", valid_tensor_parallel_sizes(h, a), t,
                                  f"t must divide a={a} and h={h}")
        controls["p"] = _dropdown("p", stage_choices(L), p,
                                  f"p <= {P_MAX} must divide L={L}")
        chunks = chunk_choices(L, p)
        controls["schedule"] = _dropdown(
            "schedule", schedule_options(chunks, pytorch=True), schedule, schedule_rule(
                L, p, chunks, [q for q in stage_choices(L) if chunk_choices(L, q)]))
        controls["v"] = _dropdown("v", [1, *chunks], v,
                                  f"1, or v >= 2 with p*v dividing L={L}")
        order = order_options(schedule)[0][1] if order is None else order
        group = check_schedule(schedule, p, m, v, order, N)  # the rules' message first
        controls["m"] = _dropdown("m", microbatch_choices(schedule, p, v, order, True), m,
                                  "the schedule's rules")
        controls["order"] = widgets.Dropdown(options=order_options(schedule), value=order,
                                             description=tr("order"))
        shown = group if order == "megatron" and schedule == "interleaved" else 0
        controls["N"] = widgets.Dropdown(options=group_options(schedule, p, m, order),
                                         value=shown, description="N")
        readouts = {"first_stage": TEXT, "bubble": TEXT, "stages": HTML, "chart": TEXT}
        rows = [widgets.HBox([controls[k] for k in row])
                for row in (("L", "t", "p"), ("schedule", "v", "m"), ("order", "N"))]
        super().__init__(controls, readouts, image=True, layout=rows)

    def restrict(self) -> None:
        L = self.controls["L"].value
        p = self._set_options("p", stage_choices(L))
        restrict_schedule(self, chunk_choices(L, p), p)

    def schedule(self) -> PipelineSchedule:
        """The schedule the controls show."""
        c = self.values()
        return simulate_schedule(c["schedule"], c["p"], c["m"], c["v"], c["order"],
                                 c["N"] or None)

    def refresh(self) -> None:
        L = self.controls["L"].value
        per_layer = activation_memory(**self.layer, t=self.controls["t"].value)
        schedule = self.schedule()
        self.say("first_stage", lambda tr: first_stage_text(schedule, per_layer, L, tr))
        self.say("bubble", lambda tr: bubble_text(schedule, tr))
        self.say("stages", lambda tr: stage_table_html(schedule, per_layer, L, tr))
        self.say("chart", lambda tr: chart_text(schedule, tr))
        self.show_figure(schedule_figure, schedule, title=False)

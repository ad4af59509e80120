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

import ipywidgets as widgets

from ..language import english, tr
from ..layer.config import valid_tensor_parallel_sizes
from ..layer.memory import ActivationMemory, activation_memory
from .schedule_figures import TITLES, schedule_figure
from ..run.schedules import SCHEDULES, PipelineSchedule, check_schedule, simulate_schedule
from ..run.training import chunk_layers, model_activation_memory
from ..units import format_bytes
from ..validate import common_divisors
from .readouts import HTML, TEXT
from .widgets import L_CHOICES, _dropdown, _Explorer

P_MAX, M_MAX, V_MAX = 16, 32, 4
"""Largest p, m and v offered (the charts stay readable)."""



def _accepted(schedule: str, p: int, m: int, v: int) -> bool:
    try:
        check_schedule(schedule, p, m, v)
    except ValueError:
        return False
    return True


def chunk_choices(L: int, p: int) -> list[int]:
    """v values for interleaving with p stages: 2..4 with ``p*v`` dividing
    ``L`` (empty when none does, or p < 2)."""
    return [v for v in range(2, V_MAX + 1) if p >= 2 and L % (p * v) == 0]


def stage_choices(L: int, largest: int = P_MAX) -> list[int]:
    """p values up to ``largest`` (16) that divide ``L``.

    >>> stage_choices(24)
    [1, 2, 3, 4, 6, 8, 12]
    """
    return [p for p in common_divisors(L) if p <= largest]


def schedule_options(chunks: list[int]) -> list[tuple[str, str]]:
    """The schedule menu, ``(label, value)`` pairs labelled in the current
    language: the schedules the figures have a title for
    (:data:`actmem.schedule_figures.TITLES`), interleaving only when some v
    is valid."""
    return [(tr(TITLES[name]), name) for name in SCHEDULES
            if name in TITLES and (name != "interleaved" or chunks)]


def microbatch_choices(schedule: str, p: int, v: int) -> list[int]:
    """m values up to 32 that the schedule accepts (interleaved:
    multiples of p, Megatron-LM's rule)."""
    return [m for m in range(1, M_MAX + 1) if _accepted(schedule, p, m, v)]


def couple(cause: str | None, schedule: str, v: int, chunks: list[int]) -> tuple[str, int]:
    """The schedule and v after a change of ``cause``: v > 1 means
    interleaving, v = 1 none; picking one moves the other.

    >>> couple("v", "1f1b", 2, [2, 4])
    ('interleaved', 2)
    >>> couple("schedule", "interleaved", 1, [2, 4])
    ('interleaved', 2)
    """
    if cause == "v":
        schedule = "interleaved" if v > 1 else \
            ("1f1b" if schedule == "interleaved" else schedule)
    if schedule == "interleaved" and not chunks:
        schedule = "1f1b"
    if schedule != "interleaved":
        return schedule, 1
    return schedule, v if v in chunks else chunks[0]


def restrict_schedule(explorer, chunks: list[int], p: int) -> None:
    """Offer the valid schedule, v and m of an explorer with those controls."""
    c = explorer.controls
    schedule, v = couple(explorer.cause, c["schedule"].value, c["v"].value, chunks)
    explorer._set_options("schedule", schedule_options(chunks), prefer=schedule)
    explorer._set_options("v", [1, *chunks], prefer=v)
    explorer._set_options("m", microbatch_choices(schedule, p, v))


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


def bubble_text(schedule: PipelineSchedule, tr=english) -> str:
    """The simulated bubble, as a fraction and a percentage; words
    translated by ``tr`` (:mod:`actmem.language`)."""
    bubble = schedule.bubble_fraction()
    return tr("bubble: {fraction} of the ideal time = {percent:.1%} (simulated)").format(
        fraction=bubble, percent=float(bubble))


class ScheduleExplorer(_Explorer):
    """L, t, schedule, p, v, m -> the schedule chart and each stage's bytes.

    v = 1 means no interleaving: picking v > 1 switches the schedule to
    interleaved 1F1B, picking v = 1 switches it back to 1F1B, and picking
    interleaved sets the smallest valid v. Only valid combinations are
    offered. Readouts: ``first_stage`` (Label, :func:`first_stage_text`),
    ``bubble`` (Label, :func:`bubble_text`), ``stages`` (HTML,
    :func:`stage_table_html`).
    """

    def __init__(self, s=2048, b=1, h=4096, a=32, L=32, t=8, schedule="1f1b",
                 p=4, v=1, m=8):
        activation_memory(s, b, h, a, t)
        self.layer = dict(s=s, b=b, h=h, a=a)
        controls = {"L": _dropdown("L", L_CHOICES, L)}
        controls["t"] = _dropdown("t", valid_tensor_parallel_sizes(h, a), t,
                                  f"t must divide a={a} and h={h}")
        controls["p"] = _dropdown("p", stage_choices(L), p,
                                  f"p <= {P_MAX} must divide L={L}")
        chunks = chunk_choices(L, p)
        controls["schedule"] = _dropdown("schedule", schedule_options(chunks), schedule)
        controls["v"] = _dropdown("v", [1, *chunks], v,
                                  f"1, or v >= 2 with p*v dividing L={L}")
        check_schedule(schedule, p, p, v)  # schedule and v agree
        controls["m"] = _dropdown("m", microbatch_choices(schedule, p, v), m,
                                  "interleaved needs m a multiple of p")
        readouts = {"first_stage": TEXT, "bubble": TEXT, "stages": HTML}
        rows = [widgets.HBox([controls[k] for k in row])
                for row in (("L", "t", "p"), ("schedule", "v", "m"))]
        super().__init__(controls, readouts, image=True, layout=rows)

    def restrict(self) -> None:
        L = self.controls["L"].value
        p = self._set_options("p", stage_choices(L))
        restrict_schedule(self, chunk_choices(L, p), p)
    def schedule(self) -> PipelineSchedule:
        """The schedule the controls show."""
        c = self.values()
        return simulate_schedule(c["schedule"], c["p"], c["m"], c["v"])

    def refresh(self) -> None:
        L = self.controls["L"].value
        per_layer = activation_memory(**self.layer, t=self.controls["t"].value)
        schedule = self.schedule()
        self.say("first_stage", lambda tr: first_stage_text(schedule, per_layer, L, tr))
        self.say("bubble", lambda tr: bubble_text(schedule, tr))
        self.say("stages", lambda tr: stage_table_html(schedule, per_layer, L, tr))
        self.show_figure(schedule_figure, schedule)

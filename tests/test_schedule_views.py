"""Notebook 05's schedule views: menus offer exactly the valid combinations,
readouts state the simulation's bytes, figures are drawn from the ops."""

import pytest
from matplotlib.collections import LineCollection, PathCollection, PolyCollection
from matplotlib.colors import to_rgba

import actmem
from actmem import schedule_figures, schedule_views, simulate_schedule
from actmem.views.schedule_views import ScheduleExplorer
from actmem.views.widgets import L_CHOICES

WORKED = actmem.activation_memory(2048, 1, 4096, 32, 8)


def accepted(schedule, p, m, v, L, order=None, N=None):
    try:
        actmem.schedules.check_schedule(schedule, p, m, v, order, N)
        actmem.training.chunk_layers(L, p, v)
    except ValueError:
        return False
    return p > 1 or v == 1   # the explorer offers v > 1 from p = 2


def offered(L, pytorch):
    """(schedule, order, p, v, m, N) the explorer's menus offer."""
    found = set()
    for p in schedule_views.stage_choices(L):
        chunks = schedule_views.chunk_choices(L, p)
        for _, schedule in schedule_views.schedule_options(chunks, pytorch):
            for v in [1, *chunks]:
                if not schedule_views.takes_v(schedule, v):
                    continue
                for _, order in schedule_views.order_options(schedule):
                    for m in schedule_views.microbatch_choices(schedule, p, v, order, pytorch):
                        found |= {(schedule, order, p, v, m, N) for _, N in
                                  schedule_views.group_options(schedule, p, m, order)}
    return found


@pytest.mark.parametrize("L", L_CHOICES)
def test_menus_offer_exactly_the_valid_combinations(L):
    everything = offered(L, pytorch=True)
    valid = {(schedule, order, p, v, m, N)
             for schedule in actmem.schedules.ALL_SCHEDULES for order in actmem.ORDERS
             for p in range(1, 17) for v in range(1, 5) for m in range(1, 33)
             for N in (0, *range(p, m + 1))
             if accepted(schedule, p, m, v, L, order, N or None)
             and (N or not (schedule == "interleaved" and order == "megatron"))}
    assert everything == valid
    assert {s for s, *_ in everything} == set(actmem.schedules.ALL_SCHEDULES)
    # the training planner's menus: Megatron-LM's three, default group size
    plain = {(s, p, v, m) for s, o, p, v, m, N in offered(L, pytorch=False)
             if o == "megatron" and N in (0, p)}
    assert {s for s, *_ in plain} == set(actmem.SCHEDULES)
    assert all(accepted(s, p, m, v, L) for s, p, v, m in plain)


@pytest.mark.parametrize("L", L_CHOICES)
def test_every_offered_combination_builds(L):
    """Each (schedule, order, p, v, m, N) the explorer's menus offer is
    simulated: none raises, and each has p stages of m*v forwards."""
    for schedule, order, p, v, m, N in offered(L, pytorch=True):
        s = simulate_schedule(schedule, p, m, v, order, N or None)
        assert len(s.ops) == p and sum(op.kind == "F" for op in s.ops[0]) == m * v


def test_worked_example_readouts():
    x = ScheduleExplorer()
    assert x.values() == {"L": 32, "t": 8, "schedule": "1f1b", "p": 4, "v": 1, "m": 8,
                          "order": "megatron", "N": 0}
    assert x.readouts["first_stage"].value == (
        "first stage: 4 x 8 layers x 184 MiB = 5888 MiB, 1.000 x L*M (5888 MiB)")
    assert x.readouts["bubble"].value == "bubble: 3/8 of the ideal time = 37.5% (simulated)"
    assert "<td>3</td><td>1</td><td>8</td><td>1472 MiB</td>" in x.readouts["stages"].value
    x.controls["schedule"].value = "interleaved"
    assert (x.controls["v"].value, x.controls["m"].value) == (2, 8)
    assert list(x.controls["v"].options) == [1, 2, 4]
    assert x.readouts["first_stage"].value == (
        "first stage: 11 x 4 layers x 184 MiB = 8096 MiB, 1.375 x L*M (5888 MiB)")
    assert x.readouts["bubble"].value == "bubble: 3/16 of the ideal time = 18.8% (simulated)"


def test_the_chart_title_is_text_above_the_image():
    """The figure is drawn without its title, which the readout ``chart``
    states: what the figure's own title would say, less the bubble."""
    x = ScheduleExplorer()
    assert x.readouts["chart"].value == "1F1B: p=4 stages, m=8 micro-batches; box numbers: " \
                                        "micro-batch"
    assert x._figure.axes[0].get_title() == ""
    x.controls["p"].value, x.controls["m"].value = 16, 16
    x.controls["schedule"].value = "interleaved"
    assert x.readouts["chart"].value == "interleaved 1F1B: p=16 stages, m=16 micro-batches, " \
                                        "v=2 chunks per GPU; boxes too narrow for micro-batch numbers"
    title = schedule_figures.schedule_title(x.schedule())
    # the bubble (p-1)/(v*m) = 15/32 stays in the figure's own title only
    assert title.startswith(x.readouts["chart"].value.split(";")[0] + "\nbubble 46.9% ")


def test_v_and_schedule_move_together():
    x = ScheduleExplorer()
    x.controls["v"].value = 4
    assert x.values()["schedule"] == "interleaved" and x.values()["m"] == 8
    x.controls["v"].value = 1
    assert x.values()["schedule"] == "1f1b"
    x.controls["schedule"].value = "gpipe"
    x.controls["v"].value = 2
    assert x.values()["schedule"] == "interleaved"
    x.controls["schedule"].value = "gpipe"
    assert x.values()["v"] == 1
    x.controls["schedule"].value = "interleaved"
    x.controls["p"].value = 1  # no interleaving with one stage
    assert x.values()["schedule"] == "1f1b" and list(x.controls["v"].options) == [1]
    assert [label for label, _ in x.controls["schedule"].options] == [
        "GPipe", "1F1B", "interleaved zero bubble", "looped breadth-first"]


def test_megatron_group_size_lets_p4_take_m6():
    x = ScheduleExplorer(schedule="interleaved", v=2)
    assert list(x.controls["m"].options) == list(range(4, 33))   # m >= p: N = m works
    assert list(x.controls["N"].options) == [("4", 4), ("8", 8)]
    x.controls["m"].value = 6
    assert [n for _, n in x.controls["N"].options] == [6] and x.values()["N"] == 6
    assert x.readouts["first_stage"].value.startswith("first stage: 12 x 4 layers")
    x.controls["order"].value = "pytorch"
    assert x.values()["N"] == 0 and x.readouts["first_stage"].value.startswith(
        "first stage: 12 x 4 layers")
    x.controls["schedule"].value = "zbv"
    assert x.values()["order"] == "pytorch" and x.values()["v"] == 2
    assert list(x.controls["order"].options) == [("PyTorch", "pytorch")]
    x.controls["schedule"].value = "dualpipev"
    assert min(x.controls["m"].options) == 8


def test_readouts_follow_every_control():
    x = ScheduleExplorer()
    for L in (24, 96):
        x.controls["L"].value = L
        for schedule in actmem.schedules.ALL_SCHEDULES:
            if schedule not in [value for _, value in x.controls["schedule"].options]:
                continue   # e.g. zbv needs p*2 to divide L
            x.controls["schedule"].value = schedule
            assert x.values()["schedule"] == schedule
            for p in x.controls["p"].options[-3:-1]:
                x.controls["p"].value = p
                for m in x.controls["m"].options[:2]:
                    x.controls["m"].value = m
                    t, v = x.controls["t"].value, x.controls["v"].value
                    order, N = x.controls["order"].value, x.controls["N"].value
                    s = simulate_schedule(schedule, p, m, v, order, N or None)
                    per_layer = actmem.activation_memory(2048, 1, 4096, 32, t)
                    assert x.readouts["first_stage"].value == \
                        schedule_views.first_stage_text(s, per_layer, L)
                    assert x.readouts["bubble"].value == schedule_views.bubble_text(s)
                    assert x.readouts["stages"].value == \
                        schedule_views.stage_table_html(s, per_layer, L)


@pytest.mark.parametrize("kwargs, message", [
    ({"p": 5}, r"^p=5 is not offered; choose one of 1, 2, 4, 8, 16 \(p <= 16 must divide L=32\)$"),
    ({"v": 3}, r"^v=3 is not offered; choose one of 1, 2, 4 \(1, or v >= 2 with p\*v"),
    ({"v": 2}, r"^v=2: model chunks \(v > 1\) need schedule='interleaved'"),
    ({"schedule": "interleaved"}, r"^v=1: the interleaved schedule needs v >= 2"),
    ({"schedule": "interleaved", "v": 2, "m": 6}, r"^m=6: .*default microbatch_group_size"),
    ({"schedule": "interleaved", "v": 2, "m": 3, "N": 4}, r"^microbatch_group_size=4: "),
    ({"schedule": "zbv", "v": 4}, r"^v=4: schedule 'zbv' needs exactly v=2"),
    ({"schedule": "zero-bubble"}, r"^schedule='zero-bubble' is not offered; choose one of "),
    ({"L": 33}, r"^L=33 is not offered; choose one of 24, 32, 40, 48, 96$"),
])
def test_invalid_constructor_values_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ScheduleExplorer(**kwargs)


def test_schedule_figure_draws_every_operation():
    s = simulate_schedule("interleaved", 4, 8, 2)
    fig = schedule_figures.schedule_figure(s)
    chart, held = fig.axes[:2]
    boxes = [c for c in chart.collections if isinstance(c, PolyCollection)]
    assert sum(len(b.get_paths()) for b in boxes) == 4 * 2 * 8 * 2
    # each box's micro-batch number: one glyph outline per box (zorder 3), and a
    # band of the box's colour behind each number in a hatched (chunk 1) box
    numbers, bands = sorted((c for c in chart.collections if isinstance(c, PathCollection)),
                            key=lambda c: -c.get_zorder())
    assert len(numbers.get_offsets()) == len(numbers.get_paths()) == 4 * 2 * 8 * 2
    assert len(bands.get_offsets()) == 4 * 8 * 2
    # the first stage holds 11 chunk passes at its peak; each stage's line is
    # keyed by a sample of its colour beside the stage's name, not by a legend
    assert len(held.lines) == 4 and max(held.lines[0].get_ydata()) == 11
    keys, = (c for c in chart.collections if isinstance(c, LineCollection))
    assert held.get_legend() is None and len(keys.get_segments()) == 4
    assert [tuple(c) for c in keys.get_colors()] == [to_rgba(line.get_color())
                                                     for line in held.lines]
    assert "bubble 18.8%" in chart.get_title()
    with pytest.raises(TypeError, match="schedule must be a PipelineSchedule"):
        schedule_figures.schedule_figure("1f1b")


def test_first_stage_figure_bars_are_l_times_m_under_1f1b():
    fig = schedule_figures.first_stage_figure(WORKED, 32, 16)
    ax = fig.axes[0]
    heights = [round(bar.get_height()) for bar in ax.patches]
    assert heights == [5888] * 5 + [7360, 8096, 8464, 5888]


def test_schedule_views_doctests():
    import doctest
    result = doctest.testmod(schedule_views)
    assert result.attempted > 0 and result.failed == 0

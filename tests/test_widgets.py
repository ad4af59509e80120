"""The notebook controls: set a value, read the state widgets (plain pytest).

Each readout must equal what actmem's pure functions give for the same
inputs, and the menus must only ever offer valid values (t dividing a and
h, a dividing h, p dividing L).
"""

from fractions import Fraction

import pytest

import actmem
from actmem import figures, widgets
from actmem.units import format_bytes

PNG = b"\x89PNG\r\n\x1a\n"


def set_layer(explorer, **values):
    for name in ("s", "b", "h", "a", "t"):
        if name in values:
            explorer.controls[name].value = values[name]


def layers():
    for h in widgets.H_CHOICES:
        for a in widgets.head_choices(h):
            for t in actmem.valid_tensor_parallel_sizes(h, a)[::2]:
                yield h, a, t


@pytest.fixture(scope="module")
def layer_explorer():
    return widgets.LayerExplorer()


@pytest.mark.parametrize("h, a, t", list(layers()))
@pytest.mark.parametrize("s, b", [(512, 8), (8192, 1)])
def test_layer_readouts_match_closed_form(layer_explorer, s, b, h, a, t):
    set_layer(layer_explorer, s=s, b=b, h=h, a=a, t=t)
    assert layer_explorer.values() == dict(s=s, b=b, h=h, a=a, t=t)
    result = actmem.activation_memory(s, b, h, a, t)
    closed = actmem.seed_formula(s, b, h, a, t)
    assert layer_explorer.readouts["total"].value == f"total: {format_bytes(closed)}"
    for group in actmem.GROUPS:
        assert layer_explorer.readouts[group].value == \
            f"{group}: {format_bytes(result.group_bytes(group))}"
    assert f"(b, a/t, s, s) = ({b}, {a // t}, {s}, {s})" in \
        layer_explorer.readouts["shapes"].value


def test_seed_readouts_are_the_published_numbers():
    explorer = widgets.LayerExplorer(t=1)
    for t, total in ((1, 912), (2, 496), (4, 288), (8, 184)):
        explorer.controls["t"].value = t
        assert explorer.readouts["total"].value == f"total: {total} MiB"
    assert explorer.readouts["fixed"].value == "fixed: 80 MiB"


def test_changing_h_and_a_restricts_t_to_common_divisors():
    explorer = widgets.LayerExplorer(h=4096, a=32, t=8)
    explorer.controls["h"].value = 6656
    assert list(explorer.controls["a"].options) == [8, 16, 32, 52, 64]
    explorer.controls["a"].value = 52
    assert list(explorer.controls["t"].options) == [1, 2, 4, 13, 26, 52]
    assert explorer.controls["t"].value == 4  # 8 is invalid: largest valid below
    assert explorer.readouts["total"].value == \
        f"total: {format_bytes(actmem.seed_formula(2048, 1, 6656, 52, 4))}"
    explorer.controls["h"].value = 5120
    assert list(explorer.controls["a"].options) == [8, 16, 32, 40, 64]
    assert explorer.controls["a"].value == 40
    assert list(explorer.controls["t"].options) == [1, 2, 4, 5, 8, 10, 20, 40]


@pytest.mark.parametrize("h", widgets.H_CHOICES)
def test_every_offered_t_is_valid(h):
    for a in widgets.head_choices(h):
        assert h % a == 0
        for t in actmem.valid_tensor_parallel_sizes(h, a):
            assert a % t == 0 and h % t == 0
        assert [t for t in range(1, a + 1) if a % t == 0 and h % t == 0] == \
            actmem.valid_tensor_parallel_sizes(h, a)


def test_layer_explorer_figure_is_png_and_redraws():
    explorer = widgets.LayerExplorer(t=8, figure=True)
    before = bytes(explorer.image.value)
    assert before.startswith(PNG)
    explorer.controls["s"].value = 4096
    assert bytes(explorer.image.value).startswith(PNG) and bytes(explorer.image.value) != before


@pytest.mark.parametrize("t", actmem.valid_tensor_parallel_sizes(4096, 32))
@pytest.mark.parametrize("activation", ["gelu", "swiglu"])
@pytest.mark.parametrize("flash", [False, True])
def test_ledger_readouts(t, activation, flash):
    explorer = widgets.LedgerExplorer()
    explorer.controls["t"].value = t
    explorer.controls["activation"].value = activation
    explorer.controls["flash_attention"].value = flash
    result = actmem.activation_memory(2048, 1, 4096, 32, t, activation=activation,
                                      flash_attention=flash)
    assert explorer.readouts["total"].value == f"total: {format_bytes(result.total)}"
    assert explorer.readouts["table"].value.count("<tr>") == len(result.rows) + 1
    k = widgets.coefficients(result)
    assert k["fixed"] == 10
    assert k["intermediate"] == (24 if activation == "gelu" else 32)
    assert k["attention_map"] == (Fraction(1, 512) if flash else 5)


def test_ledger_coefficients_are_the_papers():
    explorer = widgets.LedgerExplorer()
    assert explorer.readouts["coefficients"].value == \
        "fixed 10 sbh, split 24 sbh/t, attention map 5 bas^2/t"


@pytest.mark.parametrize("t", actmem.valid_tensor_parallel_sizes(4096, 32))
def test_sharding_readouts(t):
    explorer = widgets.ShardingExplorer(t=2)
    explorer.controls["t"].value = t
    result = actmem.activation_memory(2048, 1, 4096, 32, t)
    for group in actmem.GROUPS:
        assert explorer.readouts[group].value == \
            f"{group} per GPU: {format_bytes(result.group_bytes(group))}"
    assert bytes(explorer.image.value).startswith(PNG)


def test_sharding_at_t2_is_80_96_320_mib():
    explorer = widgets.ShardingExplorer(t=2)
    assert [w.value for w in explorer.readouts.values()] == [
        "fixed per GPU: 80 MiB", "intermediate per GPU: 96 MiB",
        "attention_map per GPU: 320 MiB"]


@pytest.mark.parametrize("L", widgets.L_CHOICES)
@pytest.mark.parametrize("t", [1, 8])
def test_training_readouts(L, t):
    explorer = widgets.TrainingExplorer(t=8, p=4, m=4)
    explorer.controls["L"].value = L
    explorer.controls["t"].value = t
    assert list(explorer.controls["p"].options) == actmem.common_divisors(L)
    per_layer = actmem.activation_memory(2048, 1, 4096, 32, t)
    for p in (1, max(explorer.controls["p"].options)):
        explorer.controls["p"].value = p
        for m in (1, 16):
            explorer.controls["m"].value = m
            stage = actmem.pipeline_stage_memory(per_layer, L, p, m)
            assert explorer.readouts["stage"].value == \
                f"m*(L/p)*M, one stage: {format_bytes(stage)} = {format_bytes(stage, 'GiB')}"
    model = actmem.model_activation_memory(per_layer, L)
    assert explorer.readouts["model"].value == \
        f"L*M, one GPU: {format_bytes(model)} = {format_bytes(model, 'GiB')}"


def test_training_seed_run_is_5888_mib():
    explorer = widgets.TrainingExplorer(L=32, t=8, p=4, m=4)
    assert explorer.readouts["model"].value == "L*M, one GPU: 5888 MiB = 5.75 GiB"
    assert explorer.readouts["stage"].value == "m*(L/p)*M, one stage: 5888 MiB = 5.75 GiB"
    assert explorer.readouts["naive"].value == \
        "L*M/p (not the peak): 1472 MiB = 1.44 GiB"


def test_terms_figure_bars_are_the_table_in_mib():
    fig = figures.terms_vs_t_figure(2048, 1, 4096, 32, t_values=[1, 2, 4, 8])
    ax = fig.axes[0]
    tops = [round(p.get_y() + p.get_height()) for p in ax.patches[-4:]]
    assert tops == [912, 496, 288, 184]
    assert "MiB" in ax.get_ylabel() and ax.get_xlabel()


def test_sharding_figure_draws_groups_by_placement():
    fig = figures.sharding_figure(t=2)
    assert len(fig.axes) == 9
    heads = [p for p in fig.axes[8].patches]  # GPU 1, attention map: 32 heads
    kept = [p for p in heads if p.get_facecolor()[:3] != (1.0, 1.0, 1.0)]
    assert (len(heads), len(kept)) == (32, 16)

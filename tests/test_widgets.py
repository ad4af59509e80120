"""The notebook controls: set a value, read the state widgets (plain pytest).

Each readout must equal what actmem's pure functions give for the same
inputs, and the menus must only ever offer valid values (t dividing a and
h, a dividing h, p dividing L).
"""

import re
from fractions import Fraction
from functools import partial

import pytest

import actmem
from actmem import figures, widgets
from actmem.units import format_bytes
from actmem.views.schedule_views import ScheduleExplorer
from actmem.views.variant_views import VariantExplorer

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
    closed = actmem.paper_formula(s, b, h, a, t)
    assert layer_explorer.readouts["total"].value == f"total: {format_bytes(closed)}"
    for group in actmem.GROUPS:
        assert layer_explorer.readouts[group].value == \
            f"{group.replace('_', ' ')}: {format_bytes(result.group_bytes(group))}"
    assert f"(b, a/t, s, s) = ({b}, {a // t}, {s}, {s})" in \
        layer_explorer.readouts["shapes"].value


def test_default_readouts_are_the_published_numbers():
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
        f"total: {format_bytes(actmem.paper_formula(2048, 1, 6656, 52, 4))}"
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


def test_layer_explorer_states_its_figures_title_as_text():
    """The figure is drawn without its title; the readout ``chart`` says it,
    with the fixed floor 10sbh = 10 x 2048 x 1 x 4096 bytes = 80 MiB (sec. 4.1),
    and follows s."""
    explorer = widgets.LayerExplorer(t=8, figure=True)
    assert explorer._figure.axes[0].get_title() == ""
    assert explorer.readouts["chart"].value == (
        "Three terms against t (s=2048, b=1, h=4096, a=32); fixed floor (dashed) 80 MiB at every t")
    explorer.controls["s"].value = 4096
    assert "(s=4096, b=1, h=4096, a=32); fixed floor (dashed) 160 MiB" in \
        explorer.readouts["chart"].value
    assert "chart" not in widgets.LayerExplorer().readouts  # no figure, no title


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
    k = actmem.coefficients(result)
    assert k["fixed"] == 10
    # SwiGLU at Megatron-LM's width f = 10880: 8 + (2 + 2 + 2) * f/h = 383/16
    assert k["intermediate"] == (24 if activation == "gelu" else Fraction(383, 16))
    # FlashAttention keeps fp32 (4-byte) statistics of shape (b, a, s)
    assert k["attention_map"] == (4 if flash else 5)
    split = 24 if activation == "gelu" else "383/16"
    attention = ("attention-map statistics 4 bas/t (no s x s map)" if flash
                 else "attention map 5 bas^2/t")
    assert explorer.readouts["coefficients"].value == \
        f"fixed 10 sbh, intermediate {split} sbh/t, {attention}"


def test_ledger_explorer_offers_only_t_that_split_swiglus_width():
    explorer = widgets.LedgerExplorer(h=1280, a=20, t=5)  # GeLU: t | 20 and 1280
    assert list(explorer.controls["t"].options) == [1, 2, 4, 5, 10, 20]
    explorer.controls["activation"].value = "swiglu"  # f = 3392 = 2^6 * 53
    assert list(explorer.controls["t"].options) == [1, 2, 4]
    assert explorer.controls["t"].value == 4
    result = actmem.activation_memory(2048, 1, 1280, 20, 4, activation="swiglu")
    assert explorer.readouts["total"].value == f"total: {format_bytes(result.total)}"


def test_ledger_coefficients_are_the_papers():
    explorer = widgets.LedgerExplorer()
    assert explorer.readouts["coefficients"].value == \
        "fixed 10 sbh, intermediate 24 sbh/t, attention map 5 bas^2/t"


S, B, H, A = 2048, 2, 4096, 32
SBH, BAS = S * B * H, B * A * S


@pytest.mark.parametrize("t", [1, 2, 8])
@pytest.mark.parametrize("options, bytes_, units", [
    # the paper's layer: 10 sbh replicated, 24 sbh/t, 5 bas^2/t
    ({}, (10 * SBH, 24 * SBH, 5 * BAS * S), ("sbh", "sbh/t", "bas^2/t")),
    # sequence parallelism: the same 10 sbh, now split along s over t ranks
    ({"sequence_parallel": True}, (10 * SBH, 24 * SBH, 5 * BAS * S),
     ("sbh/t", "sbh/t", "bas^2/t")),
    # FlashAttention: no s x s map, fp32 log-sum-exp of shape (b, a, s)
    ({"flash_attention": True}, (10 * SBH, 24 * SBH, 4 * BAS),
     ("sbh", "sbh/t", "bas/t")),
    # no dropout: two 1-byte sbh masks, the s x s mask and output go
    ({"dropout": False}, (8 * SBH, 24 * SBH, 2 * BAS * S),
     ("sbh", "sbh/t", "bas^2/t")),
    # full recomputation: the layer input only
    ({"recompute": "full"}, (2 * SBH, 0, 0), ("sbh", "sbh/t", "bas^2/t")),
])
def test_coefficients_against_hand_arithmetic(t, options, bytes_, units):
    """Global bytes by hand -> per GPU -> divided by the unit's size."""
    fixed, split, attention = bytes_
    sp = options.get("sequence_parallel", False)
    per_gpu = (Fraction(fixed, t if sp else 1), Fraction(split, t),
               Fraction(attention, t))
    size = {"sbh": SBH, "sbh/t": Fraction(SBH, t), "bas/t": Fraction(BAS, t),
            "bas^2/t": Fraction(BAS * S, t)}
    result = actmem.activation_memory(S, B, H, A, t, **options)
    assert (result.fixed, result.intermediate, result.attention_map) == per_gpu
    assert actmem.coefficient_units(result.config) == dict(zip(actmem.GROUPS, units))
    assert actmem.coefficients(result) == {
        g: n / size[u] for g, n, u in zip(actmem.GROUPS, per_gpu, units)}
    assert list(actmem.coefficients(result).values()) == [
        Fraction(n, {"sbh": SBH, "sbh/t": SBH, "bas/t": BAS, "bas^2/t": BAS * S}[u])
        for n, u in zip(bytes_, units)]


def test_coefficient_text_under_sequence_parallelism_says_sbh_over_t():
    result = actmem.activation_memory(2048, 1, 4096, 32, 8, sequence_parallel=True)
    assert widgets.coefficients_text(result) == \
        "fixed 10 sbh/t, intermediate 24 sbh/t, attention map 5 bas^2/t"


@pytest.mark.parametrize("t", actmem.valid_tensor_parallel_sizes(4096, 32))
def test_sharding_readouts(t):
    explorer = widgets.ShardingExplorer(t=2)
    explorer.controls["t"].value = t
    result = actmem.activation_memory(2048, 1, 4096, 32, t)
    for group in actmem.GROUPS:
        assert explorer.readouts[group].value == \
            f"{group.replace('_', ' ')} per GPU: {format_bytes(result.group_bytes(group))}"
    assert bytes(explorer.image.value).startswith(PNG)


def test_sharding_at_t2_is_80_96_320_mib():
    explorer = widgets.ShardingExplorer(t=2)
    assert [w.value for w in explorer.readouts.values()] == [
        "fixed per GPU: 80 MiB", "intermediate per GPU: 96 MiB",
        "attention map per GPU: 320 MiB"]


def test_terms_figure_bars_are_the_table_in_mib():
    fig = figures.terms_vs_t_figure(2048, 1, 4096, 32, t_values=[1, 2, 4, 8])
    ax = fig.axes[0]
    tops = [round(p.get_y() + p.get_height()) for p in ax.patches[-4:]]
    assert tops == [912, 496, 288, 184]
    ylabel, = (text for text in ax.texts if text.get_rotation() == 90)
    assert "MiB" in ylabel.get_text() and ax.get_xlabel()


def test_sharding_figure_draws_groups_by_placement():
    fig = figures.sharding_figure(t=2)
    assert len(fig.axes) == 9
    heads = fig.axes[8].collections[0].get_facecolors()  # GPU 1, attention map: 32 heads
    kept = [c for c in heads if tuple(c[:3]) != (1.0, 1.0, 1.0)]
    assert (len(heads), len(kept)) == (32, 16)


# ------------------------------------------------------------ large layers

BIG = dict(s=32768, b=8, h=12288, a=96)
"""A long-context GPT-3-sized layer: millions of MiB, no 1.6e+06 anywhere."""


def test_large_layer_ledger_html_prints_whole_mib():
    result = actmem.activation_memory(**BIG)
    text = widgets.ledger_html(result)
    assert "e+" not in text
    # softmax output: 2 bytes x b*a*s^2 = 2 * 8 * 96 * 2^30 B = 1572864 MiB
    assert "<td>1572864</td>" in text
    assert "<td>3072</td>" in text  # a 1-byte (s, b, h) mask: sbh B = 3072 MiB
    assert result.total == 4036608 * 2**20


def test_large_layer_figures_print_whole_mib():
    fig = figures.terms_vs_t_figure(**BIG, t_values=[1, 8])
    texts = [t.get_text() for t in fig.axes[0].texts]
    texts += [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "4036608" in texts and not any("e+" in t for t in texts)


def test_small_rows_keep_their_decimals_in_the_ledger_table():
    flash = actmem.activation_memory(2048, 1, 4096, 32, 8, flash_attention=True)
    assert "<td>0.0312</td>" in widgets.ledger_html(flash)  # 32 KiB log-sum-exp


# ------------------------------------------------------- invalid arguments

@pytest.mark.parametrize("make, error, message", [
    (lambda: widgets.LayerExplorer(t=3), ValueError,
     r"^t=3 must divide a=32 and h=4096; valid t: 1, 2, 4, 8, 16, 32$"),
    (lambda: widgets.LayerExplorer(s=0), ValueError, r"^s must be a positive integer"),
    (lambda: widgets.LayerExplorer(h=4096, a=30), ValueError,
     r"^h=4096 must be divisible by a=30"),
    (lambda: widgets.LayerExplorer(s="2048"), TypeError, r"^s must be a positive integer"),
    (lambda: widgets.LedgerExplorer(t=64), ValueError, r"^t=64 must divide a=32"),
    (lambda: widgets.ShardingExplorer(t=3), ValueError,
     r"^t=3 must divide a=32 and h=4096; valid t: 1, 2, 4, 8, 16, 32$"),
])
def test_invalid_constructor_values_name_the_argument(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_layer_explorer_offers_any_valid_layer_it_is_given():
    # a learner's own layer in notebook 04: values beyond the menus are added
    explorer = widgets.LayerExplorer(s=1000, b=3, h=2560, a=20, t=4)
    assert list(explorer.controls["s"].options) == [512, 1000, 1024, 2048, 4096, 8192]
    assert list(explorer.controls["b"].options) == [1, 2, 3, 4, 8]
    assert 2560 in explorer.controls["h"].options
    assert list(explorer.controls["a"].options) == [8, 16, 20, 32, 40, 64]
    result = actmem.activation_memory(1000, 3, 2560, 20, 4)
    assert explorer.readouts["total"].value == f"total: {format_bytes(result.total)}"
    explorer.controls["h"].value = 4096  # a=20 does not divide 4096: nearest below
    assert explorer.controls["a"].value == 16 and 20 not in explorer.controls["a"].options
    explorer.controls["h"].value = 2560  # and is offered again with its own h
    assert 20 in explorer.controls["a"].options


def test_closest_needs_options():
    assert widgets.closest(5, [1, 2, 4, 8]) == 4
    assert widgets.closest(0, [1, 2]) == 1
    with pytest.raises(ValueError, match=r"^options must offer at least one value"):
        widgets.closest(3, [])


def test_widgets_doctests():
    import doctest
    result = doctest.testmod(widgets)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("make", [
    widgets.LayerExplorer, widgets.LedgerExplorer, widgets.ShardingExplorer,
    ScheduleExplorer, partial(VariantExplorer, figure=False)])
def test_explorers_carry_dom_hooks_for_the_browser_suite(make):
    """tests/browser finds readouts by these CSS classes, not by position."""
    x = make()
    assert "actmem-explorer" in x.box._dom_classes
    assert x.panel.widget in x.box.children
    for name, readout in x.readouts.items():
        assert f'<div class="actmem-readout-{name}">' in x.panel.widget.value


# ------------------------------------------------------ issue 10, item 9

@pytest.mark.parametrize("make, name, bad", [
    (widgets.LayerExplorer, "t", None),
    (partial(VariantExplorer, figure=False), "recompute", None),
    (ScheduleExplorer, "m", None),
])
def test_a_control_set_to_none_is_refused_and_put_back(make, name, bad):
    x = make()
    before = ({k: c.value for k, c in x.controls.items()},
              {k: r.value for k, r in x.readouts.items()})
    with pytest.raises(ValueError, match=rf"^{name}=None is not offered; choose one of "):
        x.controls[name].value = bad
    after = ({k: c.value for k, c in x.controls.items()},
             {k: r.value for k, r in x.readouts.items()})
    assert after == before
    x.controls[name].value = x.controls[name].options[0] if not isinstance(
        x.controls[name].options[0], tuple) else x.controls[name].options[0][1]


def test_explorer_flags_must_be_bools():
    with pytest.raises(TypeError, match=r"^figure must be True or False, got 'yes'$"):
        widgets.LayerExplorer(figure="yes")
    with pytest.raises(TypeError, match=r"^figure must be True or False, got 1$"):
        VariantExplorer(figure=1)


# ------------------------------------------- issue 11, items 3 and 4

def test_bytes_per_gpu_figure_is_to_scale():
    result = actmem.activation_memory(2048, 1, 4096, 32, 2)
    ax = figures.bytes_per_gpu_figure(t=2).axes[0]
    n = len(result.rows)
    whole, kept = ax.patches[:n], ax.patches[n:]
    assert sum(p.get_width() for p in whole) * 2**20 == sum(r.global_bytes for r in result.rows)
    assert sum(p.get_width() for p in kept) * 2**20 == result.total
    assert min(t.get_fontsize() for t in ax.texts) >= 9


@pytest.mark.parametrize("t", [2, 3, 4])
def test_tensor_parallel_figure_draws_one_row_per_gpu(t):
    ax = figures.tensor_parallel_figure(t).axes[0]
    assert [x.get_text() for x in ax.texts if x.get_text().startswith("GPU")] == \
        [f"GPU {i}" for i in range(t)]
    assert len(ax.patches) == 5 * t  # input, column-parallel, GeLU, partial sum, output


@pytest.mark.parametrize("t, error", [(1, ValueError), (8, ValueError), ("2", TypeError)])
def test_tensor_parallel_figure_refuses_other_sizes(t, error):
    with pytest.raises(error, match="^t"):
        figures.tensor_parallel_figure(t)


def test_doubling_figure_bars_are_the_layers_terms():
    fig = figures.doubling_figure(2048, 1, 4096, 32, 1)
    ax = fig.axes[0]
    assert [x.get_text() for x in ax.get_xticklabels()] == ["the layer", "2s", "2b", "2h",
                                                            "2a", "2t"]
    totals = [t.get_text() for t in ax.texts]
    # 912 MiB; 2s: 80+192 doubled, map x4 = 3104; 2b doubles all; 2h: 544+640; 2a: map x2
    assert totals == ["912", "3104", "1824", "1184", "1552", "496"]



@pytest.mark.parametrize("t", [1, 2])
def test_bytes_per_gpu_legend_has_no_empty_entry(t):
    """At t = 1 one GPU keeps every whole tensor: the outline is hidden under
    the fill, so the legend must not offer an empty "whole tensor" box."""
    labels = [x.get_text() for x in figures.bytes_per_gpu_figure(t=t).axes[0].get_legend().get_texts()]
    assert ("whole tensor" in labels) == (t > 1)
    assert len(labels) == len(figures.GROUPS) + (t > 1)


def test_fit_planner_menu_shows_model_names_and_keeps_preset_keys():
    from actmem.views.fit_views import FitPlanner
    menu = FitPlanner().controls["model"]
    assert list(menu._options_values) == [*actmem.PRESETS, *actmem.MOE_PRESETS]
    names = dict(zip(menu._options_values, menu._options_labels))
    assert names["llama2-7b"] == "LLaMA-2-7B" and names["mixtral-8x7b"] == "Mixtral 8x7B"
    assert not set(menu._options_labels) & set(menu._options_values)  # no key shown as a name
    assert menu.value == "llama2-7b"


def test_readouts_name_the_attention_map_readably():
    """A learner reads "attention map", not the code's key attention_map."""
    layer = widgets.LayerExplorer(t=2).readouts["attention_map"].value
    sharded = widgets.ShardingExplorer().readouts["attention_map"].value
    assert layer.startswith("attention map: ") and sharded.startswith("attention map per GPU: ")
    assert "attention_map" not in layer + sharded


def test_variant_explorer_names_activations_and_punctuates_chinese():
    """The MLP menu shows GeLU/SwiGLU/squared ReLU (values stay the code's); the Chinese
    readouts use full-width punctuation, the English value is unchanged."""
    from actmem.language import set_language
    english = VariantExplorer(recompute="full", figure=False)
    menu = english.controls["activation"]
    assert list(zip(menu._options_labels, menu._options_values)) == [
        ("GeLU", "gelu"), ("SwiGLU", "swiglu"), ("squared ReLU", "squared_relu")]
    set_language("zh")
    try:
        chinese = VariantExplorer(recompute="full", figure=False)
    finally:
        set_language("en")
    for key in ("chosen", "baseline", "change"):
        shown = chinese.readouts[key].shown
        assert "（" in shown and not re.search(r"[:,(]", shown), (key, shown)
        assert chinese.readouts[key].value == english.readouts[key].value

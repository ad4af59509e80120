"""Readouts in one panel (issue 10 item 18): one message per control
change, sent before the figure is drawn; text escaped, HTML kept."""

from actmem import widgets
from actmem.views.readouts import HTML, TEXT, ReadoutPanel
from actmem.views.schedule_views import ScheduleExplorer


def sent(widget) -> list:
    """Every value the widget sends to the browser, in order."""
    values = []
    widget.observe(lambda change: values.append(change["new"]), names="value")
    return values


def test_text_is_escaped_and_html_kept():
    panel = ReadoutPanel({"total": TEXT, "table": HTML})
    panel.readouts["total"].write("a < b", "a < b")
    table = "<table><tr><td>1</td></tr></table>"
    panel.readouts["table"].write(table, table)
    assert panel.widget.value == ('<div class="actmem-readout-total">a &lt; b</div>'
                                  '<div class="actmem-readout-table">'
                                  "<table><tr><td>1</td></tr></table></div>")


def test_the_panel_shows_the_shown_text_and_value_stays_english():
    panel = ReadoutPanel({"total": TEXT})
    panel.readouts["total"].write("total: 80 MiB", "总计：80 MiB")
    assert panel.readouts["total"].value == "total: 80 MiB"
    assert panel.widget.value == '<div class="actmem-readout-total">总计：80 MiB</div>'


def test_a_held_panel_sends_once():
    panel = ReadoutPanel({"x": TEXT, "y": TEXT})
    values = sent(panel.widget)
    with panel.hold():
        panel.readouts["x"].write("1", "1")
        panel.readouts["y"].write("2", "2")
        panel.readouts["y"].write("3", "3")
    assert len(values) == 1 and "3" in values[0]
    panel.readouts["x"].write("1", "1")  # unchanged: nothing sent
    assert len(values) == 1


def test_one_control_change_sends_the_readouts_once_and_before_the_figure():
    for explorer, control, value in [(widgets.ShardingExplorer(), "t", 4),
                                     (widgets.LayerExplorer(figure=True), "s", 4096),
                                     (ScheduleExplorer(), "m", 16)]:
        order = []
        explorer.panel.widget.observe(lambda c: order.append("readouts"), names="value")
        explorer.image.observe(lambda c: order.append("figure"), names="value")
        explorer.controls[control].value = value
        assert order == ["readouts", "figure"], type(explorer).__name__

"""An explorer sends a figure it showed recently again without drawing it."""

from actmem.views import figures, widgets
from actmem.views.widgets import IMAGES_KEPT, ShardingExplorer


def _counting(monkeypatch):
    calls = []
    draw = figures.sharding_figure

    def counted(*args, **kwargs):
        calls.append(kwargs["t"])
        return draw(*args, **kwargs)

    monkeypatch.setattr(widgets.figures, "sharding_figure", counted)
    return calls


def test_going_back_shows_the_kept_image_without_drawing(monkeypatch):
    calls = _counting(monkeypatch)
    explorer = ShardingExplorer(t=2)
    shown = {2: bytes(explorer.image.value)}
    explorer.controls["t"].value = 4
    shown[4] = bytes(explorer.image.value)
    explorer.controls["t"].value = 2
    assert bytes(explorer.image.value) == shown[2] != shown[4]
    assert calls == [2, 4]
    explorer.controls["t"].value = 4
    assert bytes(explorer.image.value) == shown[4]
    assert calls == [2, 4]
    assert explorer.readouts["intermediate"].value.endswith("MiB")


def test_only_the_last_images_are_kept(monkeypatch):
    calls = _counting(monkeypatch)
    explorer = ShardingExplorer(t=1)
    options = list(explorer.controls["t"].options)
    for t in options[1:] + options[:1]:
        explorer.controls["t"].value = t
    assert calls == options  # t=1 again: kept, not drawn
    assert len(explorer._images) == min(len(options), IMAGES_KEPT)
    explorer._images = explorer._images[:1]  # as when the others fell out
    explorer.controls["t"].value = options[1]
    assert calls == options + [options[1]]

"""Move every offered value of every explorer control kernel-side; print JSON.

Run by tests/test_colab_kernel.py twice: in a virtual environment with
Colab's ipywidgets 7.7.1 and IPython 7.34, and in the project's (ipywidgets 8).
For each explorer of the notebooks (built with its defaults, which are the
notebooks' arguments; MeasureExplorer of notebook 08 needs measured results and
is left out), every control is set, in turn, to every value it offers at that
moment (``.value = v``), and the readouts' text is recorded after each move.
Figures are drawn once per explorer (the first); later moves skip matplotlib
(the same in both environments), so the run stays under a minute.
"""

import json
import re
import sys
import warnings

import IPython
import ipywidgets

from actmem.layer.config import SP_AT_T1
from actmem.views.fit_views import FitPlanner
from actmem.views.schedule_views import ScheduleExplorer
from actmem.views.variant_views import VariantExplorer
from actmem.views.widgets import LayerExplorer, LedgerExplorer, ShardingExplorer, _Explorer

EXPLORERS = {"LayerExplorer": LayerExplorer, "LedgerExplorer": LedgerExplorer,
             "ShardingExplorer": ShardingExplorer,
             "VariantExplorer": lambda: VariantExplorer(figure=False),
             "ScheduleExplorer": ScheduleExplorer, "FitPlanner": FitPlanner}

draw_figure = _Explorer.show_figure


def show_first_figure_only(self, draw, *args, **kwargs):
    """_Explorer.show_figure for the first figure; then only its widget messages."""
    if self._drawn is None:
        return draw_figure(self, draw, *args, **kwargs)
    self.panel.send()
    self._release_controls()


def offered(control) -> list:
    """The values ``control`` offers now."""
    if hasattr(control, "options"):
        return [o[1] if isinstance(o, tuple) else o for o in control.options]
    if isinstance(control, ipywidgets.Checkbox):
        return [not control.value, control.value]
    raise TypeError(f"{type(control).__name__} offers no values")


def moves(name: str) -> list:
    """[control, repr(value), readouts] after each move of explorer ``name``."""
    explorer, records = EXPLORERS[name](), []
    for control_name, control in explorer.controls.items():
        for value in offered(control):
            if value in offered(control):  # still offered after the last move
                control.value = value
                records.append([control_name, repr(value),
                                {k: r.value for k, r in explorer.readouts.items()}])
    return records


if __name__ == "__main__":
    _Explorer.show_figure = show_first_figure_only
    warnings.simplefilter("error")  # nothing may warn, in either environment, except
    # the planner's menus, which build t=1 layers with sequence parallelism while
    # narrowing the cp menu (fit_levers.cp_choices): left to its owner, reported.
    warnings.filterwarnings("ignore", message=re.escape(SP_AT_T1))
    print(json.dumps({"ipywidgets": ipywidgets.__version__, "IPython": IPython.__version__,
                      "python": sys.version.split()[0],
                      "moves": {name: moves(name) for name in EXPLORERS}}))

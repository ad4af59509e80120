"""IPython startup script of the latency benchmark: the kernel's own time.

``widget_latency.py`` copies it into its Jupyter server's IPython profile.
In every kernel it times each widget message (ipykernel's ``comm_msg``
handler, which runs the explorer) from the handler's start to the moment
actmem's readouts are written into their widget
(``actmem.views.readouts.ReadoutPanel.send``, the first write that changes
them) and to the handler's end, and appends one JSON line per message to
the file named by ``$ACTMEM_KERNEL_CLOCK``::

    {"readouts_ms": 3.1, "readouts_cpu_ms": 2.9, "handler_ms": 61.0}

``readouts_cpu_ms`` is the kernel's main thread's CPU time over the same
span (``time.thread_time``): well below ``readouts_ms``, the kernel waited
for a core (or for the GIL) rather than computing.

``readouts_ms`` is null for a message that changed no readout (a floor
cell, a control whose change leaves the readouts as they were). The rest of
a readout's latency (browser to kernel, kernel to browser, the page's
update) is what the floor measures.
"""

import json
import os
import time

import actmem.views.readouts as _readouts

_log = open(os.environ["ACTMEM_KERNEL_CLOCK"], "a", buffering=1)
_now = {}  # of the message being handled: start, readouts
_send = _readouts.ReadoutPanel.send


def _timed_send(panel):
    if panel._dirty and "start" in _now and "readouts" not in _now:
        _send(panel)
        _now["readouts"] = time.perf_counter(), time.thread_time()
    else:
        _send(panel)


def _timed(handler):
    def handle(*args, **kwargs):
        _now.clear()
        _now["start"] = time.perf_counter(), time.thread_time()
        try:
            return handler(*args, **kwargs)
        finally:
            end, (start, start_cpu) = time.perf_counter(), _now.pop("start")
            readouts, readouts_cpu = _now.pop("readouts", (None, None))
            _log.write(json.dumps({
                "readouts_ms": None if readouts is None else round(1e3 * (readouts - start), 2),
                "readouts_cpu_ms": None if readouts is None else
                round(1e3 * (readouts_cpu - start_cpu), 2),
                "handler_ms": round(1e3 * (end - start), 2)}) + "\n")
    return handle


_readouts.ReadoutPanel.send = _timed_send
_kernel = get_ipython().kernel  # noqa: F821 (IPython runs this file in its namespace)
_kernel.shell_handlers["comm_msg"] = _timed(_kernel.shell_handlers["comm_msg"])

"""The port a Jupyter server started with ``--port=0`` listens on.

A port chosen beforehand (bind to 0, close, pass it on) stays free only until
someone else takes it: in a full run, other workers' kernels bind random ports
all the time, and once one of them answered our status probe in ZeroMQ's
greeting. With ``--port=0`` the server binds the port itself and writes it to
``jpserver-<pid>.json`` in its runtime folder (jupyter_server's
``ServerApp.write_server_info_file``), which this module reads.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path


def served_port(runtime_dir: Path, proc: subprocess.Popen, seconds: float) -> int | None:
    """The port from the server's info file, once written; None if the
    server exits or ``seconds`` pass first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        for info in Path(runtime_dir).glob("jpserver-*.json"):
            try:
                return int(json.loads(info.read_text())["port"])
            except (OSError, ValueError, KeyError):
                pass  # being written
        time.sleep(0.25)
    return None

"""The README's Learn command starts JupyterLab and it serves notebook 01
of the learner's own copy.

Runs ``python -m actmem.learn`` (issue 41) headless (no browser, a port the server picks,
no token; those options go on to ``jupyter lab``) with the copy in a
temporary folder, then asks the server for the notebook through the
contents API and for the JupyterLab page that opens it. The server is
always terminated.
"""

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))
from jupyter_port import served_port  # noqa: E402
NOTEBOOK = "01_variables.ipynb"
JUPYTER = Path(sys.executable).parent / "jupyter"


def get(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read()


def wait_for(url: str, server, seconds: float = 90):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert server.poll() is None, "jupyter lab exited early"
        try:
            return get(url)
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.5)
    pytest.fail(f"jupyter lab did not answer {url} within {seconds} s")


@pytest.fixture
def server(tmp_path):
    command = [sys.executable, "-m", "actmem.learn", "--folder", str(tmp_path / "copy"),
               "--no-browser", "--port=0", "--allow-root",
               "--ServerApp.token=", "--ServerApp.password="]
    env = {"PATH": f"{JUPYTER.parent}:/usr/bin:/bin", "HOME": str(tmp_path),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        port = served_port(tmp_path / "runtime", process, 90)
        assert port is not None, "jupyter lab exited or wrote no server info within 90 s"
        yield f"http://127.0.0.1:{port}", process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_jupyter_lab_serves_notebook_01(server):
    base, process = server
    status, body = wait_for(f"{base}/api/contents/{NOTEBOOK}", process)
    model = json.loads(body)
    assert status == 200 and model["type"] == "notebook" and model["name"] == NOTEBOOK
    assert model["content"]["cells"][0]["source"].startswith("# ")
    sources = "".join(c["source"] for c in model["content"]["cells"])
    assert "Speaker notes" not in sources and "<details>" in sources  # the learner's copy
    status, page = get(f"{base}/lab/tree/{NOTEBOOK}")
    assert status == 200 and b"JupyterLab" in page

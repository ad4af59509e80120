"""The measure extra is optional: actmem itself never imports torch."""

import subprocess
import sys


def test_import_actmem_does_not_import_torch():
    code = ("import actmem, actmem.views.cli, sys; "
            "assert 'torch' not in sys.modules, 'actmem imported torch'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_measure_command_without_torch_is_one_line():
    code = ("import sys; sys.modules['torch'] = None; sys.argv = ['-m']; "
            "import runpy; runpy.run_module('actmem.measure', run_name='__main__')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines() == [
        "python -m actmem.measure: error: needs PyTorch: pip install torch==2.13.0 "
        "--index-url https://download.pytorch.org/whl/cpu (the CPU build is enough)"]

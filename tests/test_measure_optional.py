"""The measure extra is optional: actmem itself never imports torch."""

import subprocess
import sys


def test_import_actmem_does_not_import_torch():
    code = ("import actmem, actmem.views.cli, sys; "
            "assert 'torch' not in sys.modules, 'actmem imported torch'")
    subprocess.run([sys.executable, "-c", code], check=True)

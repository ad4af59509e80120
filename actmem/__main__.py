"""``python -m actmem``: see :mod:`actmem.cli`."""

import sys

from .cli import main

sys.exit(main())

"""``python -m actmem``: see :mod:`actmem.cli`."""

import sys

from .views.cli import main

sys.exit(main())

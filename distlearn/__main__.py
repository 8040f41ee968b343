"""``python -m distlearn`` is the ``distlearn`` command."""

import sys

from .cli import main

sys.exit(main())

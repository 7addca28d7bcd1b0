"""``python -m turnkit``: the command line."""

import sys

from turnkit.cli import main

sys.exit(main())

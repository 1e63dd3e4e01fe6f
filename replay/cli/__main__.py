"""`python -m replay.cli`: the `agentsm` command, as `python -m replay` runs it."""

import sys

from . import main

sys.exit(main())

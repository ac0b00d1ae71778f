"""`python -m sim`: the command line (see sim/cli/, one module per command)."""

import sys

from sim.cli import entry

sys.exit(entry())

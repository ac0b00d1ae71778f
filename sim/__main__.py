"""`python -m sim`: the command line (see sim/cli/, one module per command)."""

import sys

from sim.cli import main

sys.exit(main())

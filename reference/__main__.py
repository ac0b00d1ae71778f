"""`python -m reference chat`: the reference agent for real (see reference/chat.py).

`python -m reference stress ...` is an alias of `python -m sim stress ...`: the stress run's parent checks
the workers with the simulator's invariants, so it lives in `sim/`; the alias imports `sim` only when it is
used, so the reference package itself never depends on the simulator for it.
"""

import importlib
import sys

if sys.argv[1:2] == ["stress"]:
    sys.exit(importlib.import_module("sim.cli").main(sys.argv[1:]))

from reference.chat import main  # noqa: E402 (the alias above must not import the chat's dependencies)

sys.exit(main())

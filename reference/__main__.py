"""`python -m reference chat`: the reference agent for real (see reference/chat.py).

`python -m reference stress ...` is an alias of `python -m sim stress ...`: the stress run's parent checks
the workers with the simulator's invariants, so it lives in `sim/`. The alias hands the command line over to
that command (this process becomes `python -m sim stress ...`), so the reference never imports the simulator.
"""

import os
import sys

if sys.argv[1:2] == ["stress"]:
    os.execv(sys.executable, [sys.executable, "-m", "sim", *sys.argv[1:]])

from reference.chat import main  # noqa: E402 (the alias above must not import the chat's dependencies)

sys.exit(main())

"""`python -m reference chat`: the reference agent for real (see reference/chat.py)."""

import sys

from reference.chat import main

sys.exit(main())

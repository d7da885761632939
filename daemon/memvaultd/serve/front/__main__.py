"""`python -m memvaultd.serve.front`: the front process, as the core starts it."""

import sys

from memvaultd.serve.front.relay import main

sys.exit(main())

"""`python -m worldtrace.sandboxes.android_sim`: serve a simulated device (see `main`)."""

import sys

from . import main

sys.exit(main())

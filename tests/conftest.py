"""Core test configuration: tests never autoload entry points; they build fresh managers."""

import os
import signal

os.environ.setdefault("OMP_NUM_THREADS", "1")

# A suite started in the background by a non-interactive shell (`cmd &`) inherits SIGINT ignored, and so
# would every process it starts; the tests that stop a child with Ctrl-C (SIGINT) need the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

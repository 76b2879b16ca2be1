"""What users run. ``python -m experiments.<command>`` re-executes itself once, first thing, with tcmalloc
preloaded where it is installed (``experiments/common/allocator.py``: it lowers peak memory;
``FRESHRL_MALLOC``), then sets what the libraries read before they initialise and the console's filter, so
that the console shows the run's lines and real warnings and the run's log file everything
(``experiments/common/quiet_logs.py``; ``FRESHRL_VERBOSE=1`` shows everything on the console too)."""

import sys

from experiments.common.allocator import preload_for_entry_point
from experiments.common.quiet_logs import install, set_environment

preload_for_entry_point()
if sys.argv[:1] == ["-m"]:  # a command, not an import from tests or other programs
    set_environment()
    install(None)  # the records of option parsing are held for the run's log file

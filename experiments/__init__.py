"""What users run. ``python -m experiments.<command>`` re-executes itself once, first thing, with tcmalloc
preloaded where it is installed (``experiments/common/allocator.py``: it lowers peak memory;
``FRESHRL_MALLOC``)."""

from experiments.common.allocator import preload_for_entry_point

preload_for_entry_point()

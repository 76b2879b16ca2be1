"""Speed and memory benchmarks against baselines: ``python -m benchmarks.<name>`` (docs/performance.md). They
need the ``bench`` extra (``make bench``) and are not part of the wheel. Like ``python -m
experiments.<command>``, each re-executes itself once with tcmalloc preloaded where it is installed
(``experiments/common/allocator.py``)."""

from experiments.common.allocator import preload_for_entry_point

preload_for_entry_point()

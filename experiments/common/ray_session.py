"""Starting Ray for the entry points, benchmarks and tests: one place for the settings and the retry."""

from __future__ import annotations

from typing import Any


def start_ray(attempts: int = 3, **init_kwargs: Any) -> None:
    """Start Ray on this machine, or join the cluster that ``RAY_ADDRESS`` names (docs/scaling.md), without
    the dashboard (nothing here uses it); nothing to do when Ray is already up. On an overloaded machine the
    raylet can miss Ray's fixed 30 s start-up deadline, so a failed start is tried again ``attempts`` times
    in all. ``init_kwargs`` go to ``ray.init`` (e.g. ``num_cpus``, ``runtime_env``)."""
    import ray

    for attempt in range(attempts):
        if ray.is_initialized():
            return
        try:
            ray.init(include_dashboard=False, **init_kwargs)
            return
        except Exception:
            ray.shutdown()
            if attempt == attempts - 1:
                raise

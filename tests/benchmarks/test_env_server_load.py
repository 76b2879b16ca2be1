"""The server load benchmark, short: every level clean, no episode lost, vanished clients' sessions freed."""

from __future__ import annotations

import json

import pytest

from benchmarks import env_server_load


@pytest.mark.slow
def test_a_short_load_run_loses_nothing_and_frees_every_session(tmp_path):
    out = tmp_path / "load.json"
    env_server_load.main(["--levels", "1", "8", "--seconds", "1", "--disconnects", "4", "--json", str(out)])
    results = json.loads(out.read_text())
    assert [level["sessions"] for level in results["levels"]] == [1, 8] and results["capacity"] == 8
    for level in results["levels"]:
        assert level["errors"] == 0 and level["lost_episodes"] == 0 and level["steps"] > 0, level
        assert level["max_sessions_held"] == level["sessions"]
    assert results["disconnects"]["sessions_left"] == 0 and results["sessions_at_end"] == 0


def test_the_levels_are_bounded():
    for argv in (["--levels", "1000"], ["--seconds", "600"], ["--disconnects", "-1"]):
        with pytest.raises(SystemExit) as stopped:
            env_server_load.main(argv)
        assert stopped.value.code == 2

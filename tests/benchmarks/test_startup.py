"""benchmarks/startup.py's logic around its child processes: their environments, the no-.pyc detection and
the parsing of their results (the timings themselves are not tested)."""

from __future__ import annotations

import importlib
import py_compile
import subprocess
import sys

import pytest

from benchmarks.startup import (
    RESULT_PREFIX,
    bytecode_environment,
    link_stdlib_bytecode,
    openmp_environment,
    parse_child_output,
    venv_has_bytecode,
)


def test_the_result_line_is_found_among_the_libraries_log_lines():
    stdout = f'INFO vllm: starting\n{RESULT_PREFIX}{{"import_s": 1.5}}\nINFO vllm: shutting down\n'
    assert parse_child_output(stdout, "", 0) == {"import_s": 1.5}


@pytest.mark.parametrize(
    ("stdout", "returncode", "problem"),
    [
        (f'{RESULT_PREFIX}{{"step_s": 1.0}}', 1, "exited with status 1"),
        ("INFO only logs", 0, "no result line"),
    ],
)
def test_a_failed_child_is_an_error_with_its_last_output(stdout, returncode, problem):
    with pytest.raises(RuntimeError, match=problem) as failed:
        parse_child_output(stdout, "Traceback ...\nImportError: no vllm", returncode)
    assert "ImportError: no vllm" in str(failed.value)


def test_the_default_wait_policy_side_drops_an_inherited_policy():
    inherited = {"OMP_WAIT_POLICY": "PASSIVE", "PATH": "/bin"}  # as under `make test`
    assert openmp_environment(inherited, None) == {"PATH": "/bin"}
    assert openmp_environment({"PATH": "/bin"}, "PASSIVE") == {"PATH": "/bin", "OMP_WAIT_POLICY": "PASSIVE"}


def test_the_compiled_side_is_the_callers_environment_without_a_pycache_prefix(tmp_path):
    base = {"PATH": "/bin", "PYTHONPYCACHEPREFIX": "/elsewhere"}
    assert bytecode_environment(base, "compiled", None) == {"PATH": "/bin"}
    from_source = bytecode_environment(base, "from_source", tmp_path)
    assert from_source["PYTHONPYCACHEPREFIX"] == str(tmp_path)
    assert from_source["PYTHONDONTWRITEBYTECODE"] == "1"
    with pytest.raises(ValueError, match="unknown bytecode side"):
        bytecode_environment(base, "warm", None)


def test_from_source_the_standard_library_keeps_its_bytecode_and_the_venv_compiles(tmp_path):
    """What a venv without .pyc files does: the interpreter's standard library still loads its .pyc files,
    the venv's packages compile from source, and no .pyc is written."""
    assert link_stdlib_bytecode(tmp_path) > 100
    environment = bytecode_environment({"PATH": "/bin"}, "from_source", tmp_path)
    done = subprocess.run(
        [sys.executable, "-v", "-c", "import json.decoder, typing_extensions"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    decoder = importlib.import_module("json.decoder").__file__
    typing_extensions = importlib.import_module("typing_extensions").__file__
    # python -v: "# <pyc> matches <source>" when the .pyc is used, "# code object from <source>" otherwise.
    lines = done.stderr.splitlines()
    assert any(line.startswith(f"# {tmp_path}") and line.endswith(f"matches {decoder}") for line in lines)
    assert f"# code object from {typing_extensions}" in lines
    assert not list(tmp_path.rglob("typing_extensions*.pyc"))


def test_a_package_without_its_pyc_file_says_the_venv_has_no_bytecode(tmp_path, monkeypatch):
    package = tmp_path / "freshrl_fake_package"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert not venv_has_bytecode("freshrl_fake_package")
    py_compile.compile(str(package / "__init__.py"))  # where this interpreter looks for it
    assert venv_has_bytecode("freshrl_fake_package")
    with pytest.raises(ValueError, match="not installed"):
        venv_has_bytecode("freshrl_not_installed")

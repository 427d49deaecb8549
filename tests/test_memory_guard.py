"""The compile memory guard: a compile that keeps growing is stopped with an error naming
its stage, before it can exhaust the machine; only the command turns the guard on."""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import textwrap
import threading

import pytest

from mlirtune.memory_guard import CEILING_VARIABLE, compiles_guarded, guarded

pytestmark = pytest.mark.subprocess

GUARD_THREAD = "mlirtune-memory-guard"

# Stands in for a runaway compile: resident memory that keeps growing inside a guarded
# stage (16 MiB a step, its pages touched), 3 GiB at most if the guard never trips.
RUNAWAY = textwrap.dedent(
    """
    import time
    import numpy as np
    from mlirtune.memory_guard import compiles_guarded, guarded

    held = []
    with compiles_guarded(), guarded("lower"), guarded("pipeline.yaml:3: stage 2 (step runaway)"):
        for _ in range(192):
            held.append(np.ones(16 << 20, dtype=np.uint8))
            time.sleep(0.01)
    print("never stopped")
    """
)


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))


def _guard_threads() -> int:
    return sum(thread.name == GUARD_THREAD for thread in threading.enumerate())


def test_a_compile_growing_past_the_ceiling_is_stopped_naming_its_stage():
    env = {**os.environ, CEILING_VARIABLE: "128M"}
    done = subprocess.run(
        [sys.executable, "-c", RUNAWAY],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_capped,
    )
    assert done.returncode == 2, done.stderr
    assert "never stopped" not in done.stdout
    (line,) = done.stderr.splitlines()
    assert line.startswith("mlirtune: error: [pipeline.yaml:3: stage 2 (step runaway)]")
    assert f"past its ceiling of 128.0 MiB ({CEILING_VARIABLE}=128M)" in line
    assert "Traceback" not in done.stderr


def test_the_guard_watches_only_once_turned_on_and_stops_with_its_block():
    with guarded("lower"):
        assert _guard_threads() == 0  # a library caller's process: no guard
    with compiles_guarded():
        with guarded("lower"), guarded("stage 1"):
            assert _guard_threads() == 1  # nested guards share one watchdog
        assert _guard_threads() == 0
    with guarded("lower"):
        assert _guard_threads() == 0  # off again once the command's block is left


def _opt(ceiling: str) -> subprocess.CompletedProcess:
    """`mlirtune opt` of a packed 1024^3 matmul, whose lowering grows the process by
    megabytes over 50 ms and more; it allocates no arrays, so only the guard can stop it."""
    command = [sys.executable, "-m", "mlirtune", "opt", "matmul", "M=1024", "N=1024", "K=1024"]
    env = {**os.environ, CEILING_VARIABLE: ceiling}
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=300, preexec_fn=_capped
    )


def test_the_command_stops_its_compile_past_the_ceiling_naming_the_pipeline_stage():
    done = _opt("64K")
    assert done.returncode == 2, done.stderr
    error = done.stderr.splitlines()[-1]
    assert re.match(r"mlirtune: error: \[\S+\.yaml:\d+: stage \d+ \(\w+ [^)]+\)\] ", error), error
    assert f"past its ceiling of 64.0 KiB ({CEILING_VARIABLE}=64K)" in error


def test_a_malformed_ceiling_is_a_usage_error_naming_the_variable():
    done = _opt("lots")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"mlirtune: error: [memory] {CEILING_VARIABLE}='lots' is not a memory budget: give "
        "bytes with an optional K, M, G or T suffix (e.g. 16G) or a fraction of the available "
        "memory (e.g. 0.5)"
    ]

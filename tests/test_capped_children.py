"""A tool run under the compile limits (`contain.child.run_capped`): past its time limit it
is stopped with everything it started, and its output comes back when it finishes."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from mlirtune.contain.child import run_capped
from mlirtune.contain.limits import TIMEOUT_VARIABLE
from mlirtune.interfaces.errors import UsageError

# A tool that starts another and waits on it: the grandchild writes its pid, then sleeps.
WRAPPER = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c",
    "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)",
    sys.argv[1]])
child.wait()
"""


def _running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    status = Path(f"/proc/{pid}/status")
    try:
        state = next(line for line in status.read_text().splitlines() if line.startswith("State"))
    except (FileNotFoundError, ProcessLookupError):
        return False
    return "zombie" not in state


def test_a_tool_past_its_time_limit_is_stopped_with_what_it_started(tmp_path, monkeypatch):
    monkeypatch.setenv(TIMEOUT_VARIABLE, "3")
    pid_file = tmp_path / "grandchild.pid"
    with pytest.raises(UsageError) as raised:
        run_capped([sys.executable, "-c", WRAPPER, str(pid_file)], "the wrapper", "iree")
    assert raised.value.stage == "iree"
    assert f"the wrapper ran past the compile time limit of 3 s ({TIMEOUT_VARIABLE}=3)" in str(
        raised.value
    )
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _running(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(grandchild)


def test_a_finished_tool_gives_its_output_and_status(monkeypatch):
    monkeypatch.delenv(TIMEOUT_VARIABLE, raising=False)
    script = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    done = run_capped([sys.executable, "-c", script], "the tool", "iree").done
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")

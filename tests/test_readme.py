"""The README's examples run as written.

Every ```python block and every ```sh block runs, in README order, in one scratch directory
(later examples use files earlier ones wrote), with the tuning database, the spec-library
configuration and the download cache inside it. The only lines left out are the set-up
commands (`make ...`), which CI runs itself. A block fails the test on a non-zero exit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
RUNNABLE = ("python", "sh")
BLOCK_TIMEOUT_S = 600


@dataclass(frozen=True)
class Block:
    language: str
    code: str
    line: int  # of the opening fence, 1-based


def blocks(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown text, with their info string and line."""
    found, lines = [], text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("```"):
            language, start = line[3:].strip(), index
            end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
            found.append(Block(language, "\n".join(lines[start + 1 : end]) + "\n", start + 1))
            index = end
        index += 1
    return found


EXAMPLES = [b for b in blocks(README.read_text()) if b.language in RUNNABLE]


def test_the_readme_has_examples_of_each_kind():
    assert {b.language for b in EXAMPLES} == set(RUNNABLE)
    assert sum("mlirtune " in b.code for b in EXAMPLES if b.language == "sh") >= 4


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A working directory and an environment that keep every example's files in it."""
    root = tmp_path_factory.mktemp("readme")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLIRTUNE_")}
    env.update(
        MLIRTUNE_DB=str(root / "default-tuning.db"),
        XDG_CONFIG_HOME=str(root / "config"),
        XDG_CACHE_HOME=str(root / "cache"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    return root, env


@pytest.mark.subprocess
@pytest.mark.parametrize("block", EXAMPLES, ids=lambda b: f"README.md:{b.line}-{b.language}")
def test_readme_example_runs(block: Block, scratch):
    cwd, env = scratch
    if block.language == "python":
        command = [sys.executable, "-c", block.code]
    else:
        script = "\n".join(line for line in block.code.splitlines() if not line.startswith("make "))
        command = ["bash", "-euo", "pipefail", "-c", script]
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S
    )
    assert done.returncode == 0, (
        f"README.md:{block.line} exited {done.returncode}\n"
        f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    )
    assert "Traceback" not in done.stderr

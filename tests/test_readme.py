"""The examples of the README and of the user guide (docs/*.md) run as written.

Every ```python block and every ```sh block of a page runs, in page order, in one scratch
directory of that page's own (later examples use files earlier ones on the page wrote; pages
are independent of each other), with the tuning database, the spec-library configuration and
the download cache inside it, and the repository's examples/ linked in, as the commands run
from the repository's root find it. The only lines left out are the set-up commands
(`make ...`), which CI runs itself. A block fails the test on a non-zero exit. Blocks that
are not meant to run are fenced as ```text (or ```console, ```yaml, ...).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = ("python", "sh")
BLOCK_TIMEOUT_S = 600


@dataclass(frozen=True)
class Block:
    language: str
    code: str
    line: int  # of the opening fence, 1-based
    page: str = "README.md"  # relative to the repository root


def blocks(text: str, page: str = "README.md") -> list[Block]:
    """The fenced code blocks of a Markdown text, with their info string and line."""
    found, lines = [], text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("```"):
            language, start = line[3:].strip(), index
            end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
            code = "\n".join(lines[start + 1 : end]) + "\n"
            found.append(Block(language, code, start + 1, page))
            index = end
        index += 1
    return found


EXAMPLES = [
    b
    for page in PAGES
    for b in blocks(page.read_text(), page.relative_to(ROOT).as_posix())
    if b.language in RUNNABLE
]
README_EXAMPLES = [b for b in EXAMPLES if b.page == "README.md"]


def test_the_readme_has_examples_of_each_kind():
    assert {b.language for b in README_EXAMPLES} == set(RUNNABLE)
    assert sum("mlirtune " in b.code for b in README_EXAMPLES if b.language == "sh") >= 4


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """For each page, a working directory and an environment that keep its examples' files."""
    made: dict[str, tuple[Path, dict[str, str]]] = {}

    def for_page(page: str) -> tuple[Path, dict[str, str]]:
        if page not in made:
            root = tmp_path_factory.mktemp(page.replace("/", "-").removesuffix(".md"))
            for folder in ("examples", "benchmarks"):
                (root / folder).symlink_to(ROOT / folder, target_is_directory=True)
            env = {k: v for k, v in os.environ.items() if not k.startswith("MLIRTUNE_")}
            env.update(
                MLIRTUNE_DB=str(root / "default-tuning.db"),
                XDG_CONFIG_HOME=str(root / "config"),
                XDG_CACHE_HOME=str(root / "cache"),
                PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            )
            made[page] = root, env
        return made[page]

    return for_page


@pytest.mark.subprocess
@pytest.mark.parametrize("block", EXAMPLES, ids=lambda b: f"{b.page}:{b.line}-{b.language}")
def test_readme_example_runs(block: Block, scratch):
    cwd, env = scratch(block.page)
    if block.language == "python":
        command = [sys.executable, "-c", block.code]
    else:
        script = "\n".join(line for line in block.code.splitlines() if not line.startswith("make "))
        command = ["bash", "-euo", "pipefail", "-c", script]
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S
    )
    assert done.returncode == 0, (
        f"{block.page}:{block.line} exited {done.returncode}\n"
        f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    )
    assert "Traceback" not in done.stderr

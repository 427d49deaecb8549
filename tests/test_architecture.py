"""The package's layering: no import cycles, interfaces on the bottom floor, small modules.

Imports are read from the source with `ast`, every one of them: at module level, inside
functions (deferred) and under `if TYPE_CHECKING:`. Importing `mlirtune.a.b` also runs
`mlirtune/a/__init__.py`, so that is an edge too, unless the importer lives inside
`mlirtune.a` (a package's own modules do not re-enter it).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mlirtune"
MAX_MODULE_LINES = 400


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported_names(path: Path, name: str, known: set[str]) -> set[str]:
    """Every mlirtune module `path` imports, anywhere in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in known else base)
    return {m for m in found if m == "mlirtune" or m.startswith("mlirtune.")}


def import_graph() -> dict[str, set[str]]:
    """module -> modules it makes Python execute (their packages' __init__ included)."""
    known = set(modules())
    graph: dict[str, set[str]] = {}
    for name, path in modules().items():
        edges: set[str] = set()
        for target in imported_names(path, name, known):
            parts = target.split(".")
            for depth in range(1, len(parts) + 1):
                prefix = ".".join(parts[:depth])
                is_ancestor = name == prefix or name.startswith(prefix + ".")
                if prefix in known and not is_ancestor:
                    edges.add(prefix)
        graph[name] = edges - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles among mlirtune modules:\n" + "\n".join(
        " <-> ".join(component) for component in found
    )


def test_the_checker_sees_deferred_and_type_checking_imports(tmp_path):
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from mlirtune.interfaces.op import OpInfo\n"
        "def later():\n    from mlirtune.ir import roots\n"
    )
    known = set(modules())
    assert imported_names(source, "mlirtune.probe", known) == {
        "mlirtune.interfaces.op",
        "mlirtune.ir.roots",
    }
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_interfaces_are_the_bottom_floor():
    graph = import_graph()
    floor = {name for name in graph if name.startswith("mlirtune.interfaces")}
    assert floor, "no mlirtune.interfaces package"
    above = {name: sorted(graph[name] - floor) for name in floor if graph[name] - floor}
    assert not above, f"interface modules importing other layers: {above}"


# The floors of docs/architecture.md, bottom first: a module imports from its own floor and
# the ones below it, never from one above (deferred and TYPE_CHECKING imports included).
FLOORS = (
    ("interfaces",),
    ("contain", "files", "typed", "toolchain", "memory", "verify", "ir", "bench", "runtime"),
    ("targets", "schedules"),
    ("dispatch", "pipeline", "specs"),
    ("engine", "workloads", "torch"),
    ("api",),
    ("tune", "fleet", "iree", "suite", "peak"),
    ("curation",),
    ("cli", "__main__"),
)


def floor_of(module: str) -> int:
    """The floor of a module (its top-level package's); the package itself is the ground."""
    parts = module.split(".")
    if len(parts) == 1:
        return 0
    return next(i for i, names in enumerate(FLOORS) if parts[1] in names)


def test_no_import_goes_up_the_floors():
    up = sorted(
        f"{module} -> {target}"
        for module, targets in import_graph().items()
        for target in targets
        if floor_of(target) > floor_of(module)
    )
    assert not up, "imports from a floor above:\n" + "\n".join(up)


def test_modules_stay_small():
    long = {
        name: lines
        for name, path in modules().items()
        if (lines := len(path.read_text().splitlines())) >= MAX_MODULE_LINES
    }
    assert not long, f"modules of {MAX_MODULE_LINES} lines or more: {long}"


@pytest.mark.subprocess
def test_compiling_a_kernel_does_not_import_the_tuner():
    probe = (
        "import sys\n"
        "from mlirtune.api import engine_for\n"
        "from mlirtune.targets import HostCPU\n"
        "from mlirtune.workloads import Matmul\n"
        "result = engine_for(HostCPU()).execute(Matmul(M=16, N=16, K=16))\n"
        "assert result.verification.ok\n"
        "print(sorted(m for m in sys.modules if m.startswith('mlirtune.tune')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def scripts_outside_the_package() -> list[Path]:
    root = PACKAGE.parent
    return sorted([*root.glob("benchmarks/*.py"), *root.glob("scripts/*.py")])


def test_scripts_import_what_the_package_has():
    """benchmarks/ and scripts/ run by hand, so a moved module breaks them silently."""
    missing = []
    for path in scripts_outside_the_package():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith(
                "mlirtune"
            ):
                continue
            try:
                module = importlib.import_module(node.module)
            except ImportError:
                missing.append(f"{path.name}:{node.lineno}: {node.module}")
                continue
            missing += [
                f"{path.name}:{node.lineno}: {node.module}.{alias.name}"
                for alias in node.names
                if not hasattr(module, alias.name)
                and importlib.util.find_spec(f"{node.module}.{alias.name}") is None
            ]
    assert not missing, "imports that no longer resolve:\n" + "\n".join(missing)

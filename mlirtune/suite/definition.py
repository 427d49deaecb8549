"""Benchmark suites: YAML files listing workloads to time, checked before anything runs.

    name: smoke
    defaults: {threads: 1, baselines: [numpy], max_time: 0.2}
    entries:
      - name: matmul-256
        workload: matmul
        options: {M: 256, N: 256, K: 256}
        tags: [gemm]
      - name: my-kernel
        payload: kernels/mine.mlir      # relative to the suite file
        entry: payload
        pipeline: x86_64/matmul
        params: {MR: 4}
        specs: [my-specs.mlir]

An entry names a built-in `workload` (with `options`), a `payload` file (with `entry`,
`inputs`, `expect`) or a PyTorch module, `torch: FILE.py[:FACTORY]` (with `batch`, as
`--torch` and `--batch` take them); `pipeline`, `params`, `specs`, `no_specs`, `threads`,
`baselines`, `max_time` and `tags` are optional, and `defaults` gives any of them to every
entry.
Errors name the file, the entry and the field.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from mlirtune.files import load_yaml
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.workload import Workload

BASELINES = ("numpy", "torch")
TAG = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
# Fields an entry (or `defaults`) may hold, with the type each must have.
FIELDS: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "workload": str,
    "options": dict,
    "payload": str,
    "entry": str,
    "inputs": list,
    "expect": list,
    "torch": str,
    "batch": int,
    "pipeline": str,
    "params": dict,
    "specs": list,
    "no_specs": bool,
    "threads": int,
    "baselines": list,
    "max_time": (int, float),
    "tags": list,
    "dispatch_times": bool,
}
PER_ENTRY = ("name", "workload", "options", "payload", "entry", "inputs", "expect", "torch")
SOURCES = ("workload", "payload", "torch")  # an entry names exactly one
SHIPPED = "suites"  # the package folder of the shipped suites


@dataclass(frozen=True)
class SuiteEntry:
    """One workload of a suite and how to time it."""

    name: str
    workload: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    payload: Path | None = None
    entry: str = "payload"
    inputs: tuple[Path, ...] = ()
    expect: tuple[Path, ...] = ()
    torch: str | None = None
    batch: int | None = None
    pipeline: str | None = None
    params: dict[str, int] = field(default_factory=dict)
    specs: tuple[str, ...] = ()
    no_specs: bool = False
    threads: int = 1
    baselines: tuple[str, ...] = ()
    max_time: float = 0.5
    tags: tuple[str, ...] = ()
    # Also time each distinct dispatch of a split payload alone (where the time went).
    dispatch_times: bool = False

    @property
    def source(self) -> str:
        """What the entry runs: its workload's name, or its torch or payload file."""
        return self.workload or self.torch or str(self.payload)

    def build(self) -> Workload:
        """The entry's workload (its options are checked by the workload class)."""
        if self.torch is not None:
            from mlirtune.torch.factory import workload_from_factory

            return workload_from_factory(self.torch, self.batch)
        if self.payload is not None:
            from mlirtune.workloads.from_file import FromFile

            return FromFile(
                str(self.payload),
                entry=self.entry,
                inputs=[str(p) for p in self.inputs],
                expect=[str(p) for p in self.expect],
            )
        from mlirtune.workloads import workload_class

        return workload_class(str(self.workload)).from_strings(self.options)


@dataclass(frozen=True)
class Suite:
    name: str
    path: Path
    entries: tuple[SuiteEntry, ...]
    description: str = ""

    def select(self, tags: list[str], pattern: str | None) -> list[SuiteEntry]:
        """Entries with any of `tags` (all when none) whose name matches `pattern` (a
        regular expression searched in the name)."""
        chosen = [e for e in self.entries if not tags or set(tags) & set(e.tags)]
        if pattern:
            try:
                regex = re.compile(pattern)
            except re.error as error:
                raise UsageError(f"--filter {pattern!r}: {error}") from None
            chosen = [e for e in chosen if regex.search(e.name)]
        return chosen


def suite_path(name: str) -> Path:
    """A suite file, or the shipped suite called `name` (e.g. `smoke`)."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml") or os.sep in name:
        return path
    shipped = resources.files("mlirtune.suite") / SHIPPED / f"{name}.yaml"
    if not shipped.is_file():
        raise UsageError(f"{name}: no such suite file, and no shipped suite ({shipped_names()})")
    return Path(str(shipped))


def shipped_names() -> str:
    return ", ".join(shipped_suites())


def shipped_suites() -> list[str]:
    """Names of the shipped suites, sorted."""
    folder = resources.files("mlirtune.suite") / SHIPPED
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir())


def load_suite(name: str) -> Suite:
    """Read and check a suite (a path, or a shipped suite's name)."""
    path = suite_path(name)
    data = load_yaml(path, "suite")
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise UsageError(f"{path}: a suite is a mapping with an `entries` list", stage="suite")
    unknown = sorted(set(data) - {"name", "description", "defaults", "entries"})
    if unknown:
        raise UsageError(f"{path}: unknown top-level field(s) {', '.join(unknown)}", stage="suite")
    defaults = data.get("defaults") or {}
    _check_fields(path, "defaults", defaults, allowed=set(FIELDS) - set(PER_ENTRY))
    entries = [_entry(path, i, raw, defaults) for i, raw in enumerate(data["entries"])]
    names = [e.name for e in entries]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"{path}: entry names must be unique: {', '.join(twice)}", stage="suite")
    name, description = str(data.get("name") or path.stem), str(data.get("description") or "")
    return Suite(name, path, tuple(entries), description)


def _entry(path: Path, index: int, raw: object, defaults: dict) -> SuiteEntry:
    where = f"entry {index + 1}"
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: {where}: an entry is a mapping of fields", stage="suite")
    if isinstance(raw.get("name"), str):
        where = f"entry {index + 1} ({raw['name']})"
    _check_fields(path, where, raw, allowed=set(FIELDS))
    values = {**defaults, **raw}
    if "name" not in values:
        raise UsageError(f"{path}: {where}: field `name` is missing", stage="suite")
    if sum(source in values for source in SOURCES) != 1:
        raise UsageError(
            f"{path}: {where}: give one of `workload`, `payload` and `torch`", stage="suite"
        )
    if "workload" in values:
        from mlirtune.workloads import workload_class

        try:
            workload_class(values["workload"])
        except UsageError as error:
            raise UsageError(f"{path}: {where}: field `workload`: {error}", stage="suite") from None
    for tag in values.get("tags", []):
        if not isinstance(tag, str) or not TAG.match(tag):
            raise UsageError(
                f"{path}: {where}: field `tags`: bad tag {tag!r} (lower-case letters, digits, "
                "- and _)",
                stage="suite",
            )
    for baseline in values.get("baselines", []):
        if baseline not in BASELINES:
            raise UsageError(
                f"{path}: {where}: field `baselines`: unknown {baseline!r}; known: "
                f"{', '.join(BASELINES)}",
                stage="suite",
            )
    max_time = values.get("max_time", 1)
    if (
        values.get("batch", 1) < 1
        or values.get("threads", 1) < 1
        or not (math.isfinite(max_time) and max_time > 0)
    ):
        raise UsageError(
            f"{path}: {where}: `batch` and `threads` >= 1, and `max_time` a finite number > 0",
            stage="suite",
        )
    here = path.parent
    return SuiteEntry(
        name=values["name"],
        workload=values.get("workload"),
        options={str(k): str(v) for k, v in (values.get("options") or {}).items()},
        payload=here / values["payload"] if "payload" in values else None,
        entry=values.get("entry", "payload"),
        inputs=tuple(here / p for p in values.get("inputs", [])),
        expect=tuple(here / p for p in values.get("expect", [])),
        torch=str(here / values["torch"]) if "torch" in values else None,
        batch=values.get("batch"),
        pipeline=values.get("pipeline"),
        params={str(k): v for k, v in (values.get("params") or {}).items()},
        specs=tuple(s if "://" in s else str(here / s) for s in values.get("specs", [])),
        no_specs=values.get("no_specs", False),
        threads=values.get("threads", 1),
        baselines=tuple(values.get("baselines", [])),
        max_time=float(values.get("max_time", 0.5)),
        tags=tuple(values.get("tags", [])),
        dispatch_times=values.get("dispatch_times", False),
    )


def problems_suite(
    folder: Path, batch: int | None = None, threads: int = 1, dispatch_times: bool = False
) -> Suite:
    """A suite of the problem files in `folder` (KernelBench's convention: `Model`,
    `get_inputs`, `get_init_inputs`), one entry per `*.py` named by its stem, each timed
    against torch eager (and, with `dispatch_times`, dispatch by dispatch)."""
    if not folder.is_dir():
        raise UsageError(f"--problems {folder}: no such folder", stage="suite")
    files = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
    if not files:
        raise UsageError(f"--problems {folder}: no problem files (*.py) in it", stage="suite")
    entries = tuple(
        SuiteEntry(
            name=path.stem,
            torch=str(path),
            batch=batch,
            threads=threads,
            baselines=("torch",),
            tags=("problems",),
            dispatch_times=dispatch_times,
        )
        for path in files
    )
    description = f"the problem files in {folder}"
    return Suite(f"problems:{folder.resolve().name}", folder, entries, description)


def _check_fields(path: Path, where: str, values: dict, allowed: set[str]) -> None:
    if not isinstance(values, dict):
        raise UsageError(f"{path}: {where}: expected a mapping of fields", stage="suite")
    for key, value in values.items():
        if key not in allowed:
            raise UsageError(
                f"{path}: {where}: unknown field {key!r}; known: {', '.join(sorted(allowed))}",
                stage="suite",
            )
        expected = FIELDS[key]
        if (isinstance(value, bool) and expected is not bool) or not isinstance(value, expected):
            kind = expected.__name__ if isinstance(expected, type) else "number"
            raise UsageError(
                f"{path}: {where}: field `{key}` must be a {kind}, not {value!r}", stage="suite"
            )

"""Finding descriptors: user directories first, then the packaged ones, each searched
target/feature -> target -> generic."""

from __future__ import annotations

import os
from pathlib import Path

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.lowering import Descriptor, Stage
from mlirtune.interfaces.target import Target
from mlirtune.pipeline.descriptor import load_descriptor

PACKAGED = Path(__file__).parent / "descriptors"
USER_PATH_VARIABLE = "MLIRTUNE_PIPELINE_PATH"


def descriptor_roots(extra: list[str | Path] | None = None) -> list[Path]:
    """Directories holding descriptor trees: `extra`, then $MLIRTUNE_PIPELINE_PATH, then ours."""
    user = [p for p in os.environ.get(USER_PATH_VARIABLE, "").split(os.pathsep) if p]
    return [Path(p) for p in (*(extra or []), *user)] + [PACKAGED]


def find_descriptor(
    target: Target, names: list[str], extra: list[str | Path] | None = None
) -> Path:
    """The first `<name>.yaml` along the target's search path, for names in priority order."""
    for subdir in target.descriptor_search_path():
        for root in descriptor_roots(extra):
            for name in names:
                candidate = root / subdir / f"{name}.yaml"
                if candidate.is_file():
                    return candidate
    raise UsageError(
        f"no pipeline descriptor for {', '.join(names)} on {target.name} "
        f"(searched {', '.join(target.descriptor_search_path())})",
        stage="pipeline",
    )


def resolve_descriptor(
    pipeline: str | Path | None,
    target: Target,
    names: list[str],
    extra: list[str | Path] | None = None,
) -> Descriptor:
    """`pipeline` may be a YAML path or a descriptor name; None picks the default for
    `names` (e.g. the workload name, then the root-op kind, then "default")."""
    if pipeline is None:
        return load_descriptor(find_descriptor(target, [*names, "default"], extra))
    path = Path(pipeline)
    if path.suffix in {".yaml", ".yml"}:
        if not path.is_file():
            raise UsageError(f"pipeline file {path} not found", stage="pipeline")
        return load_descriptor(path)
    for root in descriptor_roots(extra):  # a qualified name such as "generic/matmul"
        if (root / f"{pipeline}.yaml").is_file():
            return load_descriptor(root / f"{pipeline}.yaml")
    return load_descriptor(find_descriptor(target, [str(pipeline)], extra))


def list_descriptors(extra: list[str | Path] | None = None) -> list[tuple[str, str, Path]]:
    """(name relative to its root, description, path) for every descriptor found."""
    found = []
    for root in descriptor_roots(extra):
        for path in sorted(root.rglob("*.yaml")):
            description = load_descriptor(path).description
            found.append((str(path.relative_to(root).with_suffix("")), description, path))
    return found


def with_schedule_file(schedule: str | Path, target: Target) -> Descriptor:
    """A pipeline that applies a user's transform file, then the target's CPU lowering."""
    path = Path(schedule).resolve()
    if not path.is_file():
        raise UsageError(f"schedule file {schedule} not found", stage="schedule")
    lowering = load_descriptor(find_descriptor(target, ["lower_cpu"]))
    stage = Stage("schedule", path.name, {}, f"{path}", path.parent)
    return Descriptor(
        path, f"schedule {path.name}", None, dict(lowering.params), [stage, *lowering.stages]
    )

"""Built-in workloads, looked up by name."""

from __future__ import annotations

from mlirtune.errors import UsageError
from mlirtune.workload import Workload
from mlirtune.workloads.matmul import Matmul, Mlp

WORKLOADS: dict[str, type[Workload]] = {cls.name: cls for cls in (Matmul, Mlp)}


def workload_class(name: str) -> type[Workload]:
    """The workload class called `name`, or a UsageError listing the known ones."""
    try:
        return WORKLOADS[name]
    except KeyError:
        raise UsageError(
            f"unknown workload {name!r}; known: {', '.join(sorted(WORKLOADS))}"
        ) from None


__all__ = ["WORKLOADS", "Matmul", "Mlp", "workload_class"]

"""The target of a fleet node: the host CPU it detected, under the class the fleet names."""

from __future__ import annotations

from typing import Any

from mlirtune.targets.host_cpu import CpuFeatures, HostCPU


class FleetCPU(HostCPU):
    """A fleet node's CPU under `class_name`: a Ray node label or custom resource may name
    its class (e.g. to keep two kinds of machine of one CPU model apart); otherwise it is the
    class the node detected. The fingerprint, which tuning records are keyed on, stays the
    CPU's own, so a fleet's records and a local tune's on the same CPU are one set."""

    def __init__(self, features: CpuFeatures, class_name: str, *, threads: int = 1) -> None:
        super().__init__(features, threads=threads)
        self.class_name = class_name

    def __repr__(self) -> str:
        return f"{super().__repr__()} as {self.class_name}"

    def cpu_class(self) -> str:
        return self.class_name

    def describe(self) -> dict[str, Any]:
        """What the tuning database keeps of a class to rebuild this target for `specs export
        --per-class`."""
        features = {**vars(self.features), "flags": sorted(self.features.flags)}
        return {"class": self.class_name, "threads": self.threads, "features": features}

    @classmethod
    def from_description(cls, description: dict[str, Any]) -> FleetCPU:
        fields = dict(description["features"])
        features = CpuFeatures(**{**fields, "flags": frozenset(fields["flags"])})
        return cls(features, description["class"], threads=description["threads"])

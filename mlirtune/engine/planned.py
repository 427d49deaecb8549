"""What engines that lower through pipeline descriptors share: the descriptor for each
workload (read once per engine) and the plan of a compile, before any IR is rewritten."""

from __future__ import annotations

from pathlib import Path

from mlir import ir

from mlirtune.interfaces.engine import Engine
from mlirtune.interfaces.lowering import Descriptor, Lowering
from mlirtune.interfaces.op import OpInfo
from mlirtune.interfaces.runtime import Runtime
from mlirtune.interfaces.target import Target
from mlirtune.interfaces.workload import Workload
from mlirtune.ir.context import new_context
from mlirtune.pipeline import resolve_descriptor
from mlirtune.pipeline.plan import annotated_payload, descriptor_names, plan_lowering
from mlirtune.specs.specset import SpecSet


class DescriptorEngine(Engine):
    """An engine lowering with `target`'s descriptors, or `pipeline` (a descriptor, its name
    or YAML path) for every workload."""

    def __init__(
        self, runtime: Runtime, target: Target, pipeline: str | Path | Descriptor | None
    ) -> None:
        super().__init__(runtime)
        self.target = target
        self.pipeline = pipeline
        self._descriptors: dict[tuple[str, ...], Descriptor] = {}

    @property
    def specs(self) -> SpecSet | None:
        """The spec libraries a plan applies; none unless an engine says otherwise."""
        return None

    def plan(
        self, workload: Workload, schedule_parameters: dict[str, int] | None = None
    ) -> Lowering:
        """The pipeline that would run and its slot values with their sources, without
        lowering anything (e.g. the tuner's baseline: what the selector chooses)."""
        with new_context(), ir.Location.unknown():
            return self.prepare(workload, schedule_parameters)[1]

    def prepare(
        self, workload: Workload, parameters: dict[str, int] | None
    ) -> tuple[ir.Module, Lowering]:
        """The annotated payload and its planned lowering (inside an active context)."""
        module, roots = annotated_payload(workload)
        descriptor = self._descriptor(workload, roots)
        lowering = plan_lowering(module, roots, descriptor, self.target, self.specs, parameters)
        return module, lowering

    def _descriptor(self, workload: Workload, roots: list[OpInfo]) -> Descriptor:
        """The pipeline for `workload`, read once per engine (files are not re-parsed for
        every compile of a tuning run)."""
        if isinstance(self.pipeline, Descriptor):
            return self.pipeline
        names = tuple(descriptor_names(workload, roots))
        if names not in self._descriptors:
            self._descriptors[names] = resolve_descriptor(self.pipeline, self.target, list(names))
        return self._descriptors[names]

"""What engines that lower through pipeline descriptors share: the descriptor for each
workload (read once per engine) and the plan of a compile, before any IR is rewritten."""

from __future__ import annotations

from pathlib import Path

from mlir import ir

from mlirtune.interfaces.engine import Engine
from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.interfaces.lowering import Descriptor, Lowering
from mlirtune.interfaces.runtime import Runtime
from mlirtune.interfaces.target import Target
from mlirtune.interfaces.workload import Workload
from mlirtune.ir.context import new_context
from mlirtune.pipeline import resolve_descriptor
from mlirtune.pipeline.plan import plan_payload
from mlirtune.specs.entry_config import config_violations
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
        self._given: Descriptor | None = None  # `pipeline`, read
        self._descriptors: dict[str, Descriptor] = {}

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
        return plan_payload(
            workload, self.target, self._default, self._pipeline(), self.specs, parameters
        )

    def broken_constraints(self, lowering: Lowering) -> list[str]:
        """The constraints of the schedule family that `lowering`'s config breaks (a config
        from --param may; the selector's and the tuner's keep to them); none for a payload
        split into dispatches."""
        if len(lowering.roots) != 1:
            return []
        return config_violations(dict(lowering.values), lowering.roots[0], lowering, self.target)

    def explained(self, error: MlirtuneError, lowering: Lowering) -> MlirtuneError:
        """`error`, where a schedule failed to apply, naming the constraints of the schedule
        family that the config breaks: such a config (e.g. from --param) is the likely
        cause, and the interpreter's diagnostic does not say so."""
        broken = self.broken_constraints(lowering) if error.stage == "schedule" else []
        if not broken:
            return error
        message = f"{error.args[0]}\nthe config breaks {', '.join(broken)} of this schedule family"
        return type(error)(message, stage=error.stage)

    def _pipeline(self) -> Descriptor | None:
        """The pipeline the engine was given, if any, read once."""
        if self.pipeline is None or isinstance(self.pipeline, Descriptor):
            return self.pipeline
        if self._given is None:
            self._given = resolve_descriptor(self.pipeline, self.target, [])
        return self._given

    def _default(self, names: list[str]) -> Descriptor:
        """The default descriptor for `names`, read once per engine (files are not
        re-parsed for every compile of a tuning run)."""
        key = " ".join(names)
        if key not in self._descriptors:
            self._descriptors[key] = resolve_descriptor(None, self.target, names)
        return self._descriptors[key]

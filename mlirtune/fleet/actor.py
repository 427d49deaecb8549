"""One candidate slot of a fleet node: a Ray actor around an isolated evaluator.

The actor keeps the isolation of local tuning: its candidates compile, run and are timed in
one worker process under the address-space cap and the phase timeouts, so a candidate that
crashes or hangs costs that candidate and the actor lives on. The actors of one node share
its benchmark lock (`EvaluatorSettings.shared_dir`), so no two time at once on a node, and
each moves the others off the benchmark core while it times, as local workers do.
"""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mlirtune.fleet.target import FleetCPU
from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.interfaces.workload import Workload
from mlirtune.toolchain import digest
from mlirtune.tune.evaluator import EvaluatorSettings, IsolatedEvaluator
from mlirtune.tune.outcome import Outcome

Config = dict[str, int]


@dataclass(frozen=True)
class Measured:
    """A candidate's outcome with where it was measured, as every actor reports it."""

    outcome: Outcome
    node_id: str
    cpu_class: str
    target_hash: str  # of the node's fingerprint, checked against the search's key


class CandidateActor:
    """Compiles, verifies and times candidates of one workload on one node (made a Ray
    actor by `FleetEvaluator`, which pins it to its node)."""

    def __init__(
        self,
        workload: Workload,
        target: FleetCPU,
        pipeline: str | None,
        settings: EvaluatorSettings,
        run_id: str,
        isa: str | None = None,
    ) -> None:
        import ray

        from mlirtune.fleet.cluster import node_target

        here = node_target(target.class_name, isa, target.threads)
        if digest(here.fingerprint()) != digest(target.fingerprint()):
            raise MlirtuneError(
                f"this node's CPU ({here!r}) is not the class's ({target!r})", stage="fleet"
            )
        shared = Path(tempfile.gettempdir()) / f"mlirtune-fleet-{run_id}"
        settings = dataclasses.replace(settings, workers=1, shared_dir=str(shared))
        self.evaluator = IsolatedEvaluator(workload, target, pipeline, settings)
        self.evaluator.start_workers()
        self.node_id = ray.get_runtime_context().get_node_id()
        self.cpu_class = target.class_name
        self.target_hash = digest(target.fingerprint())

    def ready(self) -> str:
        return self.node_id

    def evaluate(self, slot_values: Config, cutoff_s: float | None) -> Measured:
        """The outcome of one candidate (see `IsolatedEvaluator.evaluate`)."""
        pending, outcomes = [slot_values], []
        self.evaluator.evaluate(
            lambda: pending.pop() if pending else None,
            lambda _config, outcome: outcomes.append(outcome),
            lambda _config: cutoff_s,
        )
        return Measured(outcomes[0], self.node_id, self.cpu_class, self.target_hash)

    def race(
        self, configs: list[Config], rounds: int, until_settled: bool
    ) -> list[list[list[float]]] | Outcome:
        """`IsolatedEvaluator.race` in this actor's worker."""
        return self.evaluator.races(configs, rounds, [0], until_settled=until_settled)[0]

    def close(self) -> None:
        self.evaluator.close()

"""The fleet's side of the tuner's evaluator: candidates streamed to Ray actors on the nodes
of one CPU class.

`FleetEvaluator` is a `tune.tuner.CandidateEvaluator`, as `IsolatedEvaluator` is, so the
search, the database and the race are the local ones; only where a candidate runs changes.
The driver alone writes the database: actors send outcomes back. An actor that dies (its
node lost, or killed) costs its candidate one retry on another actor of the class; a second
loss records the candidate as a crash.
"""

from __future__ import annotations

import contextlib
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType

from mlirtune.fleet.actor import CandidateActor, Measured
from mlirtune.fleet.cluster import FleetNode, connected, first_line, fleet_nodes
from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.interfaces.workload import Workload
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.toolchain import digest
from mlirtune.tune.evaluator import EvaluatorSettings
from mlirtune.tune.outcome import Outcome
from mlirtune.tune.problem import TuningProblem

Config = dict[str, int]
OnFlight = Callable[[dict[str, int]], None]  # candidates in flight per node


@dataclass
class _Job:
    config: Config
    cutoff_s: float | None
    tries: int = 0


@dataclass
class _Actor:
    handle: object  # a Ray actor handle of CandidateActor
    node: FleetNode
    job: _Job | None = None
    future: object = None  # the Ray object ref of its job's result


@dataclass
class FleetEvaluator:
    """Evaluates configs of one workload on `nodes` (all of one CPU class), one actor per
    slot of each node; use as a context manager. `on_flight` is told the candidates in
    flight per node address whenever that changes."""

    ray: ModuleType
    workload: Workload
    nodes: list[FleetNode]
    pipeline: str | None = None
    settings: EvaluatorSettings = field(default_factory=EvaluatorSettings)
    isa: str | None = None
    on_flight: OnFlight | None = None
    # Names the benchmark lock the actors of one machine share. Searches run side by side
    # (tune_per_class) give theirs one: simulated nodes of two classes on one machine then
    # take turns timing too, as the actors of one search do.
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def __post_init__(self) -> None:
        prints = {digest(node.target.fingerprint()) for node in self.nodes}
        if len(prints) != 1:
            raise MlirtuneError("a fleet search runs on nodes of one CPU", stage="fleet")
        self.target = self.nodes[0].target
        self.target_hash = digest(self.target.fingerprint())
        self._remote_actor = self.ray.remote(CandidateActor)
        self._actors = [self._spawn(node) for node in self.nodes for _ in range(node.slots())]

    @property
    def worker_count(self) -> int:
        return len(self._actors)

    def __enter__(self) -> FleetEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start_workers(self) -> None:
        """The actors start as they are made; wait until each has, so that a node that
        cannot run them fails here, with its reason, not candidate by candidate."""
        try:
            self._get([actor.handle.ready.remote() for actor in self._actors])
        except self.ray.exceptions.RayActorError as error:
            raise MlirtuneError(
                f"a Ray actor of CPU class {self.target.class_name} did not start: "
                f"{first_line(error)}",
                stage="fleet",
            ) from None

    def close(self) -> None:
        """Close every actor's evaluator (its worker processes), then end the actors."""
        closing = [actor.handle.close.remote() for actor in self._actors]
        self.ray.wait(closing, num_returns=len(closing), timeout=10)
        for actor in self._actors:
            self.ray.kill(actor.handle)
        self._actors = []

    # --- evaluation ------------------------------------------------------------------------

    def evaluate(
        self,
        next_config: Callable[[], Config | None],
        on_result: Callable[[Config, Outcome], None],
        cutoff: Callable[[Config], float | None] | None = None,
    ) -> None:
        """As `IsolatedEvaluator.evaluate`: configs from `next_config` go to free actors,
        outcomes to `on_result` in completion order, a freed actor refilled first."""
        retries: list[_Job] = []
        exhausted = False

        def refill() -> None:
            nonlocal exhausted
            for actor in self._actors:
                if actor.job is not None:
                    continue
                if retries:
                    job = retries.pop(0)
                elif exhausted or (config := next_config()) is None:
                    exhausted = True
                    continue
                else:
                    job = _Job(config, cutoff(config) if cutoff else None)
                actor.job = job
                actor.future = actor.handle.evaluate.remote(job.config, job.cutoff_s)
            self._report_flight()

        refill()
        while busy := [actor for actor in self._actors if actor.job is not None]:
            ready, _ = self.ray.wait([actor.future for actor in busy], num_returns=1)
            finished = [actor for actor in busy if actor.future in ready]
            results = [(actor.job, self._result(actor, retries)) for actor in finished]
            refill()
            for job, outcome in results:
                if outcome is not None:
                    on_result(job.config, outcome)
            if not self._actors and (retries or not exhausted):
                raise MlirtuneError(
                    f"every Ray actor of CPU class {self.target.class_name} died", stage="fleet"
                )

    def _result(self, actor: _Actor, retries: list[_Job]) -> Outcome | None:
        """The finished actor's outcome; None if the actor died and its job is queued again."""
        job, actor.job = actor.job, None
        try:
            measured: Measured = self._get(actor.future)
        except self.ray.exceptions.RayActorError as error:
            self._replace(actor)
            if job.tries == 0:
                job.tries += 1
                retries.append(job)
                return None
            return Outcome("crash", detail=f"its Ray actor died twice: {first_line(error)}")
        if measured.target_hash != self.target_hash:
            return Outcome("crash", detail=f"measured on another CPU ({measured.cpu_class})")
        return measured.outcome

    def races(
        self,
        configs: list[Config],
        rounds: int,
        worker_indices: list[int],
        *,
        until_settled: bool = False,
    ) -> list[list[list[list[float]]] | Outcome]:
        """`IsolatedEvaluator.races` on one node: the race's processes are that node's actors
        (taking turns in one actor where it has fewer), so every round of the baseline and
        the finalists is measured on the same machine."""
        node = max(self.nodes, key=lambda n: sum(a.node is n for a in self._actors))
        local = [actor for actor in self._actors if actor.node is node]
        if not local:
            raise MlirtuneError("no live Ray actor is left for the race", stage="fleet")
        futures = [
            local[i % len(local)].handle.race.remote(configs, rounds, until_settled)
            for i in range(len(worker_indices))
        ]
        try:
            return self._get(futures)
        except self.ray.exceptions.RayActorError as error:
            detail = f"the race's Ray actor died: {first_line(error)}"
            return [Outcome("crash", detail=detail)] * len(futures)

    # --- actors ----------------------------------------------------------------------------

    def _spawn(self, node: FleetNode) -> _Actor:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        remote = self._remote_actor.options(
            num_cpus=self.target.threads,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
            max_restarts=0,
        )
        handle = remote.remote(
            self.workload, self.target, self.pipeline, self.settings, self.run_id, self.isa
        )
        return _Actor(handle, node)

    def _replace(self, dead: _Actor) -> None:
        """Drop a dead actor; start another on its node if the node still lives."""
        self._actors.remove(dead)
        alive = {n["NodeID"] for n in self.ray.nodes() if n.get("Alive")}
        if dead.node.node_id in alive:
            self._actors.append(self._spawn(dead.node))
        else:
            self.nodes = [n for n in self.nodes if n.node_id in alive] or self.nodes

    def _report_flight(self) -> None:
        if self.on_flight is not None:
            counts = Counter(a.node.label for a in self._actors if a.job is not None)
            self.on_flight(dict(counts))

    def _get(self, futures):
        """ray.get, with an error raised inside an actor re-raised as itself."""
        try:
            return self.ray.get(futures)
        except self.ray.exceptions.RayTaskError as error:
            raise error.as_instanceof_cause() from None


@contextlib.contextmanager
def class_evaluator(
    problem: TuningProblem,
    address: str,
    settings: EvaluatorSettings,
    on_flight: OnFlight | None = None,
) -> Iterator[FleetEvaluator]:
    """The actors of the cluster at `address` on the nodes whose CPU is `problem`'s target
    (`tune` with `TuneOptions.ray`)."""
    target = problem.target
    if not isinstance(target, HostCPU):
        raise UsageError(f"a fleet tunes host CPUs, not {target!r}", stage="fleet")
    isa = target.features.isa
    with connected(address) as ray:
        nodes = fleet_nodes(ray, isa, target.threads)
        wanted = digest(target.fingerprint())
        mine = [n for n in nodes if digest(n.target.fingerprint()) == wanted]
        if not mine:
            raise UsageError(
                f"--ray {address}: no node has this machine's CPU ({target!r}); the cluster's "
                f"classes: {', '.join(sorted(classes_of(nodes)))} (tune them with --per-class)",
                stage="fleet",
            )
        with FleetEvaluator(
            ray, problem.workload, mine, problem.pipeline, settings, isa, on_flight
        ) as ev:
            yield ev


def classes_of(nodes: list[FleetNode]) -> dict[str, list[FleetNode]]:
    """Nodes grouped by CPU class. Nodes of one class must share a fingerprint: a class
    is tuned once and its records are keyed on it."""
    classes: dict[str, list[FleetNode]] = {}
    for node in nodes:
        classes.setdefault(node.cpu_class, []).append(node)
    for name, members in classes.items():
        prints = {digest(n.target.fingerprint()) for n in members}
        if len(prints) > 1:
            raise UsageError(
                f"the nodes of CPU class {name} differ "
                f"({', '.join(repr(n.target) for n in members)}); give each kind of CPU its "
                "own class (node label mlirtune.cpu-class)",
                stage="fleet",
            )
    return classes

"""The Ray cluster a fleet tune runs on: connecting to it (or starting one here), and its
nodes with the CPU class and target each one reports."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType

from mlirtune.fleet.target import FleetCPU
from mlirtune.interfaces.errors import UsageError

# How a node is told its CPU class: a label (`ray start --labels mlirtune.cpu-class=NAME`)
# or a custom resource (`ray start --resources '{"mlirtune-class:NAME": 1}'`). A node with
# neither is of the class its CPU detects (HostCPU.cpu_class).
CLASS_LABEL = "mlirtune.cpu-class"
CLASS_RESOURCE_PREFIX = "mlirtune-class:"
LOCAL = "local"  # --ray without an address: start a one-node cluster on this machine
CONNECT_TIMEOUT_S = 5.0


def import_ray() -> ModuleType:
    """Ray, or a usage error naming the extra that installs it."""
    try:
        import ray
    except ImportError:
        raise UsageError(
            "tuning on a Ray cluster needs Ray: pip install 'mlirtune[ray]'", stage="fleet"
        ) from None
    return ray


@contextlib.contextmanager
def connected(address: str) -> Iterator[ModuleType]:
    """Ray, connected to the cluster at `address` (LOCAL: a new one on this machine, shut
    down on leaving). A session already connected (ray.init called by the caller) is used
    as it is. An unreachable address is a one-line usage error, not Ray's minutes of
    retries."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    if address != LOCAL:
        _check_reachable(address)
    try:
        ray.init(
            address=None if address == LOCAL else address,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.ERROR,
            # Local workers import what this process imports (a problem file's module).
            runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}}
            if address == LOCAL
            else None,
        )
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise UsageError(
            f"--ray {address}: cannot join the cluster: {first_line(error)}", stage="fleet"
        ) from None
    try:
        yield ray
    finally:
        ray.shutdown()


def first_line(error: BaseException) -> str:
    """The first line of Ray's message (they run long), else the error's type."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _check_reachable(address: str) -> None:
    """A HOST:PORT address must accept a connection within CONNECT_TIMEOUT_S."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(
            f"--ray {address}: give the head node as HOST:PORT (e.g. 10.0.0.1:6379), or no "
            "address to start a cluster on this machine",
            stage="fleet",
        )
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as error:
        reason = error.strerror or str(error) or type(error).__name__
        raise UsageError(
            f"--ray {address}: no Ray cluster answers there ({reason})", stage="fleet"
        ) from None


@dataclass(frozen=True)
class FleetNode:
    """A live node: its Ray id and address, the CPUs Ray gives it, and its target."""

    node_id: str
    address: str
    cpus: int
    target: FleetCPU

    @property
    def cpu_class(self) -> str:
        return self.target.class_name

    @property
    def label(self) -> str:
        """How progress names it: its address and the start of its id (simulated nodes
        share an address)."""
        return f"{self.address}/{self.node_id[:6]}"

    def slots(self) -> int:
        """Candidate actors it holds: one per `threads` of its CPUs, at least one."""
        return max(1, self.cpus // self.target.threads)


def fleet_nodes(ray: ModuleType, isa: str | None = None, threads: int = 1) -> list[FleetNode]:
    """Every live node with CPUs, each asked (by a task pinned to it) for its target, with
    kernels restricted to `isa` where given, on `threads` cores."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(num_cpus=0)(node_target)
    nodes = [n for n in ray.nodes() if n.get("Alive") and n["Resources"].get("CPU", 0) >= 1]
    pending = [
        probe.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
        ).remote(named_class(n), isa, threads)
        for n in nodes
    ]
    try:
        targets = ray.get(pending)
    except ray.exceptions.RayTaskError as error:
        raise error.as_instanceof_cause() from None
    return [
        FleetNode(n["NodeID"], n["NodeManagerAddress"], int(n["Resources"]["CPU"]), target)
        for n, target in zip(nodes, targets, strict=True)
    ]


def named_class(node: dict) -> str | None:
    """The class a node's label or custom resource names, if any."""
    label = (node.get("Labels") or {}).get(CLASS_LABEL)
    resources = [r for r in node["Resources"] if r.startswith(CLASS_RESOURCE_PREFIX)]
    return label or (resources[0].removeprefix(CLASS_RESOURCE_PREFIX) if resources else None)


def node_target(class_name: str | None, isa: str | None, threads: int) -> FleetCPU:
    """Run on a node: its CPU as a fleet target (see `fleet_nodes`)."""
    from mlirtune.targets.host_cpu import HostCPU, detect_features, restrict_isa, with_fma_in_flight
    from mlirtune.targets.isa import ISA_LEVELS

    features = detect_features()
    if isa and ISA_LEVELS.index(isa) < ISA_LEVELS.index(features.isa):  # a cap, not a floor
        features = with_fma_in_flight(restrict_isa(features, isa))
    return FleetCPU(features, class_name or HostCPU(features).cpu_class(), threads=threads)

"""Hand-made spec libraries for the CPU-class tests: entries tuned on a chosen class."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mlir import ir

from mlirtune.curation.export import entry_metadata, entry_name, signature_for
from mlirtune.ir.context import new_context
from mlirtune.specs.library import SpecLibrary
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.db import Verdict
from mlirtune.tune.problem import TuningProblem

# cpuinfo identities of CPU classes (HostCPU overrides); the ISA stays this host's.
ZEN4 = {"vendor": "AuthenticAMD", "family": 0x19, "model_number": 0x11}
ZEN3 = {"vendor": "AuthenticAMD", "family": 0x19, "model_number": 0x01}
SAPPHIRE_RAPIDS = {"vendor": "GenuineIntel", "family": 6, "model_number": 0x8F}


def other_class(target: HostCPU) -> str:
    """A CPU class that is not `target`'s."""
    return "intel-sapphire-rapids" if target.cpu_class() != "intel-sapphire-rapids" else "amd-zen3"


def valid_configs(problem: TuningProblem, count: int) -> list[dict[str, int]]:
    """`count` distinct configs (slot values) valid in the space that are not the selector's."""
    configs = [c for c in problem.space.enumerate() if c != problem.baseline]
    step = max(1, len(configs) // count)
    return [problem.slot_values(c) for c in configs[::step][:count]]


def write_library(
    path: Path,
    tuned_on: str,
    entries: list[tuple[TuningProblem, dict[str, int]]],
    **target: Any,
) -> str:
    """A library at `path` whose entries (problem, slot values) were tuned on CPU class
    `tuned_on` (None: no class recorded); `target` overrides the entries' target metadata
    (e.g. hash=...)."""
    with new_context(), ir.Location.unknown():
        metadata = {"target_class": tuned_on} if tuned_on else {}
        library = SpecLibrary.create(path.stem, metadata)
        for problem, config in entries:
            key = problem.key
            verdict = Verdict(config, problem.slot_values(problem.baseline), True, 1.25, 1e-3)
            meta = entry_metadata(key, verdict, tuned_on or "")
            meta["target"].update(target)
            if not tuned_on:
                del meta["target"]["class"]
            name = entry_name(key.workload, key.pipeline)
            library.add(name, signature_for(key.workload), config, meta)
        return str(library.save(path))

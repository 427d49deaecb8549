"""A batch of tuning candidates as plain data: the cut between compiling and timing them.

A machine with MLIR compiles the candidates of a tuning run into GPU programs and writes
them into one folder, with the inputs and expected outputs they are verified on and a
manifest (`batch.json`). A machine with the GPU (and no MLIR) times them there, appending
one line per candidate to `results.jsonl` as each ends, then races the finalists against
the baseline and writes `race.json`. The tuner reads both back. Nothing here imports MLIR.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mlirtune.interfaces.errors import UsageError

FORMAT = "mlirtune-device-batch/1"
MANIFEST = "batch.json"
RESULTS = "results.jsonl"
RACE = "race.json"
DATA = "data.npz"


@dataclass(frozen=True)
class BatchCandidate:
    """One program of the batch: its descriptor slot values and its file in the folder.
    Index 0 is the baseline (the target's own choice)."""

    index: int
    parameters: dict[str, int]
    program: str


@dataclass(frozen=True)
class DeviceBatch:
    """What the GPU side needs: the programs, how many finalists race the baseline and in
    how many interleaved rounds, and the seconds one candidate may take before it counts
    as hung."""

    workload: dict[str, Any]
    flops: float
    candidates: tuple[BatchCandidate, ...]
    finalists: int
    race_rounds: int
    candidate_timeout_s: float

    def save(self, directory: Path) -> None:
        (directory / MANIFEST).write_text(json.dumps({"format": FORMAT, **asdict(self)}, indent=1))

    @classmethod
    def load(cls, directory: Path) -> DeviceBatch:
        """The batch in `directory`; a missing or malformed manifest is a UsageError naming
        the file."""
        path = directory / MANIFEST
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise UsageError(f"{path}: cannot read a device batch: {error}", stage="load") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise UsageError(f"{path}: not a {FORMAT} file", stage="load")
        try:
            return cls(
                workload=dict(data["workload"]),
                flops=float(data["flops"]),
                candidates=tuple(BatchCandidate(**c) for c in data["candidates"]),
                finalists=int(data["finalists"]),
                race_rounds=int(data["race_rounds"]),
                candidate_timeout_s=float(data["candidate_timeout_s"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise UsageError(f"{path}: malformed device batch: {error!r}", stage="load") from None


def read_results(directory: Path) -> tuple[dict[str, Any] | None, dict[int, dict[str, Any]]]:
    """The device that measured the batch (None before any result) and each finished
    candidate's result by index: {"status", "detail", "samples"}. A line cut short by a
    killed run is ignored, so that candidate runs again."""
    device, results = None, {}
    path = directory / RESULTS
    if not path.exists():
        return None, {}
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "device" in entry:
            device = entry["device"]
        elif "index" in entry:
            results[int(entry["index"])] = entry
    return device, results


def append_result(directory: Path, entry: dict[str, Any]) -> None:
    """One line of results.jsonl, flushed before the next candidate starts."""
    with open(directory / RESULTS, "a") as stream:
        stream.write(json.dumps(entry) + "\n")

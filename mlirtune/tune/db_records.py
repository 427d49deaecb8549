"""What the tuning database returns: stored evaluations, verdicts and workload summaries, and
their conversion from and to the rows and JSON columns of its tables."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from mlirtune.tune.key import TuningKey
from mlirtune.tune.outcome import Outcome


def now() -> str:
    """The current UTC time as stored in `created_at` columns."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def dumps(value: Any) -> str:
    """The JSON text stored for a column value (keys sorted, so equal values store equally)."""
    return json.dumps(value, sort_keys=True, default=str)


@dataclass(frozen=True)
class Record:
    """One stored evaluation. `statistics` (Statistics as a dict) and `gflops` are set only
    for ok records; `samples` are seconds per call."""

    id: int
    created_at: str
    workload: dict[str, Any]
    workload_hash: str
    target: dict[str, Any]
    target_hash: str
    toolchain: dict[str, str]
    toolchain_hash: str
    pipeline: str
    pipeline_hash: str
    params: dict[str, int]
    role: str
    status: str
    detail: str
    samples: list[float]
    statistics: dict[str, float] | None
    median_s: float | None
    gflops: float | None
    flops: float
    extra: dict[str, Any] = field(default_factory=dict)

    def is_current(self, target_hash: str, toolchain_hashes: tuple[str, ...]) -> bool:
        """Whether this record was measured on `target_hash` with one of `toolchain_hashes`."""
        return self.target_hash == target_hash and self.toolchain_hash in toolchain_hashes

    def outcome(self) -> Outcome:
        return Outcome(
            status=self.status,
            detail=self.detail,
            samples=tuple(self.samples),
            flops=self.flops,
            extra=dict(self.extra),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Verdict:
    """What a tuning run chose: `params` (slot values) won the final race against the
    `baseline` in every round (`won`), or is the baseline itself. `speedup` is the baseline's
    race median over the chosen config's; `median_s` is the chosen config's."""

    params: dict[str, int]
    baseline: dict[str, int]
    won: bool
    speedup: float
    median_s: float
    gflops: float | None = None
    created_at: str = field(default_factory=now)


@dataclass(frozen=True)
class WorkloadSummary:
    """What the database holds for one workload. `current` counts the records matching the
    target/toolchain asked for; `best_gflops` is the fastest ok candidate among them."""

    hash: str
    workload: dict[str, Any]
    records: int
    ok: int
    current: int
    best_gflops: float | None


# The columns `record_of` reads, in order; callers append WHERE and ORDER BY.
SELECT_RECORDS = """
    SELECT r.id, r.created_at, w.body, r.workload_hash, t.body, r.target_hash, c.body,
           r.toolchain_hash, r.pipeline, r.pipeline_hash, r.params, r.role, r.status, r.detail,
           r.samples, r.statistics, r.median_s, r.gflops, r.flops, r.extra
    FROM records r
    JOIN workloads w ON w.hash = r.workload_hash
    JOIN targets t ON t.hash = r.target_hash
    JOIN toolchains c ON c.hash = r.toolchain_hash
"""

# The columns `verdict_of` reads, in order; callers append WHERE and ORDER BY.
SELECT_VERDICTS = """
    SELECT w.body, t.body, c.body, v.pipeline, v.pipeline_hash, v.params,
           v.baseline, v.won, v.speedup, v.median_s, v.gflops, v.created_at
    FROM verdicts v
    JOIN workloads w ON w.hash = v.workload_hash
    JOIN targets t ON t.hash = v.target_hash
    JOIN toolchains c ON c.hash = v.toolchain_hash
"""


def record_of(row: tuple[Any, ...]) -> Record:
    """The Record of one `SELECT_RECORDS` row."""
    (id_, created_at, workload, workload_hash, target, target_hash, toolchain) = row[:7]
    (toolchain_hash, pipeline, pipeline_hash, params, role, status, detail) = row[7:14]
    (samples, statistics, median_s, gflops, flops, extra) = row[14:]
    return Record(
        id=id_,
        created_at=created_at,
        workload=json.loads(workload),
        workload_hash=workload_hash,
        target=json.loads(target),
        target_hash=target_hash,
        toolchain=json.loads(toolchain),
        toolchain_hash=toolchain_hash,
        pipeline=pipeline,
        pipeline_hash=pipeline_hash,
        params=json.loads(params),
        role=role,
        status=status,
        detail=detail,
        samples=json.loads(samples),
        statistics=json.loads(statistics) if statistics else None,
        median_s=median_s,
        gflops=gflops,
        flops=flops,
        extra=json.loads(extra),
    )


def verdict_of(row: tuple[Any, ...]) -> tuple[TuningKey, Verdict]:
    """The key and Verdict of one `SELECT_VERDICTS` row."""
    workload, target, toolchain, pipeline, pipeline_hash, params, baseline = row[:7]
    won, speedup, median_s, gflops, created_at = row[7:]
    key = TuningKey(
        json.loads(workload), json.loads(target), json.loads(toolchain), pipeline, pipeline_hash
    )
    verdict = Verdict(
        json.loads(params), json.loads(baseline), bool(won), speedup, median_s, gflops, created_at
    )
    return key, verdict

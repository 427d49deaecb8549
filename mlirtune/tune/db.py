"""The tuning database: every evaluated candidate, keyed by workload, target and toolchain.

One SQLite file (WAL mode, so readers never block the tuner writing) holds a row per
evaluation with its raw samples. Each `record` commits at once, so a killed tuning run loses
nothing and a resumed one skips what is stored (`lookup`). Records measured on another CPU or
with another toolchain are kept for history but never returned as current.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from mlirtune.bench.result import Statistics
from mlirtune.errors import MlirtuneError, UsageError
from mlirtune.tune.db_schema import migrate
from mlirtune.tune.key import TuningKey, digest
from mlirtune.tune.outcome import Outcome

ROLES = ("candidate", "baseline", "race")
# Seconds a writer waits for another writer's lock before giving up.
BUSY_TIMEOUT_MS = 30_000


def default_db_path() -> Path:
    """$MLIRTUNE_DB, else $XDG_CACHE_HOME/mlirtune/tuning.db, else ~/.cache/mlirtune/tuning.db."""
    if os.environ.get("MLIRTUNE_DB"):
        return Path(os.environ["MLIRTUNE_DB"]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "mlirtune" / "tuning.db"


def current_hashes() -> tuple[str, str]:
    """(target_hash, toolchain_hash) of this machine's CPU and the installed toolchain."""
    from mlirtune.targets.host_cpu import HostCPU
    from mlirtune.tune.key import current_toolchain

    return digest(HostCPU().fingerprint()), digest(current_toolchain())


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

    def is_current(self, target_hash: str, toolchain_hash: str) -> bool:
        """Whether this record was measured on `target_hash` with `toolchain_hash`."""
        return self.target_hash == target_hash and self.toolchain_hash == toolchain_hash

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
    created_at: str = field(default_factory=lambda: _now())


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


_SELECT = """
    SELECT r.id, r.created_at, w.body, r.workload_hash, t.body, r.target_hash, c.body,
           r.toolchain_hash, r.pipeline, r.pipeline_hash, r.params, r.role, r.status, r.detail,
           r.samples, r.statistics, r.median_s, r.gflops, r.flops, r.extra
    FROM records r
    JOIN workloads w ON w.hash = r.workload_hash
    JOIN targets t ON t.hash = r.target_hash
    JOIN toolchains c ON c.hash = r.toolchain_hash
"""


class TuningDB:
    """A tuning database file, created (with its folder) on first use unless `create` is
    False, in which case a missing file is an error. Use as a context manager or `close()`."""

    def __init__(self, path: str | Path | None = None, *, create: bool = True) -> None:
        self.path = Path(path).expanduser() if path is not None else default_db_path()
        if not create and not self.path.is_file():
            raise UsageError(f"no tuning database at {self.path}", stage="db")
        self._conn: sqlite3.Connection | None = None
        try:
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, isolation_level=None)
            self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._conn.execute("PRAGMA journal_mode = WAL")
            migrate(self._conn, self.path)
        except (sqlite3.Error, OSError) as error:
            self.close()
            raise UsageError(
                f"cannot use tuning database {self.path}: {error}", stage="db"
            ) from None
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> TuningDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise MlirtuneError(f"tuning database {self.path} is closed", stage="db")
        return self._conn

    # --- writing ---------------------------------------------------------------------------

    def record(
        self,
        key: TuningKey,
        params: dict[str, int],
        outcome: Outcome,
        *,
        role: str = "candidate",
    ) -> int:
        """Store one evaluation and commit it; returns the new record's id."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; expected one of {ROLES}")
        stats = Statistics.of(np.asarray(outcome.samples, dtype=np.float64)) if outcome.ok else None
        with self._transaction() as conn:
            _store_key(conn, key)
            cursor = conn.execute(
                """INSERT INTO records (created_at, workload_hash, target_hash, toolchain_hash,
                       pipeline, pipeline_hash, params, params_hash, role, status, detail,
                       samples, statistics, median_s, gflops, flops, extra)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    _now(),
                    *_key_values(key)[:3],
                    key.pipeline,
                    key.pipeline_hash,
                    _dumps(params),
                    digest(params),
                    role,
                    outcome.status,
                    outcome.detail,
                    json.dumps([float(s) for s in outcome.samples]),
                    _dumps(asdict(stats)) if stats else None,
                    stats.median if stats else None,
                    outcome.gflops,
                    float(outcome.flops),
                    _dumps(outcome.extra),
                ),
            )
        return int(cursor.lastrowid)

    def record_verdict(self, key: TuningKey, verdict: Verdict) -> None:
        """Store a tuning run's final choice (see `Verdict`) and commit it."""
        with self._transaction() as conn:
            _store_key(conn, key)
            conn.execute(
                """INSERT INTO verdicts (created_at, workload_hash, target_hash, toolchain_hash,
                       pipeline, pipeline_hash, params, baseline, won, speedup, median_s, gflops)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    _now(),
                    *_key_values(key)[:3],
                    key.pipeline,
                    key.pipeline_hash,
                    _dumps(verdict.params),
                    _dumps(verdict.baseline),
                    int(verdict.won),
                    verdict.speedup,
                    verdict.median_s,
                    verdict.gflops,
                ),
            )

    def verdicts(self, *, target_hash: str | None = None) -> list[tuple[TuningKey, Verdict]]:
        """The latest verdict per workload, pipeline and toolchain (on `target_hash` when
        given), oldest first."""
        rows = self.conn.execute(
            """SELECT w.body, t.body, c.body, v.pipeline, v.pipeline_hash, v.params,
                      v.baseline, v.won, v.speedup, v.median_s, v.gflops, v.created_at
               FROM verdicts v
               JOIN workloads w ON w.hash = v.workload_hash
               JOIN targets t ON t.hash = v.target_hash
               JOIN toolchains c ON c.hash = v.toolchain_hash
               WHERE v.id IN (SELECT MAX(id) FROM verdicts WHERE ? IS NULL OR target_hash = ?
                              GROUP BY workload_hash, target_hash, toolchain_hash,
                                       pipeline_hash)
               ORDER BY v.id""",
            (target_hash, target_hash),
        ).fetchall()
        return [_verdict(row) for row in rows]

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, committed on leaving; SQLite failures (a full disk, a
        lock held past the busy timeout) become one-line errors naming the file."""
        conn = self.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as error:
            raise MlirtuneError(
                f"cannot write to tuning database {self.path}: {error}", stage="db"
            ) from None

    # --- reading ---------------------------------------------------------------------------

    def lookup(self, key: TuningKey, params: dict[str, int]) -> Outcome | None:
        """The latest candidate outcome stored for exactly this key and params, if any."""
        rows = self._select(
            _KEY_CLAUSE + " AND r.params_hash = ? AND r.role = 'candidate'",
            (*_key_values(key), digest(params)),
            order="r.id DESC LIMIT 1",
        )
        return rows[0].outcome() if rows else None

    def best(self, key: TuningKey) -> Record | None:
        """The fastest (lowest median) ok candidate stored for exactly this key."""
        rows = self._select(
            _KEY_CLAUSE + " AND r.role = 'candidate' AND r.status = 'ok'",
            _key_values(key),
            order="r.median_s ASC, r.id ASC LIMIT 1",
        )
        return rows[0] if rows else None

    def records(
        self,
        key: TuningKey | None = None,
        *,
        workload_hash: str | None = None,
        current_only: bool = False,
        target_hash: str | None = None,
        toolchain_hash: str | None = None,
    ) -> list[Record]:
        """Records, oldest first. `key` selects its workload and pipeline on any target;
        the hashes filter when given. `current_only` keeps records of the current target and
        toolchain: the key's when given, else this machine's (`current_hashes`)."""
        if key and workload_hash:
            raise ValueError("give a key or a workload_hash, not both")
        if current_only:
            current = (key.target_hash, key.toolchain_hash) if key else current_hashes()
            target_hash = target_hash or current[0]
            toolchain_hash = toolchain_hash or current[1]
        filters = {
            "r.workload_hash": key.workload_hash if key else workload_hash,
            "r.pipeline_hash": key.pipeline_hash if key else None,
            "r.target_hash": target_hash,
            "r.toolchain_hash": toolchain_hash,
        }
        given = {column: value for column, value in filters.items() if value is not None}
        where = " AND ".join(f"{column} = ?" for column in given) or "1"
        return self._select(where, tuple(given.values()), order="r.id ASC")

    def workloads(
        self, *, target_hash: str | None = None, toolchain_hash: str | None = None
    ) -> list[WorkloadSummary]:
        """One summary per stored workload; "current" means matching the given hashes (a
        hash left out matches any)."""
        current = "(? IS NULL OR r.target_hash = ?) AND (? IS NULL OR r.toolchain_hash = ?)"
        rows = self.conn.execute(
            f"""SELECT w.hash, w.body, COUNT(r.id),
                       SUM(r.status = 'ok'),
                       SUM({current}),
                       MAX(CASE WHEN {current} AND r.status = 'ok' AND r.role = 'candidate'
                           THEN r.gflops END)
                FROM workloads w JOIN records r ON r.workload_hash = w.hash
                GROUP BY w.hash ORDER BY w.hash""",
            (target_hash, target_hash, toolchain_hash, toolchain_hash) * 2,
        ).fetchall()
        return [
            WorkloadSummary(
                hash=hash_,
                workload=json.loads(body),
                records=count,
                ok=ok,
                current=current_count,
                best_gflops=best,
            )
            for hash_, body, count, ok, current_count, best in rows
        ]

    def _select(self, where: str, values: tuple[Any, ...], *, order: str) -> list[Record]:
        rows = self.conn.execute(f"{_SELECT} WHERE {where} ORDER BY {order}", values)
        return [_record(row) for row in rows.fetchall()]


_KEY_CLAUSE = (
    "r.workload_hash = ? AND r.target_hash = ? AND r.toolchain_hash = ? AND r.pipeline_hash = ?"
)


def _key_values(key: TuningKey) -> tuple[str, str, str, str]:
    return key.workload_hash, key.target_hash, key.toolchain_hash, key.pipeline_hash


def _store_key(conn: sqlite3.Connection, key: TuningKey) -> None:
    for table, body, hash_ in (
        ("workloads", key.workload, key.workload_hash),
        ("targets", key.target, key.target_hash),
        ("toolchains", key.toolchain, key.toolchain_hash),
    ):
        conn.execute(
            f"INSERT OR IGNORE INTO {table} (hash, body) VALUES (?, ?)", (hash_, _dumps(body))
        )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _verdict(row: tuple[Any, ...]) -> tuple[TuningKey, Verdict]:
    workload, target, toolchain, pipeline, pipeline_hash, params, baseline = row[:7]
    won, speedup, median_s, gflops, created_at = row[7:]
    key = TuningKey(
        json.loads(workload), json.loads(target), json.loads(toolchain), pipeline, pipeline_hash
    )
    verdict = Verdict(
        json.loads(params), json.loads(baseline), bool(won), speedup, median_s, gflops, created_at
    )
    return key, verdict


def _record(row: tuple[Any, ...]) -> Record:
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

"""The tuning database: every evaluated candidate, keyed by workload, target and toolchain.

One SQLite file (WAL mode, so readers never block the tuner writing) holds a row per
evaluation with its raw samples. Each `record` commits at once, so a killed tuning run loses
nothing and a resumed one skips what is stored (`lookup`). Records measured on another CPU or
with another toolchain are kept for history but never returned as current. Commands that only
read open it with `readonly=True`, which also works where the file or its folder is read-only.
Rows become `Record`s and `Verdict`s in `db_records`; `db_open` opens the file.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from mlirtune.bench.result import statistics_of
from mlirtune.files import cache_dir
from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.toolchain import current_toolchain_hashes, digest
from mlirtune.tune.db_open import (
    BUSY_TIMEOUT_MS,
    open_readonly,
    open_writable,
    require_file,
    write_error,
)
from mlirtune.tune.db_records import (
    SELECT_RECORDS,
    SELECT_VERDICTS,
    Record,
    Verdict,
    WorkloadSummary,
    dumps,
    now,
    record_of,
    verdict_of,
)
from mlirtune.tune.key import TuningKey
from mlirtune.tune.outcome import Outcome

__all__ = [
    "BUSY_TIMEOUT_MS",
    "ROLES",
    "Record",
    "TuningDB",
    "Verdict",
    "WorkloadSummary",
    "current_hashes",
    "default_db_path",
]

ROLES = ("candidate", "baseline", "race")


def default_db_path() -> Path:
    """$MLIRTUNE_DB, else $XDG_CACHE_HOME/mlirtune/tuning.db, else ~/.cache/mlirtune/tuning.db."""
    if os.environ.get("MLIRTUNE_DB"):
        return Path(os.environ["MLIRTUNE_DB"]).expanduser()
    return cache_dir() / "tuning.db"


def current_hashes() -> tuple[str, tuple[str, str]]:
    """The hash of this machine's CPU, and those of the installed toolchains: this project's
    pipelines' and IREE's (a record of either is current)."""
    return digest(HostCPU().fingerprint()), current_toolchain_hashes()


class TuningDB:
    """A tuning database file, created (with its folder) on first use unless `create` is
    False, in which case a missing file is an error. `readonly` opens an existing file for
    reading only: nothing is created, migrated or written, so it works where the file or its
    folder is read-only (see `db_open`). Use as a context manager or `close()`."""

    def __init__(
        self, path: str | Path | None = None, *, create: bool = True, readonly: bool = False
    ) -> None:
        self.path = Path(path).expanduser() if path is not None else default_db_path()
        self.readonly = readonly
        self._conn: sqlite3.Connection | None = None
        if readonly or not create:
            require_file(self.path)
        if readonly:
            self._conn = open_readonly(self.path)
        else:
            self._conn = open_writable(self.path, create=create)

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
        stats = statistics_of(np.asarray(outcome.samples, dtype=np.float64)) if outcome.ok else None
        with self._transaction() as conn:
            _store_key(conn, key)
            cursor = conn.execute(
                """INSERT INTO records (created_at, workload_hash, target_hash, toolchain_hash,
                       pipeline, pipeline_hash, params, params_hash, role, status, detail,
                       samples, statistics, median_s, gflops, flops, extra)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    now(),
                    *_key_values(key)[:3],
                    key.pipeline,
                    key.pipeline_hash,
                    dumps(params),
                    digest(params),
                    role,
                    outcome.status,
                    outcome.detail,
                    json.dumps([float(s) for s in outcome.samples]),
                    dumps(asdict(stats)) if stats else None,
                    stats.median if stats else None,
                    outcome.gflops,
                    float(outcome.flops),
                    dumps(outcome.extra),
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
                    now(),
                    *_key_values(key)[:3],
                    key.pipeline,
                    key.pipeline_hash,
                    dumps(verdict.params),
                    dumps(verdict.baseline),
                    int(verdict.won),
                    verdict.speedup,
                    verdict.median_s,
                    verdict.gflops,
                ),
            )

    def record_cpu_class(self, name: str, target_hash: str, description: dict[str, Any]) -> None:
        """Remember the target a fleet tuned a CPU class on (see `cpu_classes`)."""
        with self._transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO cpu_classes VALUES (?, ?, ?, ?)",
                (name, target_hash, dumps(description), now()),
            )

    def cpu_classes(self) -> list[tuple[str, dict[str, Any]]]:
        """(name, description) of every CPU class a fleet tuned, by name (none in a database
        opened read-only at an older schema)."""
        try:
            rows = self.conn.execute("SELECT name, description FROM cpu_classes ORDER BY name")
        except sqlite3.OperationalError:
            return []
        return [(name, json.loads(description)) for name, description in rows.fetchall()]

    def verdicts(self, *, target_hash: str | None = None) -> list[tuple[TuningKey, Verdict]]:
        """The latest verdict per workload, pipeline and toolchain (on `target_hash` when
        given), oldest first."""
        rows = self.conn.execute(
            f"""{SELECT_VERDICTS}
               WHERE v.id IN (SELECT MAX(id) FROM verdicts WHERE ? IS NULL OR target_hash = ?
                              GROUP BY workload_hash, target_hash, toolchain_hash,
                                       pipeline_hash)
               ORDER BY v.id""",
            (target_hash, target_hash),
        ).fetchall()
        return [verdict_of(row) for row in rows]

    def verdict(self, key: TuningKey) -> Verdict | None:
        """The latest verdict recorded under exactly `key`, or None."""
        row = self.conn.execute(
            f"""{SELECT_VERDICTS}
               WHERE v.workload_hash = ? AND v.target_hash = ? AND v.toolchain_hash = ?
                     AND v.pipeline_hash = ?
               ORDER BY v.id DESC LIMIT 1""",
            _key_values(key),
        ).fetchone()
        return verdict_of(row)[1] if row else None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, committed on leaving; SQLite failures (a full disk, a
        lock held past the busy timeout) become one-line errors naming the file."""
        if self.readonly:
            raise MlirtuneError(f"tuning database {self.path} is open read-only", stage="db")
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
            raise write_error(self.path, error, doing="write to") from None

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
        the hashes filter when given. `current_only` keeps records of the key's target and
        toolchain."""
        if key and workload_hash:
            raise ValueError("give a key or a workload_hash, not both")
        if current_only:
            if key is None:
                raise ValueError("current_only needs a key")
            target_hash = target_hash or key.target_hash
            toolchain_hash = toolchain_hash or key.toolchain_hash
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
        self, *, target_hash: str | None = None, toolchain_hashes: tuple[str, str] | None = None
    ) -> list[WorkloadSummary]:
        """One summary per stored workload; "current" means measured on `target_hash` with
        one of `toolchain_hashes` (`current_hashes`; a hash left out matches any)."""
        current = "(? IS NULL OR r.target_hash = ?) AND (? IS NULL OR r.toolchain_hash IN (?, ?))"
        ours, iree = toolchain_hashes or (None, None)
        rows = self.conn.execute(
            f"""SELECT w.hash, w.body, COUNT(r.id),
                       SUM(r.status = 'ok'),
                       SUM({current}),
                       MAX(CASE WHEN {current} AND r.status = 'ok' AND r.role = 'candidate'
                           THEN r.gflops END)
                FROM workloads w JOIN records r ON r.workload_hash = w.hash
                GROUP BY w.hash ORDER BY w.hash""",
            (target_hash, target_hash, ours, ours, iree) * 2,
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
        rows = self.conn.execute(f"{SELECT_RECORDS} WHERE {where} ORDER BY {order}", values)
        return [record_of(row) for row in rows.fetchall()]


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
            f"INSERT OR IGNORE INTO {table} (hash, body) VALUES (?, ?)", (hash_, dumps(body))
        )

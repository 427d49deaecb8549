"""The tuning database's schema as ordered migration steps.

The schema version lives in `PRAGMA user_version`; step N brings a database from version N-1
to N. Each step runs in its own transaction together with its version bump, so a crash in the
middle of an upgrade leaves the database at the last complete version.
"""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

from mlirtune.interfaces.errors import UsageError

# Step i (0-based) upgrades from version i to i + 1. Never edit a released step: append one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE workloads (
            hash TEXT PRIMARY KEY,
            body TEXT NOT NULL
        )""",
        """CREATE TABLE targets (
            hash TEXT PRIMARY KEY,
            body TEXT NOT NULL
        )""",
        """CREATE TABLE toolchains (
            hash TEXT PRIMARY KEY,
            body TEXT NOT NULL
        )""",
        """CREATE TABLE records (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            created_at TEXT NOT NULL,
            workload_hash TEXT NOT NULL REFERENCES workloads(hash),
            target_hash TEXT NOT NULL REFERENCES targets(hash),
            toolchain_hash TEXT NOT NULL REFERENCES toolchains(hash),
            pipeline TEXT NOT NULL,
            pipeline_hash TEXT NOT NULL,
            params TEXT NOT NULL,
            params_hash TEXT NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('candidate', 'baseline', 'race')),
            status TEXT NOT NULL,
            detail TEXT NOT NULL,
            samples TEXT NOT NULL,
            statistics TEXT,
            median_s REAL,
            gflops REAL,
            flops REAL NOT NULL,
            extra TEXT NOT NULL
        )""",
        """CREATE INDEX records_by_key ON records (
            workload_hash, target_hash, toolchain_hash, pipeline_hash, params_hash, role
        )""",
    ),
    (
        # The tuner's final word per run: the config it chose (a race winner, or the
        # baseline when none beat it in every round) and its speedup in that race.
        """CREATE TABLE verdicts (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            created_at TEXT NOT NULL,
            workload_hash TEXT NOT NULL REFERENCES workloads(hash),
            target_hash TEXT NOT NULL REFERENCES targets(hash),
            toolchain_hash TEXT NOT NULL REFERENCES toolchains(hash),
            pipeline TEXT NOT NULL,
            pipeline_hash TEXT NOT NULL,
            params TEXT NOT NULL,
            baseline TEXT NOT NULL,
            won INTEGER NOT NULL,
            speedup REAL NOT NULL,
            median_s REAL NOT NULL,
            gflops REAL
        )""",
    ),
    (
        # The CPU classes a fleet tuned (mlirtune.fleet): what `specs export --per-class`
        # rebuilds each class's target from, to write its library.
        """CREATE TABLE cpu_classes (
            name TEXT PRIMARY KEY,
            target_hash TEXT NOT NULL,
            description TEXT NOT NULL,
            created_at TEXT NOT NULL
        )""",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Bring the database at `path` to SCHEMA_VERSION. `conn` must be in autocommit mode
    (isolation_level=None) so that each step's transaction is explicit."""
    check_version(schema_version(conn), path)
    for version in range(schema_version(conn), SCHEMA_VERSION):
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have migrated between our read and taking the write lock.
            if schema_version(conn) != version:
                conn.execute("ROLLBACK")
                continue
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def schema_version(conn: sqlite3.Connection) -> int:
    """The schema version of the database open on `conn` (0: a new, empty file)."""
    return conn.execute("PRAGMA user_version").fetchone()[0]


def check_version(version: int, path: Path) -> None:
    """Refuse a database written by a newer mlirtune: its tables may mean something else."""
    if version > SCHEMA_VERSION:
        raise UsageError(
            f"tuning database {path} has schema version {version}, newer than this mlirtune "
            f"knows ({SCHEMA_VERSION}); upgrade mlirtune or use another --db",
            stage="db",
        )


def check_ours(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a file that is not an intact mlirtune tuning database before anything reads or
    writes it: another program's SQLite file (tables, but not ours: migrating it would add
    ours beside its own), or one whose pages are damaged. Read in one transaction, so that
    a migration another process commits meanwhile is seen whole or not at all."""
    conn.execute("BEGIN")
    try:
        _check_ours(conn, path)
    finally:
        conn.execute("COMMIT")


def _check_ours(conn: sqlite3.Connection, path: Path) -> None:
    damage = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
    if damage != "ok":
        damage = "; ".join(line for line in damage.splitlines() if not line.startswith("***"))
        raise UsageError(
            f"tuning database {path} is damaged (SQLite: {damage}); restore it from a copy, "
            "or pass --db with a new path",
            stage="db",
        )
    version = schema_version(conn)
    check_version(version, path)  # a newer mlirtune's: say so, not that it is foreign
    expected = _tables(version)
    found = {
        name: _columns(conn, name)
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    }
    missing = [name for name, columns in expected.items() if not columns <= found.get(name, set())]
    if missing or (version == 0 and found):
        raise UsageError(
            f"{path} is not an mlirtune tuning database (an SQLite file with tables "
            f"{', '.join(sorted(found)) or 'none'}, schema version {version}); pass --db with "
            "a tuning database or a new path",
            stage="db",
        )


@functools.cache
def _tables(version: int) -> dict[str, set[str]]:
    """Each table of schema `version` and its columns, read off an empty in-memory copy."""
    conn = sqlite3.connect(":memory:")
    for step in MIGRATIONS[:version]:
        for statement in step:
            conn.execute(statement)
    tables = {
        name: _columns(conn, name)
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if not name.startswith("sqlite_")
    }
    conn.close()
    return tables


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute("SELECT * FROM pragma_table_info(?)", (table,))}

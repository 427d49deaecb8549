"""Opening the tuning database file, for writing or read-only.

A writable open creates the file, switches it to WAL mode, migrates it and proves it can
write, so a tuning run learns at once (not after its first evaluation) that its database is
read-only. A read-only open never writes the file and never migrates it, and still reads a
database in a folder it cannot write: SQLite's read-only WAL mode needs a `-shm` index next to
the file, so where that cannot be created it falls back to the file alone (no WAL: no writer
can exist) or to a private copy that replays the WAL. An older schema is read through an
upgraded in-memory copy.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

from mlirtune.interfaces.errors import UsageError
from mlirtune.tune.db_schema import (
    SCHEMA_VERSION,
    check_ours,
    check_version,
    migrate,
    schema_version,
)

# Milliseconds a connection waits for another writer's lock before giving up.
BUSY_TIMEOUT_MS = 30_000
READ_ONLY_COMMANDS = "`mlirtune db list/show/export` and `mlirtune specs export`"


def open_writable(path: Path, *, create: bool) -> sqlite3.Connection:
    """A connection that can write the database at `path` (created with its folder when
    `create`), at the current schema; one clear UsageError when that is impossible.

    Connections racing to set up a new file can get SQLITE_BUSY without SQLite waiting
    (switching the journal to WAL takes an exclusive lock outside the busy handler), so
    opening is retried until the busy timeout has passed."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            return _open_writable(path, create=create)
        except _Busy:
            if time.monotonic() > deadline:
                raise write_error(path, sqlite3.OperationalError("database is locked")) from None
            time.sleep(0.01)


class _Busy(Exception):
    """Another connection held the lock while this one set the database up."""


def _open_writable(path: Path, *, create: bool) -> sqlite3.Connection:
    conn = None
    try:
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
        conn = _connect(path, "rwc" if create else "rw")
        check_ours(conn, path)  # before the first write: another program's file stays as it is
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA journal_mode = WAL")
        # In WAL mode, NORMAL syncs at checkpoints, not at every commit: a killed process
        # still loses no committed record (only an OS crash or power loss can), and the
        # tuner no longer waits for an fsync after every candidate.
        conn.execute("PRAGMA synchronous = NORMAL")
        migrate(conn, path)
        _check_writable(conn)
        return conn
    except BaseException as error:
        if conn is not None:
            conn.close()
        if isinstance(error, sqlite3.Error) and (error.sqlite_errorname or "").startswith(
            "SQLITE_BUSY"
        ):
            raise _Busy() from None
        if isinstance(error, sqlite3.Error | OSError):
            raise write_error(path, error) from None
        raise


def open_readonly(path: Path) -> sqlite3.Connection:
    """A connection that reads the existing database at `path` without creating or changing
    any file where the file or its folder is read-only, refusing writes itself."""
    conn = None
    try:
        conn = _readable(path)
        check_ours(conn, path)
        version = schema_version(conn)
        check_version(version, path)
        if version < SCHEMA_VERSION:  # migrate a copy: the file stays as it is
            upgraded = _in_memory(conn)
            conn.close()
            conn = upgraded
            migrate(conn, path)
        conn.execute("PRAGMA query_only = ON")
        return conn
    except BaseException as error:
        if conn is not None:
            conn.close()
        if isinstance(error, sqlite3.Error | OSError):
            why = "" if os.access(path, os.R_OK) else " (the file is not readable)"
            raise UsageError(
                f"cannot read tuning database {path}: {error}{why}", stage="db"
            ) from None
        raise


def write_error(path: Path, error: sqlite3.Error | OSError, *, doing: str = "use") -> UsageError:
    """The one-line error for a failed open ("use") or write ("write to") of `path`, saying
    why where the file or its folder is read-only."""
    code = getattr(error, "sqlite_errorname", "") or ""
    denied = isinstance(error, PermissionError) or code.startswith(
        ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")
    )
    reason = unwritable_reason(path) if denied else None
    if reason is None and code.startswith("SQLITE_READONLY"):
        reason = f"SQLite can only read it ({error})"
    if reason is None:
        return UsageError(f"cannot {doing} tuning database {path}: {error}", stage="db")
    return UsageError(
        f"cannot write tuning database {path}: {reason}; pass --db with a writable path "
        f"({READ_ONLY_COMMANDS} can still read this one)",
        stage="db",
    )


def require_file(path: Path) -> None:
    """Refuse, in one line, a database path that holds no file (or that cannot be looked at)."""
    try:
        found = path.is_file()
    except OSError as error:
        raise UsageError(
            f"cannot read tuning database {path}: {error.strerror}", stage="db"
        ) from None
    if not found:
        raise UsageError(f"no tuning database at {path}", stage="db")


def unwritable_reason(path: Path) -> str | None:
    """Why this process cannot write the database at `path`, if the file or the folder
    that must hold it (and its -wal and -shm files) is read-only."""
    try:
        return _unwritable_reason(path)
    except OSError:  # a folder on the way cannot be searched: no more precise reason
        return None


def _unwritable_reason(path: Path) -> str | None:
    exists = path.exists()
    folder = path.parent if exists else next(p for p in path.parents if p.exists())
    file_ro = exists and not os.access(path, os.W_OK)
    folder_ro = folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK)
    if not exists:
        return f"the folder {folder} is read-only, so it cannot be created" if folder_ro else None
    if file_ro and folder_ro:
        return f"the file and its folder {folder} are read-only"
    if file_ro:
        return "the file is read-only"
    if folder_ro:
        return (
            f"its folder {folder} is read-only, and SQLite must create {path.name}-wal "
            "and -shm next to the file"
        )
    return None


def _connect(path: Path, mode: str, *, immutable: bool = False) -> sqlite3.Connection:
    """An autocommit connection (each write transaction is explicit) through a URI, so that
    `mode` (ro, rw, rwc) holds whatever characters the path has."""
    uri = f"{Path(os.path.abspath(path)).as_uri()}?mode={mode}"
    uri += "&immutable=1" if immutable else ""
    conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


def _check_writable(conn: sqlite3.Connection) -> None:
    """Raise SQLITE_READONLY now if SQLite silently opened the file read-only (it does when
    the file is not writable); the empty delete is rolled back, so nothing is written."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("DELETE FROM workloads WHERE 0")
    finally:
        conn.execute("ROLLBACK")


def _readable(path: Path) -> sqlite3.Connection:
    """A read-only connection on `path` as it is, WAL content included."""
    conn = _connect(path, "ro")
    try:
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.Error as error:
        conn.close()
        code = error.sqlite_errorname or ""
        if not (code.startswith("SQLITE_READONLY") or code == "SQLITE_CANTOPEN"):
            raise
    # SQLite could not create the -shm index next to the file: the folder is read-only.
    wal = Path(f"{path}-wal")
    if not wal.exists() or wal.stat().st_size == 0:
        # No WAL, and none can be created, so no writer exists: the file is all there is.
        conn = _connect(path, "ro", immutable=True)
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return conn
    return _replayed_copy(path, wal)


def _replayed_copy(path: Path, wal: Path) -> sqlite3.Connection:
    """An in-memory copy of `path` with its un-checkpointed `wal` applied: SQLite replays a
    WAL only where it can write an index for it, so this works on copies in a temp folder."""
    with tempfile.TemporaryDirectory(prefix="mlirtune-db-") as folder:
        copy = Path(folder) / "tuning.db"
        shutil.copyfile(path, copy)
        shutil.copyfile(wal, f"{copy}-wal")
        source = _connect(copy, "rw")
        try:
            return _in_memory(source)
        finally:
            source.close()


def _in_memory(source: sqlite3.Connection) -> sqlite3.Connection:
    """A writable in-memory copy of what `source` reads."""
    copy = sqlite3.connect(":memory:", isolation_level=None)
    source.backup(copy)
    return copy

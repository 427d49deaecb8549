"""Read-only use of the tuning database: inspection works where the file or its folder is
read-only, changes no file, never migrates; a writable open there fails with one clear error.

Root ignores file permissions, so the tests that need a read-only folder to really be
read-only run in a forked child that drops to `nobody` when the tests run as root.
"""

import argparse
import contextlib
import gc
import hashlib
import io
import json
import os
import pickle
import pwd
import select
import shutil
import signal
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mlirtune.cli import main
from mlirtune.cli.db import add_db_parser
from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.tune.db import TuningDB, Verdict, current_hashes
from mlirtune.tune.db_schema import SCHEMA_VERSION
from mlirtune.tune.key import TuningKey
from mlirtune.tune.outcome import Outcome

WORKLOAD = {"name": "matmul", "kind": "matmul", "dtypes": ["f32"], "options": {"M": 64}}
KEY = TuningKey(WORKLOAD, {"model": "cpu A"}, {"mlirtune": "0.1.0"}, "x86_64/matmul", "p1")
RECORDS = 5
# The most an unprivileged child may take: each opens a small database, in well under a second.
CHILD_SECONDS = 60


def fill(db: TuningDB) -> None:
    for mr in range(RECORDS):
        db.record(KEY, {"MR": mr}, Outcome("ok", samples=(1e-6 * (mr + 1),), flops=1e6))


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder that `nobody` can enter (pytest's tmp_path is private to its user)."""
    folder = Path(tempfile.mkdtemp(prefix="mlirtune-test-"))
    folder.chmod(0o755)
    yield folder
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
    shutil.rmtree(folder)


def clean(folder: Path) -> Path:
    """A database whose writer closed cleanly: no -wal or -shm file is left."""
    folder.mkdir(exist_ok=True)
    with TuningDB(folder / "tuning.db") as db:
        fill(db)
    assert sorted(p.name for p in folder.iterdir()) == ["tuning.db"]
    return folder / "tuning.db"


def crashed(scratch: Path, folder: Path, *, shm: bool = True) -> Path:
    """The files of a database whose writer died before checkpointing its WAL (copied while
    the writer holds it open), with or without the -shm index."""
    scratch.mkdir()
    folder.mkdir()
    with TuningDB(scratch / "tuning.db") as writer:
        fill(writer)
        for suffix in ("", "-wal", "-shm") if shm else ("", "-wal"):
            shutil.copyfile(scratch / f"tuning.db{suffix}", folder / f"tuning.db{suffix}")
    path = folder / "tuning.db"
    assert stored_in_file_alone(path) < RECORDS  # so reading them all needs the WAL
    return path


def stored_in_file_alone(path: Path) -> int:
    conn = sqlite3.connect(f"{path.as_uri()}?immutable=1", uri=True)
    try:
        return conn.execute("SELECT COUNT(*) FROM records").fetchone()[0]
    except sqlite3.OperationalError:  # not even the tables are checkpointed
        return 0
    finally:
        conn.close()


def snapshot(folder: Path) -> dict[str, str]:
    """Every file in `folder` with its content's hash."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


def read_all(path: Path) -> int:
    with TuningDB(path, readonly=True) as db:
        return len(db.records())


def unprivileged(action: Callable[[], object]) -> object:
    """`action()` in a forked child that file permissions bind (as `nobody` when we are root);
    its result, or its exception as (type name, message), comes back through a pipe.

    The child must not run the garbage collector: a test run's worker holds unreachable MLIR
    contexts of earlier tests, and destroying one in the child joins an LLVM thread pool whose
    threads were not forked with it, which waits forever (seen once in a full run). The
    parent collects before forking and gives the child CHILD_SECONDS."""
    current_hashes()  # the child cannot import: nobody may read the interpreter's files
    gc.collect()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        gc.disable()
        try:
            os.close(read_end)
            try:
                if os.geteuid() == 0:
                    nobody = pwd.getpwnam("nobody")
                    os.setgroups([])
                    os.setgid(nobody.pw_gid)
                    os.setuid(nobody.pw_uid)
            except (KeyError, OSError) as error:
                result: object = ("cannot drop privileges", str(error))
            else:
                try:
                    result = ("ok", action())
                except BaseException as error:
                    result = (type(error).__name__, str(error))
            with os.fdopen(write_end, "wb") as stream:
                pickle.dump(result, stream)
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as stream:
        if not select.select([stream], [], [], CHILD_SECONDS)[0]:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the unprivileged child gave no result in {CHILD_SECONDS} s")
        data = stream.read()
    os.waitpid(pid, 0)
    assert data, "the child died without a result"
    kind, value = pickle.loads(data)
    if kind == "cannot drop privileges":
        pytest.skip(f"running as root and cannot become nobody: {value}")
    if kind != "ok":
        raise AssertionError(f"{kind}: {value}")
    return value


def failure(action: Callable[[], object]) -> str:
    """The message of the UsageError that `action()` raises in an unprivileged child."""

    def attempt() -> object:
        try:
            action()
        except UsageError as error:
            return str(error)
        raise AssertionError("no UsageError")

    return str(unprivileged(attempt))


def db_cli(*argv: str) -> str:
    parser = argparse.ArgumentParser()
    add_db_parser(parser.add_subparsers())
    args = parser.parse_args(["db", *argv])
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert args.handler(args) == 0
    return out.getvalue()


# --- read-only folders (unprivileged child) -----------------------------------------------


def test_readonly_open_reads_a_clean_database_in_a_read_only_folder(shared):
    path = clean(shared / "ro")
    (shared / "ro").chmod(0o555)
    before = snapshot(shared / "ro")
    assert unprivileged(lambda: read_all(path)) == RECORDS
    assert snapshot(shared / "ro") == before


@pytest.mark.parametrize("shm", [True, False], ids=["wal_and_shm", "wal_only"])
def test_readonly_open_reads_an_uncheckpointed_wal_in_a_read_only_folder(shared, shm):
    path = crashed(shared / "scratch", shared / "ro", shm=shm)
    (shared / "ro").chmod(0o555)
    before = snapshot(shared / "ro")
    assert unprivileged(lambda: read_all(path)) == RECORDS
    assert snapshot(shared / "ro") == before


def test_db_commands_work_in_a_read_only_folder(shared):
    path = clean(shared / "ro")
    (shared / "ro").chmod(0o555)
    before = snapshot(shared / "ro")
    db_cli("list", "--db", str(clean(shared / "warm")))  # so that the child needs no import

    def inspect() -> tuple[str, str, str]:
        listing = db_cli("list", "--all", "--db", str(path))
        history = db_cli("show", "matmul", "--db", str(path))
        return listing, history, db_cli("export", "--db", str(path))

    listing, history, exported = unprivileged(inspect)
    assert "matmul M=64" in listing and KEY.workload_hash[:8] in listing
    assert "MR=4" in history
    assert len(json.loads(exported)) == RECORDS
    assert snapshot(shared / "ro") == before


def test_writable_open_in_a_read_only_folder_says_why(shared):
    path = clean(shared / "ro")
    path.chmod(0o666)  # the file could be written: the folder is what stops SQLite
    (shared / "ro").chmod(0o555)
    message = failure(lambda: TuningDB(path))
    assert (
        f"cannot write tuning database {path}: its folder {shared / 'ro'} is read-only" in message
    )
    assert "pass --db with a writable path" in message
    path.chmod(0o644)
    message = failure(lambda: TuningDB(path))
    assert f"{path}: the file and its folder {shared / 'ro'} are read-only" in message
    for new in (shared / "ro" / "new.db", shared / "ro" / "sub" / "new.db"):
        message = failure(lambda new=new: TuningDB(new))
        assert f"{new}: the folder {shared / 'ro'} is read-only, so it cannot be created" in message
    assert sorted(p.name for p in (shared / "ro").iterdir()) == ["tuning.db"]


def test_writable_open_of_a_read_only_file_says_why(shared):
    path = clean(shared / "rw")
    (shared / "rw").chmod(0o777)
    path.chmod(0o444)
    message = failure(lambda: TuningDB(path))
    assert f"cannot write tuning database {path}: the file is read-only" in message
    assert unprivileged(lambda: read_all(path)) == RECORDS


def test_database_in_a_folder_that_cannot_be_searched_is_one_error(shared):
    path = clean(shared / "private")
    (shared / "private").chmod(0o700)
    message = failure(lambda: TuningDB(path, readonly=True))
    assert message == f"[db] cannot read tuning database {path}: Permission denied"
    message = failure(lambda: TuningDB(path))
    assert message.startswith(f"[db] cannot use tuning database {path}: ")


# --- read-only opens (no permissions needed) ----------------------------------------------


def test_readonly_open_changes_no_file_and_sees_the_wal(tmp_path):
    path = crashed(tmp_path / "scratch", tmp_path / "db")
    before = snapshot(tmp_path / "db")
    with TuningDB(path, readonly=True) as db:
        assert [r.params["MR"] for r in db.records()] == list(range(RECORDS))
        assert len(db.workloads()) == 1
    after = snapshot(tmp_path / "db")
    assert {k: after[k] for k in ("tuning.db", "tuning.db-wal")} == {
        k: before[k] for k in ("tuning.db", "tuning.db-wal")
    }


@pytest.mark.jit
def test_readonly_open_refuses_writes(tmp_path):
    path = clean(tmp_path / "db")
    with TuningDB(path, readonly=True) as db:
        with pytest.raises(MlirtuneError, match="open read-only"):
            fill(db)
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            db.conn.execute("DELETE FROM records")
    assert read_all(path) == RECORDS


@pytest.mark.jit
def test_readonly_open_reads_an_older_schema_without_migrating_it(tmp_path):
    path = clean(tmp_path / "db")
    raw = sqlite3.connect(path)
    raw.execute("DROP TABLE verdicts")  # what version 1 lacked
    raw.execute("DROP TABLE cpu_classes")
    raw.execute("PRAGMA user_version = 1")
    raw.commit()
    raw.close()
    before = snapshot(tmp_path / "db")
    with TuningDB(path, readonly=True) as db:
        assert len(db.records()) == RECORDS
        assert db.verdicts() == [] and db.cpu_classes() == []
    # SQLite may add an empty -wal and a -shm in a writable folder; the file stays as it was
    assert snapshot(tmp_path / "db")["tuning.db"] == before["tuning.db"]
    with TuningDB(path) as db:  # a writable open migrates the file itself
        db.record_verdict(KEY, Verdict({"MR": 4}, {"MR": 1}, True, 1.5, 1e-6))
    with TuningDB(path, readonly=True) as db:
        assert db.conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert len(db.verdicts()) == 1


def test_readonly_open_of_an_empty_file_reads_nothing(tmp_path):
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    with TuningDB(path, readonly=True) as db:
        assert db.records() == [] and db.workloads() == [] and db.verdicts() == []
    assert path.read_bytes() == b"" and sorted(tmp_path.iterdir()) == [path]


@pytest.mark.jit
def test_readonly_open_refuses_newer_missing_and_foreign_files(tmp_path):
    newer = tmp_path / "newer.db"
    raw = sqlite3.connect(newer)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(UsageError, match="newer than this mlirtune knows"):
        TuningDB(newer, readonly=True)
    missing = tmp_path / "missing.db"
    with pytest.raises(UsageError, match=f"no tuning database at {missing}"):
        TuningDB(missing, readonly=True)
    assert not missing.exists()
    notes = tmp_path / "notes.db"
    notes.write_text("not sqlite at all, " * 100)
    with pytest.raises(UsageError, match=f"cannot read tuning database {notes}: .*not a database"):
        TuningDB(notes, readonly=True)


def test_specs_export_reads_without_writing(tmp_path, capsys):
    from mlirtune.targets.host_cpu import HostCPU
    from mlirtune.tune.problem import generate
    from mlirtune.workloads import workload_class

    key = generate(workload_class("matmul")(M=16, N=16, K=16), HostCPU()).key
    (tmp_path / "scratch").mkdir()
    (tmp_path / "db").mkdir()
    with TuningDB(tmp_path / "scratch" / "tuning.db") as writer:
        writer.record_verdict(key, Verdict({"MR": 4}, {"MR": 4}, False, 1.0, 1e-6))
        for suffix in ("", "-wal", "-shm"):
            shutil.copyfile(
                writer.path.with_name(f"tuning.db{suffix}"), tmp_path / "db" / f"tuning.db{suffix}"
            )
    before = snapshot(tmp_path / "db")
    out = tmp_path / "lib.mlir"
    assert (
        main(["specs", "export", "--db", str(tmp_path / "db" / "tuning.db"), "-o", str(out)]) == 0
    )
    assert "wrote 1 entry" in capsys.readouterr().out and out.is_file()
    after = snapshot(tmp_path / "db")
    assert after["tuning.db"] == before["tuning.db"]
    assert after["tuning.db-wal"] == before["tuning.db-wal"]

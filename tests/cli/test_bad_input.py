"""Bad files and values a user may hand the command: each is one error line naming what is
wrong and where, with exit status 2 (a wrong answer: 1), never a traceback or an internal
error, and nothing is lost or written where it should not be."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import numpy as np
import pytest

from mlirtune.cli import main
from mlirtune.suite.results import EntryResult, Manifest, SuiteResults, Timing, save_results
from mlirtune.tune.db_open import open_writable

BINARY = bytes(range(128, 256)) * 8
SHIPPED = Path(__file__).resolve().parents[2] / "mlirtune" / "specs" / "defaults"
DEEP_YAML = "stages: " + "[" * 30000 + "]" * 30000 + "\n"
DEEP_JSON = "[" * 100000 + "]" * 100000


def one_error(capsys, argv: list[str], code: int = 2) -> str:
    """Run the command; return its one stderr line after checking the exit status."""
    assert main(argv) == code
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    return lines[0]


def results_file(folder: Path, **changes: object) -> Path:
    """A valid suite results file, with its JSON fields replaced by `changes` (dotted
    paths: "manifest.peak_gflops")."""
    manifest = Manifest("smoke", "0", None, {}, {}, 100.0, 10.0, 1, [], "2026-01-01")
    timing = Timing([1e-3, 1.1e-3], 1e-3, 0.9e-3, 1.1e-3, 2.0)
    entry = EntryResult("mm", "ok", {"name": "matmul"}, [], 1, ours=timing)
    path = folder / "results.json"
    save_results(SuiteResults(manifest, {"mm": entry}), path)
    data = json.loads(path.read_text())
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node = data
        for part in parents:
            node = node[part]
        node[last] = value
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("kind", ["pipeline", "suite", "compare", "report"])
def test_a_binary_file_is_not_text(capsys, tmp_path, kind):
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(BINARY)
    argv = {
        "pipeline": ["opt", "matmul", "--pipeline", str(binary)],
        "suite": ["suite", "run", str(binary), "-o", str(tmp_path / "out.json")],
        "compare": ["suite", "compare", str(binary), str(binary)],
        "report": ["report", str(binary), "-o", str(tmp_path / "r.html")],
    }[kind]
    assert f"{binary}: not a text file" in one_error(capsys, argv)


@pytest.mark.parametrize("kind", ["pipeline", "suite", "results"])
def test_absurdly_nested_files_are_refused(capsys, tmp_path, kind):
    path = tmp_path / ("deep.json" if kind == "results" else "deep.yaml")
    path.write_text(DEEP_JSON if kind == "results" else DEEP_YAML)
    argv = {
        "pipeline": ["opt", "matmul", "--pipeline", str(path)],
        "suite": ["suite", "run", str(path), "-o", str(tmp_path / "out.json")],
        "results": ["report", str(path), "-o", str(tmp_path / "r.html")],
    }[kind]
    assert "nested too deeply" in one_error(capsys, argv)


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"entries": []}, "entries: expected an object, not []"),
        ({"entries": {"mm": "x"}}, "entries.mm: expected an object (EntryResult), not 'x'"),
        ({"entries.mm.ours.samples": ["1"]}, "entries.mm.ours.samples[0]: expected a finite"),
        ({"manifest.peak_gflops": "fast"}, "manifest.peak_gflops: expected a finite number"),
        ({"entries.mm.flops": 1.5}, "entries.mm.flops: expected an integer, not 1.5"),
    ],
)
def test_a_malformed_results_file_names_the_field(capsys, tmp_path, changes, named):
    path = results_file(tmp_path, **changes)
    report = ["report", str(path), "-o", str(tmp_path / "r.html")]
    for argv in (report, ["suite", "compare", str(path), str(path)]):
        line = one_error(capsys, argv)
        assert f"{path}: {named}" in line, line
    assert not (tmp_path / "r.html").exists()


def test_a_valid_results_file_reads(capsys, tmp_path):
    path = results_file(tmp_path)
    assert main(["suite", "compare", str(path), str(path)]) == 0


def test_a_damaged_database_is_refused(capsys, tmp_path):
    database = tmp_path / "tuning.db"
    connection = open_writable(database, create=True)
    rows = [(f"{i:064}", "x" * 400) for i in range(300)]
    connection.executemany("INSERT INTO workloads VALUES (?, ?)", rows)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    data = bytearray(database.read_bytes())
    for page in range(2, len(data) // 4096):  # every page but the schema's: garbage
        data[page * 4096 : page * 4096 + 16] = b"\xab" * 16
    database.write_bytes(bytes(data))
    assert "is damaged (SQLite: " in one_error(capsys, ["db", "list", "--db", str(database)])


@pytest.mark.parametrize(
    "argv",
    [
        ["db", "list"],
        ["db", "show", "matmul"],
        ["db", "export", "-o", "out.mlir"],
        ["tune", "matmul", "M=16", "N=16", "K=16", "--budget", "1"],
    ],
)
def test_another_programs_sqlite_file_is_refused_and_left_alone(capsys, tmp_path, argv):
    database = tmp_path / "theirs.db"
    connection = sqlite3.connect(database)
    connection.execute("CREATE TABLE accounts (name TEXT)")
    connection.commit()
    connection.close()
    before = database.read_bytes()
    line = one_error(capsys, [*argv, "--db", str(database)])
    assert "is not an mlirtune tuning database" in line
    assert database.read_bytes() == before


@pytest.mark.parametrize("command", ["specs-merge", "suite-run"])
def test_an_output_under_a_file_is_one_line(capsys, tmp_path, command):
    (tmp_path / "file.mlir").write_text("")
    target = str(tmp_path / "file.mlir" / "sub" / "x")
    library = str(next(SHIPPED.glob("*.mlir")))
    argv = {
        "specs-merge": ["specs", "merge", library, "-o", target],
        "suite-run": ["suite", "run", "smoke", "-o", target],
    }[command]
    line = one_error(capsys, argv)
    assert f"cannot write {target}: Not a directory" in line


def test_a_negative_seed_is_refused(capsys):
    assert "seed must be from 0 to" in one_error(capsys, ["run", "softmax", "seed=-1"])


def test_inputs_for_a_built_in_are_refused(capsys, tmp_path):
    np.save(tmp_path / "a.npy", np.ones((4, 4), np.float32))
    line = one_error(capsys, ["run", "matmul", "--inputs", str(tmp_path / "a.npy")])
    assert "--inputs applies to --payload only" in line


def test_an_npz_archive_is_refused(capsys, tmp_path):
    (tmp_path / "f.mlir").write_text(COPY)
    np.savez(tmp_path / "x.npz", a=np.ones(3))
    argv = ["run", "--payload", str(tmp_path / "f.mlir"), "--entry", "f"]
    line = one_error(capsys, [*argv, "--inputs", str(tmp_path / "x.npz")])
    assert "an .npz archive" in line


COPY = """\
func.func @f(%a: memref<3xf64>, %c: memref<3xf64>) {
  memref.copy %a, %c : memref<3xf64> to memref<3xf64>
  return
}
"""


@pytest.mark.jit
def test_a_nan_expectation_is_a_verification_failure(capsys, tmp_path):
    (tmp_path / "f.mlir").write_text(COPY)
    np.save(tmp_path / "a.npy", np.ones(3))
    np.save(tmp_path / "c.npy", np.full(3, np.nan))
    argv = ["run", "--payload", str(tmp_path / "f.mlir"), "--entry", "f"]
    argv += ["--inputs", str(tmp_path / "a.npy"), "--expect", str(tmp_path / "c.npy")]
    assert main(argv) == 1
    assert "its reference holds 3 NaN" in capsys.readouterr().out


def test_a_suite_entry_with_a_nan_time_is_refused(capsys, tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text(
        textwrap.dedent(
            """\
            entries:
              - {name: mm, workload: matmul, max_time: .nan}
            """
        )
    )
    line = one_error(capsys, ["suite", "run", str(suite), "-o", str(tmp_path / "o.json")])
    assert "`max_time` a finite number > 0" in line


@pytest.mark.parametrize("param", ["ORDER=9", "UNIT=7", "PACK=3"])
def test_a_choice_outside_its_alternatives_is_one_error(capsys, param):
    line = one_error(capsys, ["opt", "matmul", "M=64", "N=64", "K=64", "--param", param])
    assert f"--param {param} must be one of" in line


@pytest.mark.subprocess
def test_a_factory_that_exits_is_reported(capsys, tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "m.py").write_text("import sys\n\ndef make():\n    sys.exit(7)\n")
    line = one_error(capsys, ["run", "--torch", f"{tmp_path / 'm.py'}:make"])
    assert "make() called sys.exit(7)" in line

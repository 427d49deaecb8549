"""`mlirtune run/bench --payload`: memref kernels, what the output says, one-line refusals."""

import json

import numpy as np
import pytest

from mlirtune.cli import main
from tests.payloads import ADD_MEMREF_32x64, ROWSUM_MEMREF_64x128, ROWSUM_MEMREF_VIEW_64x128


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.fixture
def rowsum(tmp_path):
    """rowsum.mlir (memrefs) with a.npy, its float64 copy, the expected row sums and an
    off-by-one copy of them."""
    a = np.random.default_rng(8).standard_normal((64, 128)).astype(np.float32)
    (tmp_path / "rowsum.mlir").write_text(ROWSUM_MEMREF_64x128)
    (tmp_path / "view.mlir").write_text(ROWSUM_MEMREF_VIEW_64x128)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "a64.npy", a.astype(np.float64))
    np.save(tmp_path / "sums.npy", a.sum(axis=1))
    np.save(tmp_path / "wrong.npy", a.sum(axis=1) + 1)
    return tmp_path


def run_rowsum(capsys, d, inputs: str = "a.npy", expect: str = "sums.npy"):
    """`mlirtune run` of the rowsum fixture's payload with files from its folder `d`."""
    return run(
        capsys, "run", "--payload", d / "rowsum.mlir", "--entry", "rowsum",
        "--inputs", d / inputs, "--expect", d / expect,
    )  # fmt: skip


def test_run_memref_rowsum_verifies_and_says_it_was_brought_to_tensors(capsys, rowsum):
    d = rowsum
    code, out, _ = run_rowsum(capsys, d)
    assert code == 0
    note, summary = out.splitlines()
    assert note == (
        f"note: linalg.generic (reduction) at {d / 'rowsum.mlir'}:6:3 is written on memrefs: "
        "brought to tensors for the schedule"
    )
    assert summary.startswith("verification passed")


def test_run_memref_rowsum_against_a_wrong_expectation_fails(capsys, rowsum):
    code, out, _ = run_rowsum(capsys, rowsum, expect="wrong.npy")
    assert code == 1
    assert out.splitlines()[-1].startswith("verification FAILED: max abs error 1.000e+00")


@pytest.mark.jit
def test_run_memref_elementwise_with_the_generic_pipeline(capsys, tmp_path):
    rng = np.random.default_rng(9)
    x, y = (rng.standard_normal((32, 64)).astype(np.float32) for _ in range(2))
    (tmp_path / "add.mlir").write_text(ADD_MEMREF_32x64)
    for name, array in {"x": x, "y": y, "xy": x + y}.items():
        np.save(tmp_path / f"{name}.npy", array)
    for pipeline in ([], ["--pipeline", "generic/default"]):
        code, out, _ = run(
            capsys, "run", "--payload", tmp_path / "add.mlir", "--entry", "add", *pipeline,
            "--inputs", f"{tmp_path / 'x.npy'},{tmp_path / 'y.npy'}",
            "--expect", tmp_path / "xy.npy",
        )  # fmt: skip
        assert code == 0, out
        assert out.splitlines()[-1].startswith("verification passed")
        assert ("brought to tensors" in out) == (not pipeline)


@pytest.mark.jit
def test_bench_json_carries_the_generic_path(capsys, rowsum):
    d = rowsum
    code, out, _ = run(
        capsys, "bench", "--json", "--max-time", "0.05", "--payload", d / "view.mlir",
        "--entry", "rowsum", "--inputs", d / "a.npy", "--expect", d / "sums.npy",
    )  # fmt: skip
    assert code == 0
    report = json.loads(out)
    (root,) = report["memref_roots"]
    assert root["op"] == "linalg.generic" and not root["tensorized"]
    assert root["location"] == f"{d / 'view.mlir'}:8:3"
    assert any("lowered with the generic path" in note for note in report["notes"])
    assert report["verified"]


def test_float64_inputs_warn_and_still_verify(capsys, rowsum):
    d = rowsum
    code, out, err = run_rowsum(capsys, d, inputs="a64.npy")
    assert code == 0
    assert err.splitlines() == [
        f"mlirtune: warning: {d / 'a64.npy'} holds float64 values but arg0 of @rowsum is f32: "
        "converted from float64 to f32"
    ]
    assert "verification passed" in out


@pytest.mark.jit
@pytest.mark.parametrize(
    ("extra", "stage", "fragment"),
    [
        (["--inputs", "{d}/a.npy,{d}/a.npy"], "inspect", "but 2 --inputs file(s) were given"),
        (["--inputs", "{d}/bool.npy"], "inputs", "bool arrays are not converted to f32"),
    ],
)
def test_refusals_are_one_error_line(capsys, rowsum, extra, stage, fragment):
    d = rowsum
    np.save(d / "bool.npy", np.ones((64, 128), dtype=bool))
    argv = [a.format(d=d) for a in extra]
    code, out, err = run(capsys, "run", "--payload", d / "rowsum.mlir", "--entry", "rowsum", *argv)
    assert code == 2 and out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"mlirtune: error: [{stage}] ")
    assert fragment in line


@pytest.mark.jit
def test_entry_returning_a_value_is_refused(capsys, tmp_path):
    path = tmp_path / "r.mlir"
    path.write_text("func.func @f(%a: memref<4xf32>) -> f32 {\n  %z = arith.constant 0.0 : f32\n"
                    "  return %z : f32\n}\n")  # fmt: skip
    code, _, err = run(capsys, "run", "--payload", path, "--entry", "f")
    assert code == 2
    assert err.strip() == (
        f"mlirtune: error: [inspect] {path}: @f returns f32; entry functions must return "
        "nothing; outputs are trailing memref arguments"
    )

"""Workloads from .mlir files: inspection, inputs, expected outputs, skipped verification."""

import pytest

from mlirtune.errors import UsageError
from mlirtune.workloads.from_file import FromFile


def test_arguments_are_inspected_from_the_function_type(matmul_files):
    workload = FromFile(matmul_files / "mm.mlir", entry="mm")
    assert [(a.shape, a.dtype.name) for a in workload.arguments()] == [
        ((16, 8), "f32"),
        ((8, 32), "f32"),
        ((16, 32), "f32"),
    ]


def test_given_inputs_and_expected_output_verify(engine, matmul_files):
    d = matmul_files
    workload = FromFile(d / "mm.mlir", "mm", [d / "a.npy", d / "b.npy"], [d / "c.npy"])
    assert [a.is_output for a in workload.arguments()] == [False, False, True]
    verification = engine.execute(workload).verification
    assert verification.ok and not verification.skipped


def test_wrong_expected_output_fails(engine, matmul_files):
    d = matmul_files
    workload = FromFile(d / "mm.mlir", "mm", [d / "a.npy", d / "b.npy"], [d / "wrong.npy"])
    verification = engine.execute(workload).verification
    assert not verification.ok
    assert verification.max_abs_error == pytest.approx(1.0, rel=1e-3)


def test_without_expected_output_verification_is_skipped_plainly(engine, matmul_files):
    verification = engine.execute(FromFile(matmul_files / "mm.mlir", "mm")).verification
    assert verification.skipped
    assert "nothing was checked" in verification.summary()


def test_shape_mismatch_of_an_input_file(matmul_files):
    d = matmul_files
    with pytest.raises(UsageError, match=r"arg0 of @mm has shape \(16, 8\)"):
        FromFile(d / "mm.mlir", "mm", [d / "b.npy", d / "a.npy"], [d / "c.npy"])


def test_tensor_arguments_are_rejected_clearly(tmp_path):
    path = tmp_path / "t.mlir"
    path.write_text(
        "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> { return %a : tensor<4xf32> }"
    )
    with pytest.raises(UsageError, match="must take memrefs"):
        FromFile(path, "f")

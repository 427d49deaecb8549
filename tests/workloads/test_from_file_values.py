"""Payload files in value form (tensors in, outputs returned, as IREE takes them): the
results are the outputs, and the payload runs as the memref form it is rewritten into."""

import numpy as np
import pytest
from mlir import ir

from mlirtune.interfaces.errors import UsageError
from mlirtune.ir.context import new_context
from mlirtune.workloads.from_file import FromFile

MATMUL_VALUES = """
func.func @mm(%a: tensor<16x8xf32>, %b: tensor<8x32xf32>) -> (tensor<16x32xf32>, tensor<16x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<16x32xf32>
  %c = linalg.fill ins(%zero : f32) outs(%empty : tensor<16x32xf32>) -> tensor<16x32xf32>
  %product = linalg.matmul ins(%a, %b : tensor<16x8xf32>, tensor<8x32xf32>)
                           outs(%c : tensor<16x32xf32>) -> tensor<16x32xf32>
  return %product, %a : tensor<16x32xf32>, tensor<16x8xf32>
}
"""


@pytest.fixture
def value_files(matmul_files):
    (matmul_files / "values.mlir").write_text(MATMUL_VALUES)
    np.save(matmul_files / "a_again.npy", np.load(matmul_files / "a.npy"))
    return matmul_files


def test_the_results_are_the_outputs_after_the_arguments(value_files):
    workload = FromFile(value_files / "values.mlir", entry="mm")
    assert [(a.name, a.shape, a.is_output) for a in workload.arguments()] == [
        ("arg0", (16, 8), False),
        ("arg1", (8, 32), False),
        ("result0", (16, 32), True),
        ("result1", (16, 8), True),
    ]
    with new_context(), ir.Location.unknown():
        function = workload.payload_module().body.operations[0]
        assert [str(t) for t in function.type.inputs] == [
            "memref<16x8xf32>",
            "memref<8x32xf32>",
            "memref<16x32xf32>",
            "memref<16x8xf32>",
        ]
        assert not function.type.results


@pytest.mark.jit
def test_a_value_form_payload_runs_and_verifies(engine, value_files):
    d = value_files
    workload = FromFile(
        d / "values.mlir", "mm", [d / "a.npy", d / "b.npy"], [d / "c.npy", d / "a_again.npy"]
    )
    verification = engine.execute(workload).verification
    assert verification.ok and not verification.skipped


def test_an_expected_file_per_result(value_files):
    d = value_files
    with pytest.raises(UsageError, match="returns 2, but 1 --expect file"):
        FromFile(d / "values.mlir", "mm", [d / "a.npy", d / "b.npy"], [d / "c.npy"])

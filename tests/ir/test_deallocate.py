"""The deallocate-buffers step: the deallocation pipeline where a module allocates only."""

from mlir import ir

from mlirtune.engine import MlirJitEngine
from mlirtune.ir.context import new_context
from mlirtune.ir.deallocate import allocates, deallocate_buffers
from mlirtune.ir.inspect import op_counts
from mlirtune.workloads import Matmul, Mlp

ALLOCATING = """
func.func @f(%n: index, %v: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %buffer = memref.alloc(%n) : memref<?xf32>
  memref.store %v, %buffer[%c0] : memref<?xf32>
  %r = memref.load %buffer[%c0] : memref<?xf32>
  return %r : f32
}
"""
PURE = """
func.func @f(%a: memref<4xf32>, %v: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.addf %v, %v : f32
  memref.store %x, %a[%c0] : memref<4xf32>
  return
}
"""


def test_an_allocating_module_gets_its_frees():
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(ALLOCATING)
        assert allocates(module)
        deallocate_buffers(module)
        assert op_counts(module)["memref.dealloc"] == 1


def test_a_module_without_allocations_is_left_as_it_is():
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(PURE)
        before = str(module)
        assert not allocates(module)
        deallocate_buffers(module)
        assert str(module) == before  # the pipeline would have folded the unused constant


def _callees(module: ir.Module) -> list[str]:
    calls = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "llvm.call" and "callee" in op.attributes:
            calls.append(ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return calls


def test_packed_kernels_free_their_panels():
    """The packed nest allocates B's panels: they are freed (calls to free after lowering)."""
    workload = Matmul(M=64, N=128, K=96)
    engine = MlirJitEngine(use_specs=False)
    config = {"MC": 32, "NC": 64, "KC": 32, "MR": 4, "NR": 16, "PACK": 1}
    calls = _callees(engine.lower_payload(workload, config))
    assert calls.count("malloc") > 0 and calls.count("free") == calls.count("malloc")
    assert engine.execute(workload, config).verification.ok


def test_a_kernel_without_allocations_keeps_no_generic_copy():
    """Without the pipeline's canonicalize after cse, a bias epilogue's self-copy (two equal
    subviews until cse) stayed a call to the generic memrefCopy; the lowering canonicalizes
    again after cse."""
    config = {"MC": 128, "NC": 256, "KC": 256, "MR": 4, "NR": 16, "PACK": 0}
    module = MlirJitEngine(use_specs=False).lower_payload(Mlp(M=128, N=256, K=512), config)
    assert "memrefCopy" not in _callees(module)

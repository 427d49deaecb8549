"""The `prefetch-next-panel` step: a marked loop over rows of register tiles prefetches the
next row's broadcast panel, spread over its column tiles; unmarked loops are left alone."""

from __future__ import annotations

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.ir.context import new_context
from mlirtune.ir.inspect import ops_named
from mlirtune.schedules.contraction.steps.prefetch_panel import (
    KEEP_IN_L2,
    PANEL_ATTRIBUTE,
    prefetch_next_panel,
)
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.workloads import Matmul

# Rows of 2 (MR), two column tiles of 16 (NR), a K loop of 64 reading A's 2 x 1 vectors.
NEST = """
func.func @nest(%a: memref<16x64xf32>, %b: memref<64x32xf32>, %c: memref<16x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %f = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<2x16xf32>
  scf.for %i = %c0 to %c16 step %c2 {
    scf.for %j = %c0 to %c32 step %c16 {
      %acc = scf.for %k = %c0 to %c64 step %c1 iter_args(%sum = %zero) -> (vector<2x16xf32>) {
        %row = affine.apply affine_map<()[s0] -> (s0)>()[%i]
        %x = vector.transfer_read %a[%row, %k], %f {in_bounds = [true, true]}
          : memref<16x64xf32>, vector<2x1xf32>
        %y = vector.transfer_read %b[%k, %j], %f {in_bounds = [true, true]}
          : memref<64x32xf32>, vector<1x16xf32>
        %p = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                               affine_map<(m, n, k) -> (k, n)>,
                                               affine_map<(m, n, k) -> (m, n)>],
                              iterator_types = ["parallel", "parallel", "reduction"],
                              kind = #vector.kind<add>} %x, %y, %sum
          : vector<2x1xf32>, vector<1x16xf32> into vector<2x16xf32>
        scf.yield %p : vector<2x16xf32>
      }
      vector.transfer_write %acc, %c[%i, %j] {in_bounds = [true, true]}
        : vector<2x16xf32>, memref<16x32xf32>
    }
  }
  return
}
"""


def _nest(marked: bool) -> tuple[ir.Module, ir.Operation]:
    module = ir.Module.parse(NEST)
    row_loop = next(op for op in ops_named(module.operation, "scf.for"))
    if marked:
        row_loop.attributes[PANEL_ATTRIBUTE] = ir.UnitAttr.get()
    return module, row_loop


def _constant(value: ir.Value) -> int | None:
    owner = value.owner
    if isinstance(owner, ir.OpView) and owner.name == "arith.constant":
        return ir.IntegerAttr(owner.attributes["value"]).value
    return None


def _uses(value: ir.Value, target: ir.Value, constant: int) -> bool:
    """Whether `value` is computed from `target + constant` (an arith.addi in its chain)."""
    owner = value.owner
    if not isinstance(owner, ir.OpView):
        return False
    adds = owner.name == "arith.addi"
    if adds and owner.operands[0] == target and _constant(owner.operands[1]) == constant:
        return True
    return any(_uses(operand, target, constant) for operand in owner.operands)


def test_a_marked_row_loop_prefetches_the_next_rows_panel():
    with new_context(), ir.Location.unknown():
        module, row_loop = _nest(marked=True)
        prefetch_next_panel(module)
        assert module.operation.verify()
        assert PANEL_ATTRIBUTE not in row_loop.attributes
        prefetches = ops_named(module.operation, "memref.prefetch")
        assert len(prefetches) == 2  # one per row of the next tile, in a loop over lines
        a = row_loop.parent.regions[0].blocks[0].arguments[0]
        row = row_loop.regions[0].blocks[0].arguments[0]
        for prefetch in prefetches:
            assert prefetch.operands[0] == a
            assert ir.IntegerAttr(prefetch.attributes["localityHint"]).value == KEEP_IN_L2
            assert _uses(prefetch.operands[1], row, 2)  # the row loop's variable + MR
            line_loop = prefetch.parent
            assert line_loop.name == "scf.for"
            assert line_loop.parent.name == "scf.for"  # the column loop


def test_unmarked_loops_are_left_alone():
    with new_context(), ir.Location.unknown():
        module, _ = _nest(marked=False)
        before = str(module)
        prefetch_next_panel(module)
        assert str(module) == before


@pytest.mark.jit
@pytest.mark.parametrize(
    ("pack", "prefetch", "threads"), [(1, 1, 1), (1, 1, 2), (1, 0, 1), (2, 0, 1)]
)
def test_the_packed_nest_prefetches_where_asked_and_a_is_read_in_place(pack, prefetch, threads):
    """With PREFETCH=1, A read in place (PACK=1) is prefetched a row of register tiles ahead,
    in each of the two K blocks' nests: MR prefetches each. Results verify either way."""
    parameters = {"MC": 64, "NC": 64, "KC": 64, "MR": 4, "NR": 16, "PACK": pack}
    parameters["PREFETCH"] = prefetch
    engine = engine_for(HostCPU(threads=threads), use_specs=False)
    workload = Matmul(M=128, N=128, K=128)
    result = engine.execute(workload, parameters)
    assert result.verification.ok, result.verification.summary()
    stages: dict[str, int] = {}

    def count(stage: str, module: ir.Module) -> None:
        stages[stage] = len(ops_named(module.operation, "llvm.intr.prefetch"))

    engine.lower_payload(workload, parameters, observer=count)
    assert stages["lowering"] == 2 * 4 * prefetch


def test_prefetch_with_a_packed_breaks_a_constraint():
    """PREFETCH=1 with A packed (PACK=2) is outside the space: the nest has no A to
    prefetch, so the config would repeat PREFETCH=0's kernel."""
    engine = engine_for(HostCPU(), use_specs=False)
    parameters = {"MC": 64, "NC": 64, "KC": 64, "MR": 4, "NR": 16, "PACK": 2}
    workload = Matmul(M=128, N=128, K=128)
    prefetching = engine.plan(workload, {**parameters, "PREFETCH": 1})
    assert "prefetch_needs_a_in_place" in engine.broken_constraints(prefetching)
    plain = engine.plan(workload, {**parameters, "PREFETCH": 0})
    assert "prefetch_needs_a_in_place" not in engine.broken_constraints(plain)

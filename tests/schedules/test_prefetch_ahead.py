"""The `prefetch-panel-ahead` step: under a marked loop over rows of register tiles, each K
loop reading rows of a packed panel prefetches the row AHEAD_BYTES further on, into the
next panel past its last row, clamped to the buffer; other loops are left alone."""

from __future__ import annotations

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.ir.context import new_context
from mlirtune.ir.inspect import ops_named
from mlirtune.ir.prefetch import KEEP_IN_ALL_CACHES
from mlirtune.schedules.contraction.steps.prefetch_ahead import (
    AHEAD_ATTRIBUTE,
    AHEAD_BYTES,
    prefetch_panel_ahead,
)
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.workloads import Matmul, Mlp

# Rows of 2 (MR), two column tiles of 16 (NR) over two packed panels [2, KC, 16], a K loop
# of KC steps (all of the panel, or `k_steps` of it) reading one panel row each.
NEST = """
func.func @nest(%a: memref<16x{kc}xf32>, %c: memref<16x32xf32>) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %steps = arith.constant {k_steps} : index
  %f = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<2x16xf32>
  %panels = memref.alloc() {{alignment = 64 : i64}} : memref<2x{kc}x16xf32>
  scf.for %i = %c0 to %c16 step %c2 {{
    scf.for %j = %c0 to %c32 step %c16 {{
      %acc = scf.for %k = %c0 to %steps step %c1 iter_args(%sum = %zero) -> (vector<2x16xf32>) {{
        %panel = affine.apply affine_map<()[s0] -> (s0 floordiv 16)>()[%j]
        %x = vector.transfer_read %a[%i, %k], %f {{in_bounds = [true, true]}}
          : memref<16x{kc}xf32>, vector<2x1xf32>
        %y = vector.transfer_read %panels[%panel, %k, %c0], %f {{in_bounds = [true, true]}}
          : memref<2x{kc}x16xf32>, vector<1x16xf32>
        %p = vector.contract {{indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                               affine_map<(m, n, k) -> (k, n)>,
                                               affine_map<(m, n, k) -> (m, n)>],
                              iterator_types = ["parallel", "parallel", "reduction"],
                              kind = #vector.kind<add>}} %x, %y, %sum
          : vector<2x1xf32>, vector<1x16xf32> into vector<2x16xf32>
        scf.yield %p : vector<2x16xf32>
      }}
      vector.transfer_write %acc, %c[%i, %j] {{in_bounds = [true, true]}}
        : vector<2x16xf32>, memref<16x32xf32>
    }}
  }}
  memref.dealloc %panels : memref<2x{kc}x16xf32>
  return
}}
"""
KC = 64


def _nest(marked: bool, k_steps: int = KC) -> tuple[ir.Module, ir.Operation]:
    module = ir.Module.parse(NEST.format(kc=KC, k_steps=k_steps))
    row_loop = ops_named(module.operation, "scf.for")[0]
    if marked:
        row_loop.attributes[AHEAD_ATTRIBUTE] = ir.UnitAttr.get()
    return module, row_loop


def _constants(value: ir.Value) -> set[int]:
    """The index constants `value` is computed from."""
    owner = value.owner
    if not isinstance(owner, ir.OpView):
        return set()
    if owner.name == "arith.constant":
        return {ir.IntegerAttr(owner.attributes["value"]).value}
    return set().union(*(_constants(operand) for operand in owner.operands))


def test_a_marked_loops_panel_reads_are_prefetched_ahead_within_the_buffer():
    with new_context(), ir.Location.unknown():
        module, row_loop = _nest(marked=True)
        prefetch_panel_ahead(module)
        assert module.operation.verify()
        assert AHEAD_ATTRIBUTE not in row_loop.attributes
        (prefetch,) = ops_named(
            module.operation, "memref.prefetch"
        )  # one 64-byte line per 16-f32 row
        k_loop = prefetch.parent
        assert k_loop.name == "scf.for" and k_loop.parent.parent.name == "scf.for"
        assert ir.IntegerAttr(prefetch.attributes["localityHint"]).value == KEEP_IN_ALL_CACHES
        # Rows of [panels x KC, 16]: panel x KC + ahead, at most the last panel's first row,
        # plus k.
        rows = prefetch.operands[0]
        assert ir.MemRefType(rows.type).shape == [2 * KC, 16]
        row = prefetch.operands[1]
        assert row.owner.name == "arith.addi"
        assert row.owner.operands[1] == k_loop.regions[0].blocks[0].arguments[0]
        first = row.owner.operands[0].owner
        assert first.name == "arith.minui"
        assert _constants(first.operands[1]) == {KC}  # the last panel's first row
        assert {KC, AHEAD_BYTES // 64} <= _constants(first.operands[0])


@pytest.mark.parametrize(("marked", "k_steps"), [(False, KC), (True, KC // 2)])
def test_unmarked_loops_and_loops_over_part_of_a_panel_are_left_alone(marked, k_steps):
    with new_context(), ir.Location.unknown():
        module, _ = _nest(marked=marked, k_steps=k_steps)
        before = str(module)
        prefetch_panel_ahead(module)
        assert str(module).replace(f" {{{AHEAD_ATTRIBUTE}}}", "") == before.replace(
            f" {{{AHEAD_ATTRIBUTE}}}", ""
        )
        assert not ops_named(module.operation, "memref.prefetch")


# f32 4 x 16 tiles, two K blocks (each with its own nest), A read in place; the shapes add
# an N column tail, a K remainder taken by the first block, and an MLP epilogue.
PACKED = {"MC": 64, "NC": 64, "KC": 64, "MR": 4, "NR": 16, "PACK": 1}


@pytest.mark.jit
@pytest.mark.parametrize(
    "workload",
    [Matmul(M=128, N=128, K=128), Matmul(M=128, N=136, K=150), Mlp(M=64, N=128, K=128)],
    ids=["whole", "tails", "mlp"],
)
def test_the_packed_nest_prefetches_b_ahead_with_prefetch_2_and_verifies(workload):
    engine = engine_for(HostCPU(), use_specs=False)
    counts: dict[int, int] = {}
    for level in (1, 2):
        parameters = {**PACKED, "PREFETCH": level}
        result = engine.execute(workload, parameters)
        assert result.verification.ok, result.verification.summary()

        def count(stage: str, module: ir.Module, level: int = level) -> None:
            counts[level] = len(ops_named(module.operation, "llvm.intr.prefetch"))

        engine.lower_payload(workload, parameters, observer=count)
    # Each K block's nest: one line of B's 16-f32 panel row per K step, on top of A's.
    assert counts[2] - counts[1] == 2

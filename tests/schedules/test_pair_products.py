"""The pair-products step: int16 pair contractions become vpmaddwd, others stay."""

from __future__ import annotations

import pytest
from mlir import ir

from mlirtune.ir.context import new_context
from mlirtune.schedules.contraction.steps.pair_products import PMADDWD, pair_products

MAPS = """
#a = affine_map<(n, k, p) -> (k, p)>
#b = affine_map<(n, k, p) -> (k, n, p)>
#c = affine_map<(n, k, p) -> (n)>
#swapped = affine_map<(n, k, p) -> (k, p, n)>
"""
CONTRACT = """
  %r = vector.contract {{indexing_maps = [#a, {b_map}, #c],
      iterator_types = ["parallel", "reduction", "reduction"], kind = #vector.kind<add>}}
      %a, %b, %acc : vector<1x2x{t}>, {b_type} into vector<8x{acc}>
"""


def module_with(element: str = "i16", acc: str = "i32", b_map: str = "#b", b_type: str = "") -> str:
    b_type = b_type or f"vector<1x8x2x{element}>"
    contract = CONTRACT.format(b_map=b_map, t=element, b_type=b_type, acc=acc)
    return f"""{MAPS}
func.func @f(%a: vector<1x2x{element}>, %b: {b_type}, %acc: vector<8x{acc}>) -> vector<8x{acc}> {{
{contract}
  return %r : vector<8x{acc}>
}}"""


def rewritten(text: str) -> list[str]:
    """The op names of @f after the step, and its intrinsics."""
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        pair_products(module)
        assert module.operation.verify()
        names = []

        def collect(op: ir.Operation) -> ir.WalkResult:
            names.append(op.name)
            if op.name == "llvm.call_intrinsic":
                names.append(ir.StringAttr(op.attributes["intrin"]).value)
            return ir.WalkResult.ADVANCE

        module.operation.walk(collect)
        return names


def test_an_int16_pair_contraction_becomes_vpmaddwd_and_an_add():
    names = rewritten(module_with())
    assert "vector.contract" not in names
    assert names.count(PMADDWD) == 1 and "arith.addi" in names
    assert "vector.broadcast" in names  # A's pair, one 32-bit value in every lane


@pytest.mark.parametrize(
    "text",
    [
        module_with(element="f32", acc="f32"),  # not integers
        module_with(element="i8"),  # int8 operands: no vpmaddwd form
        module_with(b_map="#swapped", b_type="vector<1x2x8xi16>"),  # B's pairs not innermost
    ],
    ids=["f32", "i8", "b-transposed"],
)
def test_other_contractions_stay(text):
    names = rewritten(text)
    assert "vector.contract" in names and PMADDWD not in names

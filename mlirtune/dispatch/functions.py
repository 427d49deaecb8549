"""Moving a dispatch function between the split payload and a module of its own.

A dispatch is planned, scheduled and tuned as a standalone payload (`@payload`, public, C
interface), exactly as a built-in workload is; its scheduled body then replaces the private
function in the split payload.
"""

from __future__ import annotations

from mlir import ir

from mlirtune.ir.inspect import find_function
from mlirtune.schedules.roots import annotate_roots

STANDALONE_ENTRY = "payload"


def standalone_module(module: ir.Module, name: str) -> ir.Module:
    """A new module holding a copy of dispatch function `name` as a public `@payload`, its
    root ops annotated (mlirtune.ir.roots)."""
    standalone = ir.Module.create()
    copy = find_function(module, name).operation.clone(ip=ir.InsertionPoint(standalone.body))
    copy.attributes["sym_name"] = ir.StringAttr.get(STANDALONE_ENTRY)
    del copy.attributes["sym_visibility"]
    copy.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
    annotate_roots(standalone)
    return standalone


def replace_function(module: ir.Module, name: str, standalone: ir.Module) -> None:
    """Put `standalone`'s `@payload` (scheduled) in `module` in place of function `name`."""
    old = find_function(module, name).operation
    copy = find_function(standalone, STANDALONE_ENTRY).operation.clone(ip=ir.InsertionPoint(old))
    copy.attributes["sym_name"] = ir.StringAttr.get(name)
    copy.attributes["sym_visibility"] = ir.StringAttr.get("private")
    del copy.attributes["llvm.emit_c_interface"]
    old.erase()

"""A native timer loop added to the payload module, so no Python runs inside a sample.

`mlirtune_timer(args..., iterations, samples)` fills `samples[s]` with the nanoseconds taken by
`iterations` back-to-back calls of the entry function, read from CLOCK_MONOTONIC through
`clock_gettime` (ns resolution; `rtclock` in the runner utils only has microseconds).
The entry function gets LLVM's `noinline` attribute, so its stores into the output arguments
(which escape) stay in every iteration and the kernel cannot be optimised away; the timer
itself is `optnone`.

The timer is the module's only way in: a single call is the timer run once. The entry then
needs no C interface of its own, and the clock is read inline rather than through a helper:
the JIT's time grows with every function in the module (a 256^3 matmul candidate's LLVM
optimisation and code generation, 65 -> 60 ms without those two).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, llvm, memref, scf

from mlirtune.ir.inspect import find_function

TIMER_ENTRY = "mlirtune_timer"
CLOCK_MONOTONIC = 1  # Linux value of CLOCK_MONOTONIC
C_INTERFACE = "llvm.emit_c_interface"


def add_timer(module: ir.Module, entry: str) -> None:
    """Append the timer loop to `module`, calling the function `entry`, which from then on
    is reached through the timer only (it loses its C interface)."""
    kernel = find_function(module, entry)
    _add_llvm_attributes(kernel, "noinline")
    if C_INTERFACE in kernel.attributes:
        del kernel.attributes[C_INTERFACE]
    i32, i64 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64)
    index = ir.IndexType.get()
    samples_type = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], i64)
    arg_types = list(kernel.type.inputs)
    with ir.InsertionPoint(module.body), ir.Location.name("mlirtune.timer"):
        clock = func.FuncOp(
            "clock_gettime", ([i32, llvm.PointerType.get()], [i32]), visibility="private"
        )
        timer = func.FuncOp(TIMER_ENTRY, ([*arg_types, index, samples_type], []))
        timer.attributes[C_INTERFACE] = ir.UnitAttr.get()
        # Not optimised (nor its C interface wrapper): a 256^3 matmul candidate compiles in
        # about 6 ms less of its 110 (median of 40 configs, paired). A call from O0 code
        # costs about a nanosecond more (an 8^3 matmul: 21 -> 22 ns).
        _add_llvm_attributes(timer, "noinline", "optnone")
        block = timer.add_entry_block()
        with ir.InsertionPoint(block):
            *args, iterations, samples = block.arguments
            zero, one = arith.constant(index, 0), arith.constant(index, 1)
            # clock_gettime's timespec, allocated once (an alloca in the loop grows the stack)
            spec = memref.alloca(ir.MemRefType.get([2], i64), [], [])
            count = memref.dim(samples, zero)
            outer = scf.ForOp(zero, count, one)
            with ir.InsertionPoint(outer.body):
                start = _now_ns(clock, spec)
                inner = scf.ForOp(zero, iterations, one)
                with ir.InsertionPoint(inner.body):
                    # A compiler barrier that clobbers memory: without it, LLVM's LICM
                    # hoists the call out of the loop where the entry only writes memory
                    # (a dispatch that makes a constant mask: every call after the first
                    # was dropped, 16384 elements in 1e-12 s), optnone notwithstanding.
                    llvm.inline_asm(None, [], "", "~{memory}", has_side_effects=True)
                    func.call([], ir.FlatSymbolRefAttr.get(entry), list(args))
                    scf.YieldOp([])
                stop = _now_ns(clock, spec)
                memref.store(arith.subi(stop, start), samples, [outer.induction_variable])
                scf.YieldOp([])
            func.ReturnOp([])


def _now_ns(clock: func.FuncOp, spec: ir.Value) -> ir.Value:
    """CLOCK_MONOTONIC in nanoseconds, read at the insertion point with `clock`
    (clock_gettime) into `spec`, a memref<2xi64> timespec."""
    i32, i64 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64)
    index = ir.IndexType.get()
    address = memref.extract_aligned_pointer_as_index(spec)
    pointer = llvm.inttoptr(llvm.PointerType.get(), arith.index_cast(i64, address))
    func.call(
        [i32],
        ir.FlatSymbolRefAttr.get(clock.name.value),
        [arith.constant(i32, CLOCK_MONOTONIC), pointer],
    )
    seconds = memref.load(spec, [arith.constant(index, 0)])
    nanos = memref.load(spec, [arith.constant(index, 1)])
    return arith.addi(arith.muli(seconds, arith.constant(i64, 1_000_000_000)), nanos)


def _add_llvm_attributes(function: func.FuncOp, *names: str) -> None:
    """Add LLVM function attributes to the function's passthrough list (kept by
    func-to-llvm, and copied onto its C interface wrapper)."""
    existing = []
    if "passthrough" in function.attributes:
        existing = list(ir.ArrayAttr(function.attributes["passthrough"]))
    added = [ir.StringAttr.get(name) for name in names]
    function.attributes["passthrough"] = ir.ArrayAttr.get(
        [*existing, *(name for name in added if name not in existing)]
    )

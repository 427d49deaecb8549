"""MLIR JIT engine: lowering, the native timer, benchmark results, error stages."""

import contextlib

import pytest
from mlir import ir

from mlirtune.bench.timer import TIMER_ENTRY
from mlirtune.engine import MlirJitEngine
from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.ir import context as context_module
from mlirtune.ir.context import COMPILE_CHECKS, new_context, verify_lowered
from mlirtune.runtime import AcceleratorDevice
from mlirtune.workloads import Matmul

pytestmark = pytest.mark.jit


def _ops(module: ir.Module) -> set[str]:
    names: set[str] = set()

    def visit(op):
        names.add(op.name)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return names


def test_lower_payload_reaches_llvm_dialect(engine):
    module = engine.lower_payload(Matmul(M=32, N=32, K=32))
    assert {n.split(".")[0] for n in _ops(module)} <= {"llvm", "builtin"}


def test_default_schedule_emits_vector_fmas(engine):
    stages = {}
    engine.lower_payload(
        Matmul(M=64, N=64, K=64), observer=lambda stage, m: stages.update({stage: _ops(m)})
    )
    assert "vector.fma" in stages["schedule contraction"]
    assert (
        "linalg.matmul" not in stages["schedule contraction"]
    )  # fully vectorized, no scalar fallback


def test_compiled_kernel_has_an_unoptimised_timer_and_non_inlined_payload(engine):
    kernel = engine.compile(Matmul(M=16, N=16, K=16))
    functions = {}

    def visit(op):
        if op.name == "llvm.func":
            functions[ir.StringAttr(op.attributes["sym_name"]).value] = op
        return ir.WalkResult.ADVANCE

    kernel.module.operation.walk(visit)
    # The timer is the only way in: the JIT's time grows with every function it compiles.
    assert set(functions) == {
        "payload",
        "clock_gettime",
        TIMER_ENTRY,
        f"_mlir_ciface_{TIMER_ENTRY}",
    }
    # The timed calls cannot be folded away: the payload is never inlined into the loop.
    passthrough = ir.ArrayAttr(functions["payload"].attributes["passthrough"])
    assert ir.StringAttr.get("noinline", passthrough.context) in list(passthrough)
    # The timer is not optimised (LLVM's time on it would be a share of every compile).
    for name in (TIMER_ENTRY, f"_mlir_ciface_{TIMER_ENTRY}"):
        attributes = ir.ArrayAttr(functions[name].attributes["passthrough"])
        assert ir.StringAttr.get("optnone", attributes.context) in list(attributes)
    # Each timed call follows a compiler barrier that clobbers memory, so that LLVM cannot
    # hoist the call of an entry that only writes (a constant mask) out of the loop.
    barriers = []

    def collect(op):
        if op.name == "llvm.inline_asm":
            barriers.append(op)
        return ir.WalkResult.ADVANCE

    functions[TIMER_ENTRY].walk(collect)
    (barrier,) = barriers
    assert ir.StringAttr(barrier.attributes["constraints"]).value == "~{memory}"
    assert "has_side_effects" in barrier.attributes


def test_compile_is_cached(engine):
    workload = Matmul(M=16, N=24, K=8)
    assert engine.compile(workload) is engine.compile(workload)
    assert engine.compile(workload) is not engine.compile(workload, {"MR": 4})


def test_benchmark_result(engine):
    from mlirtune.interfaces.bench import BenchOptions

    options = BenchOptions(max_time_s=0.2, min_samples=5)
    result = engine.benchmark(Matmul(M=64, N=64, K=64), options=options)
    s = result.stats
    assert result.verified
    assert len(result.samples) == s.count >= 5
    assert all(x > 0 for x in result.samples)
    assert s.min <= s.ci_low <= s.median <= s.ci_high
    assert s.iqr >= 0 and s.cv >= 0
    assert result.gflops == pytest.approx(2 * 64**3 / s.median / 1e9)
    payload = result.to_json()
    for key in ("workload", "median_s", "min_s", "gflops", "verified", "samples"):
        assert key in payload


def test_benchmark_refuses_wrong_results(engine):
    workload = Matmul(M=16, N=16, K=16)
    workload.__dict__["reference_outputs"] = [workload.reference_outputs[0] + 1]
    with pytest.raises(MlirtuneError, match=r"\[verify\] verification FAILED"):
        engine.benchmark(workload)


def test_the_timing_slot_is_taken_after_verifying_and_only_to_time(engine):
    from mlirtune.interfaces.bench import BenchOptions

    entered = []

    @contextlib.contextmanager
    def slot():
        entered.append(True)
        yield

    options = BenchOptions(max_time_s=0.01)
    workload = Matmul(M=16, N=16, K=16)
    assert engine.benchmark(workload, options=options, timing_slot=slot()).verified
    assert entered == [True]
    wrong = Matmul(M=16, N=16, K=16)
    wrong.__dict__["reference_outputs"] = [wrong.reference_outputs[0] + 1]
    with pytest.raises(MlirtuneError, match="verification FAILED"):
        engine.benchmark(wrong, options=options, timing_slot=slot())
    assert entered == [True]  # a wrong kernel never takes it


def test_engine_rejects_non_host_runtime():
    class FakeGpu(AcceleratorDevice):
        kind = "fake-gpu"

        def allocate(self, name, initial, placement): ...
        def release(self, buffer): ...
        def to_host(self, buffer): ...
        def copy_to_device(self, buffer): ...
        def copy_to_host(self, buffer): ...

    with pytest.raises(MlirtuneError, match="host runtime only"):
        MlirJitEngine(FakeGpu(0))


def test_lowered_payload_has_no_stack_buffers(engine):
    # A stack buffer per loop iteration (from partially lowered n-D transfers) overflowed the
    # stack on 1024^3 matmuls; the lowering must unroll transfers fully.
    module = engine.lower_payload(Matmul(M=256, N=256, K=512))
    assert "llvm.alloca" not in _ops(module)


@pytest.fixture
def lean_compiles(monkeypatch):
    """Compile as a tuning worker does: no context thread pool, one verification at the end,
    one context for every compile."""
    monkeypatch.setattr(COMPILE_CHECKS, "context_threads", False)
    monkeypatch.setattr(COMPILE_CHECKS, "verify_each_pass", False)
    monkeypatch.setattr(COMPILE_CHECKS, "fresh_contexts", False)
    monkeypatch.setattr(context_module, "_reused", [])


def test_lean_compiles_give_verified_results(lean_compiles, engine):
    workload = Matmul(M=48, N=40, K=24)
    assert engine.execute(workload, {"MC": 16, "NC": 16, "KC": 8}).verification.ok


def test_lean_compiles_share_one_context(lean_compiles, engine):
    """Candidates compiled one after another in one context (as a tuning worker does) each
    lower and verify, the later ones after the earlier are dropped."""
    workload = Matmul(M=48, N=40, K=24)
    engine.clear_cache()  # compiled by an earlier test, in its own context
    context = engine.compile(workload, {"MC": 16, "NC": 16, "KC": 8}).module.context
    engine.clear_cache()
    for config in ({"MC": 8, "NC": 40, "KC": 24}, {"MC": 48, "NC": 8, "KC": 16}):
        assert engine.execute(workload, config).verification.ok
        assert engine.compile(workload, config).module.context == context
        engine.clear_cache()


def test_lean_compiles_still_refuse_invalid_lowered_ir(lean_compiles):
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(
            "func.func @f() -> i32 { %c = arith.constant 0 : i32 return %c : i32 }"
        )
        constant = module.body.operations[0].regions[0].blocks[0].operations[0]
        constant.attributes["value"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)
        with pytest.raises(MlirtuneError, match="lowered module is invalid"):
            verify_lowered(module)

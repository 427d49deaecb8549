"""Contained compiles: a real MLIR compile that runs away in memory or time, or aborts in C++,
and a kernel that crashes, each end the command with one error line naming the stage and
the reason, exit 2; the machine is never at risk (every command here also runs under a
6 GiB address-space cap and a timeout)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from mlirtune.contain import compiling
from mlirtune.contain.limits import MEMORY_VARIABLE, TIMEOUT_VARIABLE
from mlirtune.contain.supervisor import call_contained
from mlirtune.interfaces.errors import MlirtuneError

pytestmark = pytest.mark.subprocess

# A 512 x 512 transpose vectorized whole: one vector<512x512xf32>, which the lowering
# unrolls into hundreds of thousands of ops, growing without bound (with the GIL held).
TRANSPOSE = """\
func.func @f(%a: memref<512x512xf32>, %c: memref<512x512xf32>) {
  %ta = bufferization.to_tensor %a restrict : memref<512x512xf32> to tensor<512x512xf32>
  %tc = bufferization.to_tensor %c restrict writable : memref<512x512xf32> to tensor<512x512xf32>
  %r = linalg.transpose ins(%ta : tensor<512x512xf32>) outs(%tc : tensor<512x512xf32>)
      permutation = [1, 0]
  bufferization.materialize_in_destination %r in restrict writable %c
      : (tensor<512x512xf32>, memref<512x512xf32>) -> ()
  return
}
"""
# An exp over 512 x 512 elements vectorized whole: LLVM schedules it for minutes, at a
# flat few hundred megabytes.
EXP = """\
func.func @f(%a: memref<512x512xf32>, %c: memref<512x512xf32>) {
  %ta = bufferization.to_tensor %a restrict : memref<512x512xf32> to tensor<512x512xf32>
  %tc = bufferization.to_tensor %c restrict writable : memref<512x512xf32> to tensor<512x512xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%ta : tensor<512x512xf32>) outs(%tc : tensor<512x512xf32>) {
  ^bb0(%x: f32, %y: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  } -> tensor<512x512xf32>
  bufferization.materialize_in_destination %r in restrict writable %c
      : (tensor<512x512xf32>, memref<512x512xf32>) -> ()
  return
}
"""
# A row sum, and a schedule that fuses it with three tile sizes for its two loops: an
# assertion in MLIR's tile-and-fuse (the one real modules hit), SIGABRT.
ROW_SUM = """\
func.func @f(%a: memref<64x64xf32>, %c: memref<64xf32>) {
  %ta = bufferization.to_tensor %a restrict : memref<64x64xf32> to tensor<64x64xf32>
  %tc = bufferization.to_tensor %c restrict writable : memref<64xf32> to tensor<64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%ta : tensor<64x64xf32>) outs(%tc : tensor<64xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  bufferization.materialize_in_destination %r in restrict writable %c
      : (tensor<64xf32>, memref<64xf32>) -> ()
  return
}
"""
# Stores 256 GiB past its output: the kernel segfaults.
FAR_STORE = """\
func.func @f(%a: memref<4xf32>, %c: memref<4xf32>) {
  %v = arith.constant 1.0 : f32
  %far = arith.constant 68719476736 : index
  memref.store %v, %c[%far] : memref<4xf32>
  return
}
"""


def _schedule(body: str) -> str:
    return (
        "module attributes {transform.with_named_sequence} {\n"
        "  transform.named_sequence @__transform_main(%root: !transform.any_op "
        "{transform.readonly}) {\n"
        f"{body}\n    transform.yield\n  }}\n}}\n"
    )


VECTORIZE = _schedule(
    "    %op = transform.structured.match interface{LinalgOp} in %root"
    " : (!transform.any_op) -> !transform.any_op\n"
    "    transform.structured.vectorize %op : !transform.any_op"
)
FUSE_THREE_SIZES = _schedule(
    '    %op = transform.structured.match ops{["linalg.generic"]} in %root'
    " : (!transform.any_op) -> !transform.any_op\n"
    "    %t, %l:3 = transform.structured.fuse %op tile_sizes [8, 8, 8]"
    " : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op,"
    " !transform.any_op)"
)


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))


def _mlirtune(tmp_path: Path, payload: str, schedule: str | None, **env: str):
    """`mlirtune run --payload` (with `--schedule`) in a child process of its own."""
    (tmp_path / "payload.mlir").write_text(payload)
    command = [sys.executable, "-m", "mlirtune", "run", "--payload", "payload.mlir"]
    command += ["--entry", "f"]
    if schedule:
        (tmp_path / "schedule.mlir").write_text(schedule)
        command += ["--schedule", "schedule.mlir"]
    return subprocess.run(
        command,
        cwd=tmp_path,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_capped,
    )


def _one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("mlirtune: error: ["), line
    return line


def test_a_compile_growing_without_bound_is_stopped_at_its_ceiling(tmp_path):
    done = _mlirtune(tmp_path, TRANSPOSE, VECTORIZE, **{MEMORY_VARIABLE: "256M"})
    line = _one_error_line(done)
    assert "lower_cpu.yaml:" in line and "(pass " in line, line  # the pipeline stage
    assert f"ran out of memory under its ceiling of 256.0 MiB ({MEMORY_VARIABLE}=256M)" in line


def test_a_compile_past_its_time_limit_is_stopped(tmp_path):
    done = _mlirtune(tmp_path, EXP, VECTORIZE, **{TIMEOUT_VARIABLE: "2"})
    line = _one_error_line(done)
    assert f"ran past its time limit of 2 s ({TIMEOUT_VARIABLE}=2)" in line


def test_an_assertion_in_mlir_is_one_line_naming_the_schedule(tmp_path):
    line = _one_error_line(_mlirtune(tmp_path, ROW_SUM, FUSE_THREE_SIZES))
    assert line.startswith("mlirtune: error: [") and "schedule.mlir" in line, line
    assert "aborted in MLIR/LLVM (SIGABRT" in line
    assert "LinalgTransformOps.cpp:" in line and "Assertion `" in line


def test_a_crashing_kernel_is_one_line_naming_the_signal(tmp_path):
    line = _one_error_line(_mlirtune(tmp_path, FAR_STORE, None))
    assert line.startswith("mlirtune: error: [run] the kernel crashed (SIGSEGV"), line


def test_a_malformed_time_limit_is_a_usage_error_naming_the_variable(tmp_path):
    done = _mlirtune(tmp_path, ROW_SUM, None, **{TIMEOUT_VARIABLE: "soon"})
    assert done.stderr.splitlines() == [
        f"mlirtune: error: [limits] {TIMEOUT_VARIABLE}='soon' is not a time limit: give "
        "seconds (e.g. 600), or 0 for none"
    ]


def test_what_mlir_prints_still_reaches_the_terminal(tmp_path):
    command = [sys.executable, "-m", "mlirtune", "opt", "matmul", "M=8", "N=8", "K=8"]
    done = subprocess.run(
        [*command, "--print-after-all"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "// -----// IR Dump After" in done.stderr


def _lower_runaway(folder: str) -> str:
    """A library call that compiles the runaway transpose (for `call_contained`)."""
    from mlirtune.engine import MlirJitEngine
    from mlirtune.pipeline import with_schedule_file
    from mlirtune.targets import HostCPU
    from mlirtune.workloads.from_file import FromFile

    workload = FromFile(Path(folder) / "payload.mlir", entry="f")
    pipeline = with_schedule_file(Path(folder) / "schedule.mlir", HostCPU())
    MlirJitEngine(pipeline=pipeline).compile(workload)
    return "compiled"


def test_a_library_caller_can_contain_a_compile(tmp_path, monkeypatch):
    (tmp_path / "payload.mlir").write_text(TRANSPOSE)
    (tmp_path / "schedule.mlir").write_text(VECTORIZE)
    monkeypatch.setenv(MEMORY_VARIABLE, "256M")
    with pytest.raises(MlirtuneError, match=r"ran out of memory under its ceiling of 256\.0 MiB"):
        call_contained(_lower_runaway, str(tmp_path))


def test_outside_a_contained_process_a_compile_runs_without_limits():
    before = resource.getrlimit(resource.RLIMIT_AS)
    with compiling("lower"):
        assert resource.getrlimit(resource.RLIMIT_AS) == before


def _work_returning(data: bytes) -> bytes:
    from mlirtune.contain.forked import run_forked

    return run_forked(lambda: data, "schedule", "here")


def _work_aborting() -> bytes:
    from mlirtune.contain.forked import run_forked

    return run_forked(os.abort, "schedule", "here")


def _work_sleeping() -> bytes:
    import time

    from mlirtune.contain.forked import run_forked

    def sleep() -> bytes:
        time.sleep(60)
        return b""

    return run_forked(sleep, "schedule", "here")


def test_a_forked_step_returns_its_bytes():
    assert call_contained(_work_returning, b"\x00scheduled") == b"\x00scheduled"


def test_a_forked_step_that_aborts_is_an_error_the_caller_survives():
    with pytest.raises(MlirtuneError, match=r"\[here\] the compile aborted in MLIR/LLVM \(SIGABRT"):
        call_contained(_work_aborting)


def test_a_forked_step_gets_a_share_of_the_time_limit(monkeypatch):
    monkeypatch.setenv(TIMEOUT_VARIABLE, "4")
    with pytest.raises(MlirtuneError, match=r"here: the step ran past 1 s, its share"):
        call_contained(_work_sleeping)


def _run_with_aborting_elementwise_schedule(folder: str) -> tuple[bool, list[str]]:
    """Run an element-wise payload whose family's schedule aborts in MLIR's tile-and-fuse
    (three tile sizes for two loops); returns whether it verified, and the notes."""
    from mlir import ir

    from mlirtune.engine import MlirJitEngine
    from mlirtune.schedules.elementwise import Elementwise
    from mlirtune.workloads.from_file import FromFile

    Elementwise.build = lambda self, op, parameters: ir.Module.parse(FUSE_THREE_SIZES)
    workload = FromFile(Path(folder) / "payload.mlir", entry="f")
    engine = MlirJitEngine()
    result = engine.execute(workload)
    lowering = engine.compile(workload).lowering
    notes = [*lowering.notes, *(n for d in lowering.dispatches for n in d.lowering.notes)]
    return result.verification.ok, notes


def test_a_library_schedule_that_aborts_drops_to_the_next_path(tmp_path):
    (tmp_path / "payload.mlir").write_text(EXP.replace("512", "64"))
    passed, notes = call_contained(_run_with_aborting_elementwise_schedule, str(tmp_path))
    assert passed
    assert any("aborted in MLIR/LLVM (SIGABRT" in note for note in notes), notes
    assert any("LinalgTransformOps.cpp:" in note for note in notes), notes

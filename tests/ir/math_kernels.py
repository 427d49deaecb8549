"""A compiled kernel applying one `math` op to every element of a 1-D array, for the tests of
the math expansion steps (which the host pipeline runs on it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mlirtune.api import engine_for
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.workloads.from_file import FromFile


def kernel_source(op: str, element: str, size: int) -> str:
    """A 1-D linalg.generic applying `math.<op>` to every element of a memref."""
    memref, tensor = f"memref<{size}x{element}>", f"tensor<{size}x{element}>"
    return f"""
func.func @apply(%x: {memref}, %y: {memref}) {{
  %tx = bufferization.to_tensor %x restrict : {memref} to {tensor}
  %ty = bufferization.to_tensor %y restrict writable : {memref} to {tensor}
  %r = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                        iterator_types = ["parallel"]}} ins(%tx : {tensor}) outs(%ty : {tensor}) {{
    ^bb0(%a: {element}, %b: {element}):
      %e = math.{op} %a : {element}
      linalg.yield %e : {element}
  }} -> {tensor}
  bufferization.materialize_in_destination %r in restrict writable %y : ({tensor}, {memref}) -> ()
  return
}}
"""


def apply_math(folder: Path, op: str, x: np.ndarray, target: HostCPU | None = None) -> np.ndarray:
    """`math.<op>` of every element of the 1-D f32 or f64 array `x`, compiled for `target`
    (default: the host) and run."""
    element = {np.float32: "f32", np.float64: "f64"}[x.dtype.type]
    (folder / "kernel.mlir").write_text(kernel_source(op, element, x.size))
    np.save(folder / "x.npy", x)
    workload = FromFile(folder / "kernel.mlir", "apply", [folder / "x.npy"])
    engine = engine_for(target or HostCPU(), use_specs=False)
    kernel = engine.compile(workload)
    with workload.allocate(engine) as buffers:
        kernel.call(buffers)
        return engine.runtime.to_host(buffers[-1]).copy()

"""Engines lower, run, verify and time workloads on a runtime."""

from mlirtune.engine.mlir_jit import MlirJitEngine
from mlirtune.interfaces.engine import Engine, ExecutionResult

__all__ = ["Engine", "ExecutionResult", "MlirJitEngine"]

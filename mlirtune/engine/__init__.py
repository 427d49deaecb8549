"""Engines lower, run, verify and time workloads on a runtime."""

from mlirtune.engine.base import Engine, ExecutionResult
from mlirtune.engine.mlir_jit import MlirJitEngine

__all__ = ["Engine", "ExecutionResult", "MlirJitEngine"]

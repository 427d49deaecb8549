"""Measurement: native timer loop, adaptive sampling, statistics and result objects."""

from mlirtune.bench.harness import BenchOptions
from mlirtune.bench.result import BenchResult, Statistics

__all__ = ["BenchOptions", "BenchResult", "Statistics"]

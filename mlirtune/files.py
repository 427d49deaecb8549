"""Files replaced whole: a run killed while writing leaves the previous file or the new one,
never half of either (spec libraries, cached downloads and peaks, suite results)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_atomic(path: str | Path, data: bytes) -> Path:
    """Write `data` to a temporary file beside `path`, then rename it over `path`.

    The temporary file is created with mode 0o666 less the umask, as `open` would: a file
    from `tempfile.mkstemp` is private (0o600), and the rename would carry that over.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.partial")
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path

"""Files users hand us, read with one clear error each, and files replaced whole: a run
killed while writing leaves the previous file or the new one, never half of either (spec
libraries, cached downloads and peaks, suite results)."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import yaml

from mlirtune.interfaces.errors import UsageError


def cache_dir() -> Path:
    """This project's cache folder: $XDG_CACHE_HOME/mlirtune, else ~/.cache/mlirtune (the
    tuning database, measured peaks, pinned downloads, torch-mlir's conversions)."""
    cache_home = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(cache_home).expanduser() / "mlirtune"


def read_text(path: str | Path, stage: str) -> str:
    """The text of a file a user named: a missing, unreadable or binary (not UTF-8) file
    is a UsageError naming it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(
            f"{path}: not a text file (byte {error.start} is not UTF-8)", stage=stage
        ) from None
    except OSError as error:
        raise UsageError(f"{path}: {error.strerror or error}", stage=stage) from None


def load_json(path: str | Path, stage: str) -> object:
    """A JSON file's document; malformed or absurdly nested JSON is a UsageError naming
    the file (and line)."""
    text = read_text(path, stage)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"{path}:{error.lineno}: not JSON: {error.msg}", stage=stage) from None
    except RecursionError:
        raise UsageError(f"{path}: JSON nested too deeply to read", stage=stage) from None


def load_yaml(path: str | Path, stage: str) -> object:
    """A YAML file's document (yaml.safe_load: data only); malformed or absurdly nested
    YAML is a UsageError naming the file and line."""
    text = read_text(path, stage)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise UsageError(yaml_problem(path, error), stage=stage) from None
    except RecursionError:
        raise UsageError(f"{path}: YAML nested too deeply to read", stage=stage) from None


def yaml_problem(path: str | Path, error: yaml.YAMLError) -> str:
    """`file:line: invalid YAML: problem` in one line (the YAML context left out)."""
    mark = getattr(error, "problem_mark", None)
    where = f"{path}:{mark.line + 1}" if mark else str(path)
    return f"{where}: invalid YAML: {getattr(error, 'problem', None) or error}"


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


def write_output(path: str | Path, data: bytes, stage: str) -> Path:
    """`write_atomic` for a file a user named (-o): a path that cannot be written (its
    folder is a file, or read-only) is a UsageError naming it."""
    prepare_output(path, stage)
    try:
        return write_atomic(path, data)
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}", stage=stage) from None


def prepare_output(path: str | Path, stage: str) -> None:
    """Create the folder of an output file a user named, before any work goes into it; a
    folder that cannot be made (a file stands in its path) is a UsageError naming it."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}", stage=stage) from None

"""Where tuning-spec libraries come from: local files, directories and https URLs.

This module only resolves names and fetches bytes; parsing them is done elsewhere.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mlirtune.files import cache_dir, write_atomic
from mlirtune.interfaces.errors import UsageError

SPEC_SUFFIXES = (".mlir", ".mlirbc")
ENV_VAR = "MLIRTUNE_SPECS"  # os.pathsep-separated list of paths, directories or https URLs

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_PIN = re.compile(r"sha256=([0-9a-fA-F]{64})")
# One $MLIRTUNE_SPECS entry when os.pathsep is ":": a URL (whose "scheme:" and ":port" must
# not split it; the rest of the URL may not contain ":") or a plain path.
_ENV_ENTRY = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(?:\[[^\]]*\]|[^/:#]*)(?::\d+)?[^:]*|[^:]+")


@dataclass(frozen=True)
class SpecSource:
    """The bytes of one spec library and where they came from."""

    name: str  # the file's stem, used in labels ("x86_64-avx512" for .../x86_64-avx512.mlir)
    origin: str  # the path or URL as the user gave it (URL without the #sha256 fragment)
    data: bytes  # the file's contents, unchanged


def _error(message: str) -> UsageError:
    return UsageError(message, stage="specs")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _check_suffix(spec: str, suffix: str) -> None:
    if suffix not in SPEC_SUFFIXES:
        raise _error(
            f"spec {spec}: unsupported suffix {suffix or '(none)'}, expected .mlir or .mlirbc"
        )


def fetch(spec: str, *, cache_dir: Path | None = None, timeout_s: float = 30.0) -> SpecSource:
    """Read a local spec file or download an https one (pinned downloads are cached).

    Raises UsageError with a one-line message for anything that is not a readable spec.
    """
    if _URL.match(spec):
        if not spec.lower().startswith("https://"):
            raise _error(f"spec {spec}: only https:// URLs are accepted")
        return _fetch_url(spec, cache_dir or spec_cache_dir(), timeout_s)
    path = Path(spec).expanduser()
    if os.path.isdir(path):  # unlike Path.is_dir, never raises (e.g. on EACCES)
        raise _error(f"spec {spec}: is a directory, expected a .mlir or .mlirbc file")
    _check_suffix(spec, path.suffix)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise _error(f"spec {spec}: no such file") from None
    except OSError as exc:
        raise _error(f"spec {spec}: cannot read: {exc.strerror or exc}") from None
    return SpecSource(path.stem, spec, data)


def _fetch_url(spec: str, cache_dir: Path, timeout_s: float) -> SpecSource:
    """Download `spec`, checking and caching it by digest when it carries #sha256=<hex>."""
    url, _, fragment = spec.partition("#")
    last = PurePosixPath(urllib.parse.unquote(urllib.parse.urlsplit(url).path))
    stem, suffix = last.stem, last.suffix
    _check_suffix(url, suffix)
    if not fragment:
        return SpecSource(stem, url, _download(url, timeout_s))
    match = _PIN.fullmatch(fragment)
    if not match:
        raise _error(f"spec {url}: malformed pin #{fragment} (expected #sha256=<64 hex digits>)")
    pin = match.group(1).lower()
    cached = cache_dir / f"{pin}{suffix}"
    with contextlib.suppress(OSError):
        data = cached.read_bytes()
        if _sha256(data) == pin:  # re-verify: a corrupted cache file is downloaded again
            return SpecSource(stem, url, data)
    data = _download(url, timeout_s)
    actual = _sha256(data)
    if actual != pin:
        raise _error(f"spec {url}: sha256 mismatch: expected {pin}, got {actual}")
    with contextlib.suppress(OSError):  # the cache only saves a download; never fail on it
        write_atomic(cached, data)
    return SpecSource(stem, url, data)


class _HttpsOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects only to https, so a server cannot downgrade the download."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if urllib.parse.urlsplit(newurl).scheme.lower() != "https":
            raise urllib.error.URLError(f"redirected to non-https URL {newurl}")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _download(url: str, timeout_s: float) -> bytes:
    """GET `url` with the default certificate checks; any failure is a one-line UsageError."""
    opener = urllib.request.build_opener(
        urllib.request.HTTPSHandler(context=ssl.create_default_context()), _HttpsOnlyRedirects()
    )
    try:
        with opener.open(url, timeout=timeout_s) as response:
            return response.read()
    except urllib.error.HTTPError as exc:
        reason = f"HTTP {exc.code} {exc.reason}"
    except urllib.error.URLError as exc:
        reason = str(exc.reason)
    except (OSError, http.client.HTTPException) as exc:
        reason = str(exc) or type(exc).__name__
    reason = " ".join(reason.split())
    raise _error(f"spec {url}: download failed: {reason}")


def expand(spec: str) -> list[str]:
    """A directory becomes its *.mlir/*.mlirbc files sorted by name; anything else stays."""
    if _URL.match(spec):
        return [spec]
    path = Path(spec).expanduser()
    if not os.path.isdir(path):
        return [spec]
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        raise _error(f"spec directory {spec}: cannot list: {exc.strerror or exc}") from None
    return [
        str(path / name)
        for name in names
        if name.endswith(SPEC_SUFFIXES) and not name.startswith(".") and (path / name).is_file()
    ]


def _split_env(value: str) -> list[str]:
    """Split $MLIRTUNE_SPECS on os.pathsep, keeping URLs whole where os.pathsep is ':'."""
    if os.pathsep != ":":
        return [entry for entry in value.split(os.pathsep) if entry]
    return _ENV_ENTRY.findall(value)


def configured_specs() -> list[str]:
    """Entries of $MLIRTUNE_SPECS in order, then the files of the user's config dir."""
    specs = [spec for entry in _split_env(os.environ.get(ENV_VAR, "")) for spec in expand(entry)]
    if spec_config_dir().is_dir():
        specs += expand(str(spec_config_dir()))
    return specs


def spec_config_dir() -> Path:
    """The user's spec libraries, which every compile applies:
    $XDG_CONFIG_HOME/mlirtune/specs (~/.config by default)."""
    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or "~/.config").expanduser()
    return config_home / "mlirtune" / "specs"


def spec_cache_dir() -> Path:
    """Where pinned downloads are kept: $XDG_CACHE_HOME/mlirtune/specs (~/.cache by default)."""
    return cache_dir() / "specs"

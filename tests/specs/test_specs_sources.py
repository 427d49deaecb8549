"""Spec sources: local files, directories, $MLIRTUNE_SPECS/XDG config, and https downloads
from a local TLS server whose CA is trusted through SSL_CERT_FILE."""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import ssl
import threading
from pathlib import Path

import pytest
import trustme

from mlirtune.interfaces.errors import UsageError
from mlirtune.specs import sources
from mlirtune.specs.sources import SpecSource, configured_specs, expand, fetch, spec_cache_dir

LIB = b"module attributes {transform.with_named_sequence} {\n  // tuned configs\n}\n"
LIB_SHA = hashlib.sha256(LIB).hexdigest()
PROXY_VARS = ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the server's directory, logs request paths, and redirects /to-http.mlir to http."""

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        if self.path == "/to-http.mlir":
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{self.server.server_port}/lib.mlir")
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, *args: object) -> None:
        pass


class Server:
    """A threaded HTTPS server on 127.0.0.1 serving `root` with a certificate signed by `ca`."""

    def __init__(self, root: Path, ca: trustme.CA) -> None:
        self.root = root
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert("localhost", "127.0.0.1").configure_cert(context)
        handler = functools.partial(_Handler, directory=str(root))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.requests = []
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()
        self.running = True

    @property
    def requests(self) -> list[str]:
        return self.httpd.requests

    def url(self, name: str) -> str:
        return f"https://127.0.0.1:{self.httpd.server_port}/{name}"

    def stop(self) -> None:
        if self.running:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.thread.join()
            self.running = False


@pytest.fixture
def server(tmp_path, ca, monkeypatch):
    """The server serves tmp_path/www holding lib.mlir; its CA is the only one trusted."""
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    root = tmp_path / "www"
    root.mkdir()
    (root / "lib.mlir").write_bytes(LIB)
    srv = Server(root, ca)
    yield srv
    srv.stop()


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "cache"


def _error(excinfo: pytest.ExceptionInfo[UsageError]) -> str:
    message = str(excinfo.value)
    assert excinfo.value.stage == "specs"
    assert "\n" not in message
    return message


# --- local files --------------------------------------------------------------------------


def test_local_file_is_read_unchanged(tmp_path):
    data = bytes(range(256))  # bytecode-like: not text
    path = tmp_path / "x86_64-avx512.mlirbc"
    path.write_bytes(data)
    assert fetch(str(path)) == SpecSource("x86_64-avx512", str(path), data)


def test_local_path_expands_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "lib.mlir").write_bytes(LIB)
    source = fetch("~/lib.mlir")
    assert (source.name, source.origin, source.data) == ("lib", "~/lib.mlir", LIB)


def test_missing_file(tmp_path):
    missing = tmp_path / "nope.mlir"
    with pytest.raises(UsageError) as excinfo:
        fetch(str(missing))
    message = _error(excinfo)
    assert str(missing) in message and "no such file" in message


def test_wrong_suffix(tmp_path):
    path = tmp_path / "lib.txt"
    path.write_bytes(LIB)
    with pytest.raises(UsageError) as excinfo:
        fetch(str(path))
    message = _error(excinfo)
    assert str(path) in message and ".txt" in message


def test_directory_is_not_a_spec(tmp_path):
    with pytest.raises(UsageError) as excinfo:
        fetch(str(tmp_path))
    assert "is a directory" in _error(excinfo)


def test_unreadable_file(tmp_path, monkeypatch):
    path = tmp_path / "secret.mlir"
    path.write_bytes(LIB)
    path.chmod(0)
    if os.access(path, os.R_OK):  # root reads mode-000 files: make the read fail as it would

        def denied(self: Path) -> bytes:
            raise PermissionError(13, "Permission denied", str(self))

        monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(UsageError) as excinfo:
        fetch(str(path))
    message = _error(excinfo)
    assert str(path) in message and "cannot read: Permission denied" in message


def test_expand_directory_sorted_spec_files_only(tmp_path):
    for name in ["b.mlir", "a.mlirbc", "c.mlir", "notes.txt", ".hidden.mlir"]:
        (tmp_path / name).write_bytes(LIB)
    (tmp_path / "sub.mlir").mkdir()  # a directory with a spec suffix is not a file
    assert expand(str(tmp_path)) == [str(tmp_path / n) for n in ["a.mlirbc", "b.mlir", "c.mlir"]]
    assert expand(str(tmp_path / "b.mlir")) == [str(tmp_path / "b.mlir")]
    assert expand(str(tmp_path / "missing.mlir")) == [str(tmp_path / "missing.mlir")]
    assert expand("https://example.com/x.mlir") == ["https://example.com/x.mlir"]


# --- configuration ------------------------------------------------------------------------


def test_configured_specs_env_then_config_dir(tmp_path, monkeypatch):
    env_dir = tmp_path / "envdir"
    env_dir.mkdir()
    (env_dir / "z.mlir").write_bytes(LIB)
    (env_dir / "y.mlir").write_bytes(LIB)
    config_dir = tmp_path / "xdg" / "mlirtune" / "specs"
    config_dir.mkdir(parents=True)
    (config_dir / "user.mlir").write_bytes(LIB)
    url = f"https://localhost:8443/libs/gpu.mlir#sha256={LIB_SHA}"
    url6 = "https://[::1]:8443/cpu.mlirbc"
    single = str(tmp_path / "single.mlir")
    monkeypatch.setenv(sources.ENV_VAR, os.pathsep.join([single, url, str(env_dir), url6]))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert configured_specs() == [
        single,
        url,
        str(env_dir / "y.mlir"),
        str(env_dir / "z.mlir"),
        url6,
        str(config_dir / "user.mlir"),
    ]


def test_configured_specs_empty(tmp_path, monkeypatch):
    monkeypatch.delenv(sources.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # no mlirtune/specs inside
    assert configured_specs() == []
    monkeypatch.setenv(sources.ENV_VAR, os.pathsep * 2)
    assert configured_specs() == []


def test_configured_specs_default_config_dir(tmp_path, monkeypatch):
    monkeypatch.delenv(sources.ENV_VAR, raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    config_dir = tmp_path / ".config" / "mlirtune" / "specs"
    config_dir.mkdir(parents=True)
    (config_dir / "a.mlir").write_bytes(LIB)
    assert configured_specs() == [str(config_dir / "a.mlir")]


def test_spec_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert spec_cache_dir() == tmp_path / "mlirtune" / "specs"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert spec_cache_dir() == tmp_path / ".cache" / "mlirtune" / "specs"


# --- https --------------------------------------------------------------------------------


def test_https_unpinned_download_is_not_cached(server, cache):
    url = server.url("lib.mlir")
    assert fetch(url, cache_dir=cache) == SpecSource("lib", url, LIB)
    assert fetch(url, cache_dir=cache).data == LIB
    assert server.requests == ["/lib.mlir", "/lib.mlir"]  # downloaded every time
    assert not cache.exists()


def test_https_pinned_download_is_cached_and_served_offline(server, cache):
    url = server.url("lib.mlir")
    source = fetch(f"{url}#sha256={LIB_SHA}", cache_dir=cache)
    assert source == SpecSource("lib", url, LIB)  # origin has no fragment
    assert [p.name for p in cache.iterdir()] == [f"{LIB_SHA}.mlir"]  # no temp files left
    assert (cache / f"{LIB_SHA}.mlir").read_bytes() == LIB
    server.stop()
    with pytest.raises(UsageError):  # the network really is gone ...
        fetch(url, cache_dir=cache)
    # ... yet the pinned URL is served from the cache (an upper-case pin names the same file)
    assert fetch(f"{url}#sha256={LIB_SHA.upper()}", cache_dir=cache) == source
    assert server.requests == ["/lib.mlir"]


def test_corrupted_cache_is_downloaded_again(server, cache):
    url = f"{server.url('lib.mlir')}#sha256={LIB_SHA}"
    cache.mkdir()
    (cache / f"{LIB_SHA}.mlir").write_bytes(b"tampered")
    assert fetch(url, cache_dir=cache).data == LIB
    assert server.requests == ["/lib.mlir"]
    assert (cache / f"{LIB_SHA}.mlir").read_bytes() == LIB


def test_default_cache_dir_is_used(server, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    fetch(f"{server.url('lib.mlir')}#sha256={LIB_SHA}")
    assert (tmp_path / "xdg-cache" / "mlirtune" / "specs" / f"{LIB_SHA}.mlir").read_bytes() == LIB


def test_pin_mismatch_names_both_digests_and_caches_nothing(server, cache):
    wrong = "0" * 64
    url = server.url("lib.mlir")
    with pytest.raises(UsageError) as excinfo:
        fetch(f"{url}#sha256={wrong}", cache_dir=cache)
    message = _error(excinfo)
    assert url in message and wrong in message and LIB_SHA in message
    assert not cache.exists() or not any(cache.iterdir())


@pytest.mark.parametrize("fragment", ["sha256=abc", "sha256=" + "g" * 64, "md5=" + "0" * 64, "x"])
def test_malformed_pin(server, cache, fragment):
    with pytest.raises(UsageError) as excinfo:
        fetch(f"{server.url('lib.mlir')}#{fragment}", cache_dir=cache)
    assert "malformed pin" in _error(excinfo)
    assert server.requests == []


@pytest.mark.parametrize(
    "spec", ["http://127.0.0.1/lib.mlir", "ftp://host/lib.mlir", "file:///tmp/lib.mlir"]
)
def test_only_https_is_accepted(spec):
    with pytest.raises(UsageError) as excinfo:
        fetch(spec)
    message = _error(excinfo)
    assert spec in message and "only https" in message


def test_redirect_to_http_is_refused(server, cache):
    url = server.url("to-http.mlir")
    with pytest.raises(UsageError) as excinfo:
        fetch(url, cache_dir=cache)
    message = _error(excinfo)
    assert url in message and "non-https" in message
    assert server.requests == ["/to-http.mlir"]


def test_url_with_wrong_suffix(server, cache):
    with pytest.raises(UsageError) as excinfo:
        fetch(server.url("lib.txt"), cache_dir=cache)
    assert "unsupported suffix" in _error(excinfo)
    assert server.requests == []


def test_http_404(server, cache):
    url = server.url("missing.mlir")
    with pytest.raises(UsageError) as excinfo:
        fetch(url, cache_dir=cache)
    message = _error(excinfo)
    assert url in message and "404" in message


def test_untrusted_certificate(server, cache, tmp_path, monkeypatch):
    other_ca = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other_ca))
    monkeypatch.setenv("SSL_CERT_FILE", str(other_ca))
    url = server.url("lib.mlir")
    with pytest.raises(UsageError) as excinfo:
        fetch(f"{url}#sha256={LIB_SHA}", cache_dir=cache)
    message = _error(excinfo)
    assert url in message and "CERTIFICATE_VERIFY_FAILED" in message
    assert server.requests == []
    assert not cache.exists()


def test_connection_refused(server, cache):
    url = server.url("lib.mlir")
    server.stop()
    with pytest.raises(UsageError) as excinfo:
        fetch(url, cache_dir=cache)
    message = _error(excinfo)
    assert url in message and "download failed" in message

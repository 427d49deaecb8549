"""mlirtune.files.write_atomic: whole files only, with the permissions `open` would give."""

import os

import pytest

from mlirtune.files import write_atomic


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_replaces_the_file_with_open_permissions(tmp_path, umask_022):
    path = tmp_path / "sub" / "library.mlir"
    write_atomic(path, b"old")
    assert write_atomic(path, b"new") == path
    assert path.read_bytes() == b"new"
    # Not tempfile.mkstemp's 0o600: a shipped or shared library must stay readable.
    assert path.stat().st_mode & 0o777 == 0o644
    assert os.listdir(path.parent) == ["library.mlir"]


def test_a_failed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    write_atomic(path, b"previous")

    def refuse(source, target):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(path, b"next")
    assert path.read_bytes() == b"previous"
    assert os.listdir(tmp_path) == ["results.json"]

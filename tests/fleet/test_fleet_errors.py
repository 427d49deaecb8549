"""Bad fleet input gets one line and exit 2, before anything starts."""

from __future__ import annotations

import sys

import pytest

from mlirtune.cli import main
from mlirtune.fleet.cluster import import_ray
from mlirtune.interfaces.errors import UsageError
from mlirtune.tune.db import TuningDB

TUNE = ["tune", "matmul", "M=32", "N=32", "K=32", "--budget", "2"]


def _one_line_error(capsys, argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    return err


def test_an_unreachable_address_is_named(capsys):
    err = _one_line_error(capsys, [*TUNE, "--ray", "127.0.0.1:1"])
    assert "--ray 127.0.0.1:1: no Ray cluster answers there" in err


def test_an_address_that_is_not_host_port_is_refused(capsys):
    err = _one_line_error(capsys, [*TUNE, "--ray", "headnode"])
    assert "HOST:PORT" in err


def test_per_class_needs_a_cluster(capsys):
    err = _one_line_error(capsys, [*TUNE, "--per-class"])
    assert "--per-class tunes on a Ray cluster" in err


def test_per_class_does_not_write_one_library(capsys):
    err = _one_line_error(capsys, [*TUNE, "--ray", "--per-class", "--update-spec", "x.mlir"])
    assert "--update-spec" in err and "specs export --per-class" in err


def test_a_missing_ray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(UsageError, match=r"pip install 'mlirtune\[ray\]'"):
        import_ray()


def test_export_per_class_without_fleet_classes_is_one_line(capsys, tmp_path):
    db = tmp_path / "t.db"
    TuningDB(db).close()  # a new, empty database
    err = _one_line_error(
        capsys, ["specs", "export", "--db", str(db), "--per-class", str(tmp_path)]
    )
    assert "no fleet-tuned CPU classes" in err


def test_a_node_names_its_class_by_label_or_resource():
    from mlirtune.fleet.cluster import CLASS_LABEL, named_class

    assert named_class({"Labels": {CLASS_LABEL: "zen4"}, "Resources": {"CPU": 8}}) == "zen4"
    assert named_class({"Resources": {"CPU": 8, "mlirtune-class:zen3": 1}}) == "zen3"
    assert named_class({"Labels": {}, "Resources": {"CPU": 8}}) is None


def test_a_class_target_survives_the_database(tmp_path):
    from mlirtune.fleet.target import FleetCPU
    from mlirtune.targets.host_cpu import HostCPU

    target = FleetCPU(HostCPU(isa="sse").features, "narrow")
    with TuningDB(tmp_path / "t.db") as db:
        db.record_cpu_class("narrow", "hash", target.describe())
        [(name, description)] = db.cpu_classes()
    rebuilt = FleetCPU.from_description(description)
    assert name == "narrow" and rebuilt.cpu_class() == "narrow"
    assert rebuilt.fingerprint() == target.fingerprint() == HostCPU(isa="sse").fingerprint()

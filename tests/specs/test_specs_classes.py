"""Spec entries and CPU classes: an entry tuned on another class is never applied silently,
the shipped libraries for an ISA are loaded per class, and `tune` starts from other-class
entries."""

from __future__ import annotations

import functools
import json
import warnings

import pytest
from mlir import ir

from mlirtune.cli import main
from mlirtune.curation.export import entry_name, library_metadata
from mlirtune.engine.mlir_jit import MlirJitEngine
from mlirtune.ir.context import new_context
from mlirtune.specs.library import SpecLibrary
from mlirtune.specs.sources import fetch
from mlirtune.specs.specset import (
    SpecSet,
    SpecWarning,
    default_library_path,
    default_library_paths,
)
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.toolchain import digest
from mlirtune.tune.db import TuningDB
from mlirtune.tune.problem import generate
from mlirtune.tune.starters import foreign_starters, tuned_config
from mlirtune.workloads import Matmul
from tests.specs.libraries import (
    SAPPHIRE_RAPIDS,
    ZEN3,
    ZEN4,
    other_class,
    valid_configs,
    write_library,
)

HERE = HostCPU()
OTHER = other_class(HERE)
WORKLOAD = Matmul(M=32, N=48, K=16)


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    """Configured libraries and the tuning database in this test's folder."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("MLIRTUNE_DB", str(tmp_path / "default.db"))


@functools.cache
def problem():
    return generate(WORKLOAD, HERE)


def entry() -> str:
    return entry_name(problem().key.workload, problem().key.pipeline)


def engine(*paths: str, target: HostCPU = HERE) -> MlirJitEngine:
    return MlirJitEngine(target=target, specs=SpecSet([fetch(p) for p in paths], target))


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


# --- the policy ----------------------------------------------------------------------------


def test_new_entries_and_libraries_record_the_class(tmp_path):
    (config,) = valid_configs(problem(), 1)
    path = write_library(tmp_path / "mine.mlir", HERE.cpu_class(), [(problem(), config)])
    with new_context(), ir.Location.unknown():
        (found,) = SpecLibrary.parse(fetch(path)).entries
    assert found.metadata["target"]["class"] == HERE.cpu_class()
    assert f"({HERE.cpu_class()})" in found.metadata["target"]["summary"]
    metadata = library_metadata(HERE)
    assert metadata["target_class"] == HERE.cpu_class()
    assert metadata["target_summary"].endswith(f"({HERE.cpu_class()})")


def test_user_entry_of_another_class_warns_and_is_not_applied(tmp_path):
    (config,) = valid_configs(problem(), 1)
    path = write_library(tmp_path / "theirs.mlir", OTHER, [(problem(), config)])
    with pytest.warns(SpecWarning) as caught:
        lowering = engine(path).plan(WORKLOAD)
    (message,) = [str(w.message) for w in caught]
    for part in (f"theirs:{entry()}", OTHER, HERE.cpu_class(), "--starter-spec", path):
        assert part in message
    assert lowering.config_source == "selector"
    assert lowering.values == problem().lowering.values
    assert lowering.notes == [message]


def test_shipped_entry_of_another_class_is_a_note(tmp_path, monkeypatch):
    monkeypatch.setattr("mlirtune.specs.specset.DEFAULTS_DIR", tmp_path)
    (config,) = valid_configs(problem(), 1)
    path = write_library(tmp_path / f"x86_64-avx512-{OTHER}.mlir", OTHER, [(problem(), config)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lowering = engine(path).plan(WORKLOAD)
    (note,) = lowering.notes
    assert f"tuned on CPU class {OTHER}, not on this host's ({HERE.cpu_class()})" in note
    assert "not applied" in note and "`mlirtune specs adapt --workload matmul`" in note
    assert lowering.config_source == "selector"


def test_entry_without_class_applies_only_on_its_own_cpu(tmp_path):
    (config,) = valid_configs(problem(), 1)
    mine = write_library(tmp_path / "mine.mlir", None, [(problem(), config)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert engine(mine).plan(WORKLOAD).config_source == f"spec:mine:{entry()}"
    old = write_library(tmp_path / "old.mlir", None, [(problem(), config)], hash="0000")
    with pytest.warns(SpecWarning, match="tuned on CPU class unknown.*not applied"):
        assert engine(old).plan(WORKLOAD).config_source == "selector"


def test_the_next_entry_of_this_class_gets_its_chance(tmp_path):
    theirs_config, mine_config = valid_configs(problem(), 2)
    theirs = write_library(tmp_path / "theirs.mlir", OTHER, [(problem(), theirs_config)])
    mine = write_library(tmp_path / "mine.mlir", HERE.cpu_class(), [(problem(), mine_config)])
    with pytest.warns(SpecWarning, match="not applied"):
        lowering = engine(theirs, mine).plan(WORKLOAD)
    assert lowering.config_source == f"spec:mine:{entry()}"
    assert {k: lowering.values[k] for k in mine_config} == mine_config
    with warnings.catch_warnings():  # an entry after the one applied is not worth a warning
        warnings.simplefilter("error")
        assert engine(mine, theirs).plan(WORKLOAD).config_source == f"spec:mine:{entry()}"


def test_shipped_libraries_of_every_class_of_the_isa_are_loaded(tmp_path, monkeypatch):
    monkeypatch.setattr("mlirtune.specs.specset.DEFAULTS_DIR", tmp_path)
    names = ["amd-zen3", "amd-zen4", "intel-sapphire-rapids"]
    for name in names:
        (tmp_path / f"x86_64-avx512-{name}.mlir").write_text("")
    (tmp_path / "x86_64-avx2-amd-zen4.mlir").write_text("")
    target = HostCPU(isa="avx512", **SAPPHIRE_RAPIDS)
    paths = default_library_paths(target)
    assert [p.name for p in paths] == [
        "x86_64-avx512-intel-sapphire-rapids.mlir",
        "x86_64-avx512-amd-zen3.mlir",
        "x86_64-avx512-amd-zen4.mlir",
    ]
    assert default_library_path(target) == paths[0]
    zen5 = HostCPU(isa="avx512", vendor="AuthenticAMD", family=0x1A, model_number=2)
    assert default_library_path(zen5) is None and len(default_library_paths(zen5)) == 3
    assert [p.name for p in default_library_paths(HostCPU(isa="avx2", **ZEN3))] == [
        "x86_64-avx2-amd-zen4.mlir"
    ]
    specs = SpecSet.for_target(target, configured=False)
    assert [s.origin for s in specs.sources] == [str(p) for p in paths]


def test_the_real_shipped_library_applies_on_its_class_only():
    """The avx512 library was tuned on a Zen 4: applied there, a note on a Zen 3. Both have
    a Zen 4's caches (a smaller L2, this host's on a Zen 3, rules the entry's blocks out;
    its ways would change the selector's tiles). Its 256^3 entry found no config faster
    than the selector of its day, which still chooses that config there: applied."""
    workload = Matmul(M=128, N=512, K=2048)
    caches = {"l1d_bytes": 32 << 10, "l2_bytes": 1 << 20, "l3_bytes": 32 << 20}
    caches |= {"l1d_ways": 8, "l2_ways": 8, "l3_ways": 16}
    zen4 = HostCPU(isa="avx512", **ZEN4, **caches)
    zen3 = HostCPU(isa="avx512", **ZEN3, **caches)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        applied = MlirJitEngine(target=zen4).plan(workload)
        skipped = MlirJitEngine(target=zen3).plan(workload)
    assert applied.config_source == "spec:x86_64-avx512-amd-zen4:matmul_K2048_M128_N512_f32"
    assert skipped.config_source == "selector"
    (note,) = skipped.notes
    assert "tuned on CPU class amd-zen4, not on this host's (amd-zen3)" in note
    kept = MlirJitEngine(target=zen4).plan(Matmul(M=256, N=256, K=256))
    assert kept.config_source == "spec:x86_64-avx512-amd-zen4:matmul_K256_M256_N256_f32"


def test_list_verify_and_show_say_what_is_not_applied(tmp_path, capsys):
    (config,) = valid_configs(problem(), 1)
    path = write_library(tmp_path / "theirs.mlir", OTHER, [(problem(), config)])
    code, out, _ = cli(capsys, "specs", "list", path)
    assert code == 0 and f"not applied: tuned on CPU class {OTHER}" in out
    code, out, _ = cli(capsys, "specs", "verify", path)
    assert code == 0 and f"other class theirs:{entry()}: tuned on CPU class {OTHER}" in out
    dims = ["M=32", "N=48", "K=16"]
    code, out, err = cli(capsys, "specs", "show", "--for", "matmul", *dims, "--spec", path)
    assert code == 0 and f"tuned on CPU class {OTHER}: not applied here" in out
    assert "config: selector:" in out and "warning:" in err


# --- tune starts from other-class entries --------------------------------------------------


def test_other_class_entries_are_starters(tmp_path):
    theirs_config, mine_config = valid_configs(problem(), 2)
    theirs = write_library(tmp_path / "theirs.mlir", OTHER, [(problem(), theirs_config)])
    mine = write_library(tmp_path / "mine.mlir", HERE.cpu_class(), [(problem(), mine_config)])
    specs = SpecSet([fetch(theirs), fetch(mine)], HERE)
    (starter,) = foreign_starters(problem(), specs)
    assert starter.label == f"theirs:{entry()}" and starter.tuned_on == OTHER
    assert starter.config == tuned_config(problem(), theirs_config)
    assert problem().slot_values(starter.config) == theirs_config


@pytest.mark.jit
@pytest.mark.subprocess
def test_tune_starts_from_other_class_entries_it_loads(tmp_path, capsys):
    (config,) = valid_configs(problem(), 1)
    folder = tmp_path / "config" / "mlirtune" / "specs"  # the configured libraries
    folder.mkdir(parents=True)
    write_library(folder / "theirs.mlir", OTHER, [(problem(), config)])
    db = tmp_path / "t.db"
    argv = ["tune", "matmul", "M=32", "N=48", "K=16", "--budget", 1, "--workers", 2]
    code, out, err = cli(capsys, *argv, "--db", db, "--json")
    assert code == 0 and json.loads(out)["evaluated"] == 1
    assert f"starting from 1 config tuned on other CPU classes: theirs:{entry()} ({OTHER})" in err
    with TuningDB(db, readonly=True) as database:
        (record,) = [r for r in database.records(problem().key) if r.role == "candidate"]
    assert record.params == config
    assert record.target_hash == digest(HERE.fingerprint())


@pytest.mark.jit
@pytest.mark.subprocess
def test_tune_leaves_out_other_class_entries_outside_this_hosts_space(tmp_path, capsys):
    (config,) = valid_configs(problem(), 1)
    outside = {**config, "MR": max(problem().space.domains["MR"]) + 1}  # breaks MR's domain
    folder = tmp_path / "config" / "mlirtune" / "specs"  # the configured libraries
    folder.mkdir(parents=True)
    write_library(folder / "theirs.mlir", OTHER, [(problem(), outside)])
    argv = ["tune", "matmul", "M=32", "N=48", "K=16", "--budget", 1, "--workers", 2]
    code, out, err = cli(capsys, *argv, "--db", tmp_path / "t.db", "--json")
    assert code == 0 and json.loads(out)["evaluated"] == 1
    assert "tuned on other CPU classes" not in err  # not announced as a starter
    assert not any("breaks" in warning for warning in json.loads(out)["warnings"])


def test_an_entry_of_this_class_breaking_the_constraints_warns_as_a_param_does(tmp_path):
    """An entry tuned on this very target whose values the family's constraints reject (a
    library edited by hand, or an older family's) gets the warning a --param config gets,
    and, like --param values, still applies."""
    (config,) = valid_configs(problem(), 1)
    broken = {**config, "NR": 12}  # no whole vectors on any x86 ISA
    path = write_library(tmp_path / "mine.mlir", HERE.cpu_class(), [(problem(), broken)])
    with pytest.warns(SpecWarning, match=f"mine:{entry()}: its config breaks .*NR"):
        lowering = engine(path).plan(WORKLOAD)
    assert lowering.config_source == f"spec:mine:{entry()}"
    assert lowering.values["NR"] == 12

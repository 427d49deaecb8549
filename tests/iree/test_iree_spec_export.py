"""`specs export --engine iree`: a model's IREE tuning spec from the database's verdicts,
stamped with the CPU class it was tuned on, which later compiles and merges check."""

from __future__ import annotations

import pytest

from mlirtune.cli import main
from mlirtune.interfaces.errors import UsageError
from mlirtune.iree.engine import IreeEngine
from mlirtune.iree.problem import distinct_tunable, iree_key
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.db import TuningDB, Verdict
from mlirtune.workloads.from_file import FromFile

pytestmark = pytest.mark.subprocess

MLP = ["--payload", "examples/iree/mlp.mlir", "--entry", "mlp"]
CONFIG = {"TILE_M": 16, "TILE_N": 16, "VEC_M": 4, "VEC_N": 16, "VEC_K": 2}


def _record(db_path, *, won_first: bool, won_second: bool | None) -> None:
    """Verdicts for the example MLP's two dispatches (none for the second when None)."""
    target = HostCPU()
    workload = FromFile("examples/iree/mlp.mlir", entry="mlp")
    roots = distinct_tunable(IreeEngine(target).dispatches(workload))
    assert len(roots) == 2
    with TuningDB(db_path) as db:
        for root, won in zip(roots, (won_first, won_second), strict=True):
            if won is not None:
                verdict = Verdict(CONFIG, {}, won, 1.5 if won else 1.0, 1e-3)
                db.record_verdict(iree_key(workload, target, root), verdict)


def test_the_winning_verdicts_make_a_spec_iree_applies(tmp_path, capsys):
    db, spec = tmp_path / "tuning.db", tmp_path / "mlp-spec.mlir"
    _record(db, won_first=True, won_second=False)
    argv = ["specs", "export", "--engine", "iree", *MLP, "--db", str(db), "-o", str(spec)]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "1.50x IREE's config" in lines[0] and "IREE's config won its race" in lines[1]
    assert lines[2] == f"wrote the IREE tuning spec of 1 dispatch to {spec}"
    assert f'class = "{HostCPU().hardware_class()}"' in spec.read_text()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("tuning.db")) == [
        spec.name
    ]  # nothing beside it
    assert main(["run", *MLP, "--engine", "iree", "--spec", str(spec)]) == 0
    dispatches = [line for line in capsys.readouterr().out.splitlines() if "dispatch" in line]
    assert [line.endswith("(spec)") for line in dispatches] == [True, False], dispatches


def test_a_model_without_verdicts_here_is_a_clear_error(tmp_path, capsys):
    db = tmp_path / "tuning.db"
    _record(db, won_first=True, won_second=None)
    spec = tmp_path / "spec.mlir"
    other = ["--for", "matmul", "M=16", "N=16", "K=16"]
    argv = ["specs", "export", "--engine", "iree", "--db", str(db), "-o", str(spec)]
    assert main([*argv, *other]) == 2
    assert "holds no IREE verdicts for matmul" in capsys.readouterr().err
    assert not spec.exists()
    assert main([*argv, *MLP]) == 0  # the untuned dispatch keeps IREE's config
    assert "not tuned: IREE's config" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--engine", "iree", "-o", "s.mlir"], "name it with --for WORKLOAD"),
        (["--engine", "iree", *MLP, "-o", "s.mlirbc"], "an IREE tuning spec is a .mlir file"),
        (["--engine", "iree", *MLP, "--per-class", "d"], "drop it with --engine iree"),
        (["--engine", "iree", *MLP, "--workload", "mlp", "-o", "s.mlir"], "drop it"),
        ([*MLP, "-o", "s.mlir"], "name the model of an IREE tuning spec (--engine iree)"),
    ],
)
def test_export_flags_that_do_not_fit_are_one_line(tmp_path, capsys, argv, says):
    db = tmp_path / "tuning.db"
    TuningDB(db).close()
    assert main(["specs", "export", "--db", str(db), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1, err


def _stamped_as(spec, cpu_class: str) -> None:
    here = f'class = "{HostCPU().hardware_class()}"'
    spec.write_text(spec.read_text().replace(here, f'class = "{cpu_class}"'))


def test_a_spec_of_another_cpu_class_warns_and_is_not_merged_into(tmp_path, capsys):
    engine = IreeEngine(HostCPU())
    workload = FromFile("examples/iree/mlp.mlir", entry="mlp")
    first, second = distinct_tunable(engine.dispatches(workload))
    spec = tmp_path / "spec.mlir"
    engine.write_spec([(first, CONFIG)], spec)
    _stamped_as(spec, "some-other-class")
    assert main(["run", *MLP, "--engine", "iree", "--spec", str(spec)]) == 0
    assert "was tuned on CPU class some-other-class" in capsys.readouterr().err
    before = spec.read_text()
    with pytest.raises(UsageError, match="tuned on CPU class some-other-class"):
        engine.write_spec([(second, CONFIG)], spec, merged=spec)
    assert spec.read_text() == before

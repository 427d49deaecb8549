"""IREE as an engine and a tuning target: runs verified, specs iree-compile applies, a
model's dispatches tuned and their spec applied, IREE's refusals as one-line errors."""

from __future__ import annotations

import importlib.util
import json

import pytest

from mlirtune.cli import main
from mlirtune.interfaces.bench import BenchOptions
from mlirtune.interfaces.errors import UsageError
from mlirtune.iree import tools
from mlirtune.iree.engine import IreeEngine
from mlirtune.iree.problem import distinct_tunable, iree_evaluator, iree_problem
from mlirtune.iree.profile import DispatchTimer
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.tune.evaluator import EvaluatorSettings
from mlirtune.workloads import Matmul
from tests.torch import needs_torch

pytestmark = pytest.mark.subprocess

CONFIG = {"TILE_M": 16, "TILE_N": 16, "VEC_M": 4, "VEC_N": 16, "VEC_K": 2}

TWO_LAYERS = """
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(32, 64)
        self.down = torch.nn.Linear(64, 16)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def get_inputs():
    return [torch.randn(24, 32)]


def get_init_inputs():
    return []
"""


def test_a_matmul_runs_verified_and_lists_its_dispatch():
    engine = IreeEngine(HostCPU())
    workload = Matmul(M=32, N=48, K=16)
    (root,) = engine.dispatches(workload)
    assert (root.op_name, root.loops, root.kind) == ("linalg.matmul", (32, 48, 16), "contraction")
    assert engine.execute(workload).verification.ok
    assert engine.execute(workload, CONFIG).verification.ok


def test_run_gives_each_dispatch_its_share_of_the_time(capsys):
    argv = ["run", "--payload", "examples/iree/mlp.mlir", "--entry", "mlp", "--engine", "iree"]
    assert main(argv) == 0
    shares = [
        int(line.split(", ")[-1].split("%")[0])
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("dispatch ")
    ]
    assert len(shares) == 2 and all(share > 0 for share in shares)
    assert abs(sum(shares) - 100) <= 1  # both dispatches, rounded


def test_a_tuning_engine_times_its_dispatch_alone():
    """Bound to a dispatch with time_dispatch, as the tuner's workers are, a benchmark
    verifies the whole module and times that dispatch: its samples are the dispatch's calls
    read from IREE's profile, and its FLOPs the dispatch's."""
    workload = Matmul(M=64, N=48, K=32)
    engine = IreeEngine(HostCPU(), time_dispatch=True)
    root = engine.tuned_root(workload)
    result = engine.benchmark(workload, CONFIG, options=BenchOptions(max_time_s=0.05))
    assert result.verified and result.complexity.flops == root.flops == 2 * 64 * 48 * 32
    assert len(result.samples) >= 3 and min(result.samples) > 0
    kernel = engine.compile(workload, CONFIG)
    assert kernel.timed == root.dispatch
    with workload.allocate(engine) as buffers:
        assert kernel.time_shares(buffers) == {root.dispatch: 1.0}
        with pytest.raises(UsageError, match="has no dispatch elsewhere"):
            DispatchTimer(
                kernel.folder / "module.vmfb", "payload", kernel.inputs(buffers), "elsewhere"
            )(1, 1)


def test_a_spec_is_applied_by_iree_compile_to_its_dispatch_only(tmp_path):
    workload, other = Matmul(M=32, N=48, K=16), Matmul(M=40, N=48, K=16)
    engine = IreeEngine(HostCPU())
    spec = tmp_path / "spec.mlir"
    engine.write_spec([(engine.tuned_root(workload), CONFIG)], spec)
    applied = IreeEngine(HostCPU(), spec)
    # matched: the root's dumped lowering config is the spec's (compared by the bindings)
    assert [r.matched for r in applied.dispatches(workload)] == [True]
    assert [r.matched for r in applied.dispatches(other)] == [False]
    assert applied.execute(workload).verification.ok


def test_a_merged_spec_keeps_the_other_dispatches(tmp_path):
    first, second = Matmul(M=32, N=48, K=16), Matmul(M=24, N=32, K=8)
    engine = IreeEngine(HostCPU())
    spec = tmp_path / "spec.mlir"
    engine.write_spec([(engine.tuned_root(first), CONFIG)], spec)
    engine.write_spec([(engine.tuned_root(second), CONFIG)], spec, merged=spec)
    applied = IreeEngine(HostCPU(), spec)
    assert applied.dispatches(first)[0].matched and applied.dispatches(second)[0].matched


def test_another_file_is_not_overwritten_by_a_merge(tmp_path):
    library = tmp_path / "library.mlir"
    library.write_text("module attributes {transform.with_named_sequence} {\n}\n")
    engine = IreeEngine(HostCPU())
    workload = Matmul(M=32, N=48, K=16)
    with pytest.raises(UsageError, match="no IREE tuning spec written by mlirtune"):
        engine.write_spec([(engine.tuned_root(workload), CONFIG)], library, merged=library)
    assert library.read_text() == "module attributes {transform.with_named_sequence} {\n}\n"


def test_a_config_iree_refuses_costs_one_candidate():
    workload = Matmul(M=32, N=32, K=32)
    engine = IreeEngine(HostCPU())
    root = engine.tuned_root(workload)
    problem = iree_problem(workload, HostCPU(), root)
    too_large = {"TILE_M": 32, "TILE_N": 32, "VEC_M": 16, "VEC_N": 32, "VEC_K": 16}
    assert not problem.space.contains(too_large)  # the space knows IREE's limit
    settings = EvaluatorSettings(workers=2)
    with iree_evaluator(problem, root, settings) as evaluator:
        refused, ran = evaluator.evaluate_all([too_large, CONFIG])
    assert refused.status == "compile_error" and "large vector sizes" in refused.detail
    assert ran.status == "ok"


@needs_torch
def test_a_model_is_tuned_per_dispatch_and_its_spec_applied(tmp_path, capsys):
    problem_file = tmp_path / "two_layers.py"
    problem_file.write_text(TWO_LAYERS)
    db, spec = tmp_path / "tuning.db", tmp_path / "spec.mlir"
    model = ["--torch", str(problem_file), "--engine", "iree"]
    argv = ["tune", *model, "--budget", "3", "--db", str(db), "--json", "--update-spec", str(spec)]
    assert main(argv) == 0
    reports = json.loads(capsys.readouterr().out)
    assert len(reports) == 2  # the two Linear layers' dispatches, each searched
    assert all(r["evaluated"] >= 3 for r in reports)
    winners = sum(r["winner"] == "candidate" for r in reports)
    assert main(["run", *model, "--spec", str(spec)]) == 0  # the spec of its winners, if any
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.endswith("(spec)") for line in lines) == winners, lines
    # One tried config per dispatch, written as the model's spec, is applied to both.
    from mlirtune.cli.common import workload_of

    engine = IreeEngine(HostCPU())
    workload = workload_of(_torch_args(problem_file))
    roots = distinct_tunable(engine.dispatches(workload))
    engine.write_spec([(root, CONFIG) for root in roots], spec)
    assert main(["run", *model, "--spec", str(spec)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.endswith("(spec)") for line in lines) == 2, lines


def _torch_args(problem_file):
    import argparse

    return argparse.Namespace(
        workload=None, options=[], payload=None, torch=str(problem_file), batch=None,
        entry="payload", inputs=None, expect=None,
    )  # fmt: skip


def test_iree_compile_failures_name_its_diagnostic(tmp_path):
    source = tmp_path / "bad.mlir"
    source.write_text("func.func @f() -> i32 {\n  return\n}\n")
    with pytest.raises(UsageError, match=r"iree-compile failed: .*error: "):
        tools.iree_compile(source, tmp_path / "out.vmfb")


def test_a_missing_install_names_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name.startswith("iree") else real(name, *a),
    )
    with pytest.raises(UsageError, match=r"mlirtune\[iree\]"):
        tools.require_iree()


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--threads", "2"], "one thread"),
        (["--param", "TILE_M=16"], "IREE's knobs are TILE_M, TILE_N, VEC_M, VEC_N, VEC_K"),
        (["--spec", "missing.mlir"], "no such tuning spec file"),
    ],
)
def test_bad_iree_input_is_one_line(capsys, extra, says):
    code = main(["run", "matmul", "M=16", "N=16", "K=16", "--engine", "iree", *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and says in err, err


def test_tune_refuses_flags_of_the_own_schedules(capsys):
    argv = ["tune", "matmul", "M=16", "N=16", "K=16", "--engine", "iree", "--budget", "2"]
    assert main([*argv, "--search-threads"]) == 2
    assert "--engine iree tunes on this host alone" in capsys.readouterr().err

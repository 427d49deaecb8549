"""Where a model's time goes (`bench --dispatches`), and tune --torch's budget shared out
by it."""

from __future__ import annotations

import json

import pytest

from mlirtune.cli import main
from mlirtune.cli.tune_dispatches import allot
from mlirtune.engine import MlirJitEngine
from mlirtune.workloads.dispatch_times import dispatch_times
from mlirtune.workloads.dispatches import dispatch_workloads
from tests.torch import needs_torch, problem_workload, write_problem

pytestmark = pytest.mark.jit

# Two identical Linear + ReLU layers (one code, called twice), then a wider one.
REPEATED_LAYERS = """
import torch

batch_size = 8

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(32, 32)
        self.second = torch.nn.Linear(32, 32)
        self.last = torch.nn.Linear(32, 96)

    def forward(self, x):
        x = torch.relu(self.first(x))
        x = torch.relu(self.second(x))
        return self.last(x)

def get_inputs():
    return [torch.randn(batch_size, 32)]

def get_init_inputs():
    return []
"""


@needs_torch
def test_a_repeated_layer_is_timed_once_and_counted_per_call(tmp_path):
    workload = problem_workload(tmp_path, "layers.py", REPEATED_LAYERS)
    parts = dispatch_workloads(workload)
    times = dispatch_times(parts, MlirJitEngine(use_specs=False), max_time_s=0.02)
    assert sorted(t.calls for t in times) == [1, 2]
    assert all(t.median_s > 0 and t.scheduled for t in times)
    assert times == sorted(times, key=lambda t: t.total_s, reverse=True)


# A batch norm and two 3-D average pools, which the importer writes as generics: one
# element-wise dispatch of two generic roots, which no family takes.
NORM_AND_POOLS = """
import torch

batch_size = 2

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.ConvTranspose3d(4, 8, 3, stride=2, padding=1)
        self.norm = torch.nn.BatchNorm3d(8)
        self.pool = torch.nn.AvgPool3d(2)

    def forward(self, x):
        return self.pool(self.pool(self.norm(self.conv(x))))

def get_inputs():
    return [torch.randn(batch_size, 4, 8, 8, 8)]

def get_init_inputs():
    return []
"""


@needs_torch
def test_a_dispatch_no_family_takes_is_timed_as_the_model_lowers_it(tmp_path):
    """The model lowers it as it is (plan_dispatches); timed alone, it was planned with its
    kind's pipeline, whose family found no root op of its own, and the profile failed."""
    workload = problem_workload(tmp_path, "pools.py", NORM_AND_POOLS)
    engine = MlirJitEngine(use_specs=False)
    unscheduled = {d.function for d in engine.plan(workload).dispatches if not d.scheduled}
    several = [p for p in dispatch_workloads(workload) if len(p.roots) > 1]
    assert {p.function for p in several} <= unscheduled and several
    times = dispatch_times(several, engine, max_time_s=0.02)
    assert all(t.median_s > 0 and not t.scheduled for t in times)


@needs_torch
def test_bench_dispatches_prints_where_the_time_went(tmp_path, capsys):
    path = write_problem(tmp_path, "layers.py", REPEATED_LAYERS)
    common = ["bench", "--torch", str(path), "--max-time", "0.02", "--dispatches"]
    assert main(common) == 0
    out = capsys.readouterr().out
    assert "where the time went: 2 distinct of 3 dispatches" in out
    assert "matmul M=8 N=96 K=32" in out
    assert main([*common, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert sum(d["calls"] for d in report["dispatch_times"]) == 3


@needs_torch
def test_a_softmax_dispatch_alone_is_planned_as_in_the_model(tmp_path):
    """Its two row reductions would make a payload of its own a multi-root one, split
    again and not tunable; a dispatch keeps the pipeline of its kind."""
    softmax = REPEATED_LAYERS.replace("return self.last(x)", "return self.last(x).softmax(-1)")
    workload = problem_workload(tmp_path, "softmax.py", softmax)
    parts = dispatch_workloads(workload)
    engine = MlirJitEngine(use_specs=False)
    (last,) = [p for p in parts if p.kind == "reduction"]
    assert len(last.roots) == 2
    stages = engine.plan(last).descriptor.stages
    assert [s.name for s in stages if s.kind == "schedule"] == ["rowwise"]


def test_allot_shares_out_the_whole_budget_by_share():
    assert allot(10, {"a": 0.56, "b": 0.3, "c": 0.14}) == {"a": 5, "b": 3, "c": 2}
    assert allot(20, {"a": 0.56, "b": 0.3, "c": 0.14}) == {"a": 11, "b": 6, "c": 3}
    # Each dispatch gets the candidates it needs to be tuned, where the budget has them.
    assert allot(4, {"a": 0.9, "b": 0.1}) == {"a": 2, "b": 2}
    assert allot(3, {"a": 0.5, "b": 0.5}) in ({"a": 2, "b": 1}, {"a": 1, "b": 2})
    assert sum(allot(7, {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}).values()) == 7


@needs_torch
def test_a_problem_suite_records_and_reports_where_the_time_went(tmp_path):
    folder = tmp_path / "problems"
    folder.mkdir()
    write_problem(folder, "layers.py", REPEATED_LAYERS)
    output = tmp_path / "results.json"
    arguments = ["suite", "run", "--problems", str(folder), "-o", str(output)]
    assert main([*arguments, "--dispatch-times"]) == 0
    times = json.loads(output.read_text())["entries"]["layers"]["dispatch_times"]
    assert sorted(t["calls"] for t in times) == [1, 2]
    assert all(t["median_s"] > 0 for t in times)
    assert main(["report", str(output), "-o", str(tmp_path / "report.html")]) == 0
    html = (tmp_path / "report.html").read_text()
    assert "slowest dispatch" in html and times[0]["roots"] in html

"""`mlirtune list`: the values a run would use and where each comes from, as `bench` reports."""

import json

import pytest

from mlirtune.cli import main


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return json.loads(out)


def bench_json(capsys, *argv):
    return run_json(capsys, "bench", *argv, "--json", "--max-time", "0.01")


@pytest.mark.jit
@pytest.mark.parametrize("specs", [[], ["--no-specs"]], ids=["with-specs", "no-specs"])
@pytest.mark.parametrize(
    "workload",
    [
        ["matmul", "M=512", "N=512", "K=512"],
        ["matmul", "M=100", "N=60", "K=30"],
        ["conv2d", "H=18", "W=18", "C=8", "F=16"],
        ["softmax", "M=64", "N=128"],
    ],
    ids=lambda w: " ".join(w),
)
def test_list_agrees_with_bench_json(capsys, workload, specs):
    listed = run_json(capsys, "list", *workload, *specs, "--json")
    benched = bench_json(capsys, *workload, *specs)
    for key in ("workload", "pipeline", "parameters", "parameter_sources", "config_source"):
        assert listed[key] == benched[key], key
    assert listed["parameters"], "a scheduled workload has schedule parameters"
    assert set(listed["parameter_sources"]) == set(listed["parameters"])


def test_list_names_every_source(capsys):
    plan = run_json(capsys, "list", "matmul", "M=512", "N=512", "K=512", "--no-specs", "--json")
    sources = plan["parameter_sources"]
    # The selector picks the tiles and the loop order; the unroll factor keeps its default.
    assert sources["MR"] == sources["KC"] == sources["ORDER"] == "selector"
    assert sources["KU"] == "default"
    assert plan["config_source"] == "selector"


def test_list_of_all_workloads_prints_each_plan(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("matmul", "mlp", "batch_matmul", "conv2d", "softmax", "elementwise"):
        assert f"\n{name} " in f"\n{out}"
    assert "schedule parameters (--param): MC=" in out
    assert "(selector)" in out and "(default)" in out


def test_list_on_a_target_that_cannot_plan_a_workload_says_why(capsys):
    assert main(["list", "--target", "nvidia-gpu"]) == 0
    out = capsys.readouterr().out
    assert "schedule parameters on nvidia-gpu: none (" in out  # e.g. conv2d has no GPU schedule
    assert "block_m=" in out  # matmul does


def test_list_of_an_unknown_workload_is_one_line_error(capsys):
    assert main(["list", "gemm"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mlirtune: error:") and "gemm" in err

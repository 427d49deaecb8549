"""The command line: outputs, JSON, exit codes and one-line errors (never a traceback)."""

import importlib.util
import json

import numpy as np
import pytest

from mlirtune.cli import main
from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.gpu_program import GpuProgram
from mlirtune.runtime.cuda import device_count
from mlirtune.runtime.gpu_run import load_data
from tests.payloads import FAILING_SCHEDULE, UNRESOLVED_SYMBOL


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_list_shows_workloads_and_parameters(capsys):
    code, out, _ = run(capsys, "list")
    assert code == 0
    assert "matmul" in out and "mlp" in out and "M=256" in out and "MC=" in out


@pytest.mark.jit
def test_run_verifies(capsys):
    code, out, _ = run(capsys, "run", "matmul", "M=24", "N=40", "K=8", "--param", "MR=4")
    assert code == 0 and "verification passed" in out


@pytest.mark.jit
def test_bench_json_with_numpy_baseline(capsys):
    code, out, _ = run(
        capsys,
        "bench",
        "matmul",
        "M=32",
        "N=32",
        "K=32",
        "--baseline",
        "numpy",
        "--json",
        "--max-time",
        "0.05",
    )
    assert code == 0
    report = json.loads(out)
    for key in ("workload", "median_s", "min_s", "gflops", "verified", "samples"):
        assert key in report
    assert report["workload"]["name"] == "matmul" and report["verified"] is True
    assert set(report["baseline"]) >= {"name", "median_s", "gflops"}
    assert report["speedup_vs_baseline"] == pytest.approx(
        report["baseline"]["median_s"] / report["median_s"]
    )


@pytest.mark.jit
@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="PyTorch not installed (the bench extra)"
)
def test_bench_with_the_torch_baseline(capsys):
    code, out, _ = run(capsys, "bench", "softmax", "M=8", "N=64", "--baseline", "torch")
    assert code == 0
    assert "torch (1 thread)" in out and "speedup vs torch:" in out


@pytest.mark.jit
def test_bench_table(capsys):
    code, out, _ = run(capsys, "bench", "mlp", "M=16", "N=16", "K=16", "--max-time", "0.05")
    assert code == 0 and "GFLOP/s" in out and "verified: yes" in out


def test_opt_prints_scheduled_and_lowered_ir(capsys):
    code, out, _ = run(capsys, "opt", "matmul", "M=16", "N=16", "K=16")
    assert code == 0
    assert "after schedule" in out and "vector.fma" in out
    assert "after lower" in out and "llvm.func @payload" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "matmal"], "unknown workload 'matmal'"),
        (["run", "matmul", "Q=1"], "unknown key 'Q'"),
        (["run", "matmul", "M=0"], "M must be positive"),
        (["run", "matmul", "M=-4"], "M must be positive"),
        (["run", "matmul", "M=1.5"], "M='1.5' is not an integer"),
        (["run", "matmul", "M"], "'M' is not KEY=VALUE"),
        (["run", "matmul", "--param", "XX=2"], "unknown parameter(s) XX"),
        (["run", "matmul", "--param", "MR=two"], "MR='two' is not an integer"),
        (["run"], "name a workload"),
        (["bench", "matmul", "dtype=f8"], "dtype='f8' is not one of"),
    ],
)
def test_bad_input_is_one_clear_line_with_exit_2(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert_one_error_line(err, message)


def assert_one_error_line(err: str, message: str) -> None:
    """Exactly one error line, the last one (warnings, if any, come before it)."""
    lines = err.strip().splitlines()
    assert [line for line in lines if line.startswith("mlirtune: error:")] == lines[-1:]
    assert message in lines[-1]


@pytest.mark.jit
def test_warnings_come_before_the_error_line(capsys, monkeypatch):
    """A warning raised on the way (here a stale user spec entry would be one) never
    pushes the error off the last line."""
    import warnings

    from mlirtune.cli import kernel

    def warn_then_fail(args):
        warnings.warn("something the user should know", UserWarning, stacklevel=1)
        raise UsageError("bad input", stage="test")

    monkeypatch.setattr(kernel, "cmd_run", warn_then_fail)
    code, _, err = run(capsys, "run", "matmul")
    assert code == 2
    assert err.splitlines()[0] == "mlirtune: warning: something the user should know"
    assert_one_error_line(err, "[test] bad input")


@pytest.fixture
def payload_dir(matmul_files):
    (matmul_files / "bad.mlir").write_text("func.func @f() {\n  %x = arith.addf %y, %y : f32\n}\n")
    (matmul_files / "sched.mlir").write_text(FAILING_SCHEDULE)
    (matmul_files / "jit.mlir").write_text(UNRESOLVED_SYMBOL)
    return matmul_files


def run_matmul_file(capsys, d, expect: str):
    return run(
        capsys,
        "run",
        "--payload",
        str(d / "mm.mlir"),
        "--entry",
        "mm",
        "--inputs",
        f"{d / 'a.npy'},{d / 'b.npy'}",
        "--expect",
        str(d / expect),
    )


def test_run_payload_file(capsys, payload_dir):
    code, out, _ = run_matmul_file(capsys, payload_dir, "c.npy")
    assert code == 0 and "verification passed" in out


def test_failed_verification_exits_1_with_statistics(capsys, payload_dir):
    code, out, _ = run_matmul_file(capsys, payload_dir, "wrong.npy")
    assert code == 1
    assert "verification FAILED" in out and "max abs error" in out and "arg2[" in out


def test_all_zero_expected_output_has_no_relative_error(capsys, payload_dir):
    np.save(payload_dir / "zeros.npy", np.zeros((16, 32), np.float32))
    code, out, _ = run_matmul_file(capsys, payload_dir, "zeros.npy")
    assert code == 1 and "max rel error n/a" in out and "e+30" not in out


@pytest.mark.jit
def test_bench_of_a_payload_without_flop_count_says_na(capsys, payload_dir):
    argv = ["bench", "--payload", str(payload_dir / "mm.mlir"), "--entry", "mm"]
    code, out, _ = run(capsys, *argv, "--max-time", "0.05")
    assert code == 0 and "n/a GFLOP/s" in out and " 0.00 GFLOP/s" not in out
    code, out, _ = run(capsys, *argv, "--max-time", "0.05", "--json")
    assert code == 0 and json.loads(out)["gflops"] is None


@pytest.mark.jit
def test_malformed_mlir_shows_file_and_line(capsys, payload_dir):
    code, _, err = run(capsys, "run", "--payload", str(payload_dir / "bad.mlir"), "--entry", "f")
    assert code == 2 and "[parse]" in err and "bad.mlir:2:" in err


@pytest.mark.jit
def test_missing_entry_function(capsys, payload_dir):
    code, _, err = run(capsys, "run", "--payload", str(payload_dir / "mm.mlir"), "--entry", "nope")
    assert code == 2 and "entry function @nope not found; it defines @mm" in err


@pytest.mark.jit
def test_schedule_failure_names_the_transform_op(capsys, payload_dir):
    d = payload_dir
    code, _, err = run(
        capsys,
        "run",
        "--payload",
        str(d / "mm.mlir"),
        "--entry",
        "mm",
        "--schedule",
        str(d / "sched.mlir"),
    )
    assert code == 2 and "[schedule]" in err
    assert "sched.mlir:5:" in err and "too many tiles provided" in err


@pytest.mark.jit
def test_jit_failure(capsys, payload_dir):
    code, _, err = run(capsys, "run", "--payload", str(payload_dir / "jit.mlir"), "--entry", "f")
    assert code == 2 and "[jit]" in err


@pytest.mark.jit
def test_help_teaches(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    assert "--baseline" in out and "examples:" in out and "KEY=VALUE" in out


@pytest.mark.jit
def test_bench_json_reports_parameter_sources(capsys):
    code, out, _ = run(
        capsys,
        "bench",
        "matmul",
        "M=32",
        "N=32",
        "K=32",
        "--param",
        "MR=4",
        "--json",
        "--max-time",
        "0.05",
    )
    report = json.loads(out)
    assert code == 0
    assert report["parameters"]["MR"] == 4 and report["parameter_sources"]["MR"] == "explicit"
    assert report["config_source"] == "explicit"
    assert set(report["parameter_sources"].values()) <= {
        "explicit",
        "selector",
        "default",
        "target",
    }
    assert "selector" in report["parameter_sources"].values()
    assert report["pipeline"].endswith("matmul.yaml") and report["target"] == "host"


def test_pipelines_lists_descriptors_and_search_order(capsys):
    code, out, _ = run(capsys, "pipelines")
    assert code == 0 and "x86_64/matmul" in out and "generic/lower_cpu" in out
    assert "search order on host:" in out


@pytest.mark.jit
def test_explicit_pipeline_by_name_and_unknown_name(capsys):
    code, out, _ = run(
        capsys, "run", "matmul", "M=16", "N=16", "K=16", "--pipeline", "generic/default"
    )
    assert code == 0 and "verification passed" in out
    code, _, err = run(capsys, "run", "matmul", "--pipeline", "nope")
    assert code == 2 and "no pipeline descriptor for nope" in err


@pytest.mark.jit
def test_nvidia_target_compiles_to_ptx_and_saves_programs(capsys, tmp_path):
    code, out, _ = run(capsys, "opt", "matmul", "M=32", "N=32", "K=32", "--target", "nvidia-gpu")
    assert code == 0 and "after ptx" in out and ".entry" in out
    path = tmp_path / "mm.json"
    argv = ("opt", "matmul", "M=8", "N=16", "K=4", "--target", "nvidia-gpu", "--program", path)
    code, out, _ = run(capsys, *map(str, argv))
    assert code == 0 and f"python -m mlirtune.cli.gpu_run {path}" in out
    assert sorted(GpuProgram.load(path).launches[0].arguments) == [0, 1, 2]
    data = load_data(path)
    np.testing.assert_allclose(data["A"] @ data["B"], data["C"], rtol=1e-5)
    code, _, err = run(capsys, "opt", "matmul", "--program", str(path))
    assert code == 2 and "add --target nvidia-gpu" in err


@pytest.mark.skipif(device_count() > 0, reason="this host has a GPU")
def test_nvidia_target_without_a_gpu_says_why(capsys):
    code, _, err = run(capsys, "run", "matmul", "--target", "nvidia-gpu")
    assert code == 2 and "no CUDA device 0 to run on" in err


@pytest.mark.jit
def test_params_outside_the_space_run_with_a_warning_naming_the_constraints(capsys):
    code, out, err = run(capsys, "run", "matmul", "M=64", "N=64", "K=64", "--param", "MR=16",
                         "--param", "NR=64")  # fmt: skip
    assert code == 0 and "verification passed" in out
    # The list also names NR_domain where 64 columns are more than four vectors (AVX2).
    (warning,) = [line for line in err.splitlines() if "the --param values break" in line]
    assert warning.startswith("warning:") and "register_budget" in warning
    code, _, err = run(capsys, "run", "matmul", "M=64", "N=64", "K=64", "--param", "MR=4")
    assert code == 0 and "warning" not in err

"""Payloads of several root ops are split into dispatches, each scheduled by its own kind's
pipeline: MLIR files and imported PyTorch modules alike, tuned dispatch by dispatch."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from mlirtune.cli import main

pytestmark = pytest.mark.jit
HAS_TORCH = all(importlib.util.find_spec(m) is not None for m in ("torch", "torch_mlir"))
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="the torch extra is not installed")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "torch"

# relu(A @ B + bias) @ E: two matmul roots, the bias and ReLU fused to the first.
TWO_MATMULS = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @payload(%a: memref<24x40xf32>, %b: memref<40x32xf32>, %bias: memref<32xf32>,
                   %e: memref<32x16xf32>, %out: memref<24x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %ta = bufferization.to_tensor %a restrict : memref<24x40xf32> to tensor<24x40xf32>
  %tb = bufferization.to_tensor %b restrict : memref<40x32xf32> to tensor<40x32xf32>
  %tbias = bufferization.to_tensor %bias restrict : memref<32xf32> to tensor<32xf32>
  %te = bufferization.to_tensor %e restrict : memref<32x16xf32> to tensor<32x16xf32>
  %empty = tensor.empty() : tensor<24x32xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<24x32xf32>) -> tensor<24x32xf32>
  %c = linalg.matmul ins(%ta, %tb : tensor<24x40xf32>, tensor<40x32xf32>)
                     outs(%init : tensor<24x32xf32>) -> tensor<24x32xf32>
  %act = linalg.generic
      {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %tbias : tensor<24x32xf32>, tensor<32xf32>) outs(%empty : tensor<24x32xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<24x32xf32>
  %empty2 = tensor.empty() : tensor<24x16xf32>
  %init2 = linalg.fill ins(%zero : f32) outs(%empty2 : tensor<24x16xf32>) -> tensor<24x16xf32>
  %d = linalg.matmul ins(%act, %te : tensor<24x32xf32>, tensor<32x16xf32>)
                     outs(%init2 : tensor<24x16xf32>) -> tensor<24x16xf32>
  bufferization.materialize_in_destination %d in restrict writable %out
      : (tensor<24x16xf32>, memref<24x16xf32>) -> ()
  return
}
"""


def test_an_mlir_file_of_two_matmuls_runs_as_two_scheduled_dispatches(tmp_path, capsys):
    rng = np.random.default_rng(0)
    arrays = {
        name: rng.uniform(-1, 1, shape).astype(np.float32)
        for name, shape in (("a", (24, 40)), ("b", (40, 32)), ("bias", (32,)), ("e", (32, 16)))
    }
    expected = np.maximum(arrays["a"] @ arrays["b"] + arrays["bias"], 0) @ arrays["e"]
    for name, array in {**arrays, "out": expected}.items():
        np.save(tmp_path / f"{name}.npy", array)
    (tmp_path / "two.mlir").write_text(TWO_MATMULS)
    inputs = ",".join(str(tmp_path / f"{n}.npy") for n in arrays)
    expect = ["--expect", str(tmp_path / "out.npy"), "--no-specs"]
    code = main(["run", "--payload", str(tmp_path / "two.mlir"), "--inputs", inputs, *expect])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "dispatches: 2, 0 lowered untuned" in out
    assert "dispatch_0_matmul" in out and "dispatch_1_matmul" in out
    assert "verification passed" in out


def test_schedule_parameters_on_a_split_payload_are_refused(tmp_path, capsys):
    (tmp_path / "two.mlir").write_text(TWO_MATMULS)
    code = main(["run", "--payload", str(tmp_path / "two.mlir"), "--param", "MR=4"])
    assert code == 2
    assert "splits this payload into dispatches" in capsys.readouterr().err


def test_a_dispatch_stage_names_what_it_splits_by(tmp_path):
    from mlirtune.pipeline.descriptor import DescriptorError, load_descriptor

    path = tmp_path / "bad.yaml"
    path.write_text("description: x\nstages:\n  - dispatch: layers\n")
    with pytest.raises(DescriptorError, match="dispatch 'layers': a payload is split by roots"):
        load_descriptor(path)


@needs_torch
@pytest.mark.parametrize(
    ("example", "kinds"), [("mlp_block", {"matmul"}), ("resnet_block", {"conv2d"})]
)
def test_example_modules_schedule_their_heavy_dispatches(example, kinds):
    from mlirtune.api import engine_for
    from mlirtune.targets.host_cpu import HostCPU
    from mlirtune.torch.factory import workload_from_factory

    workload = workload_from_factory(f"{EXAMPLES / example}.py:make")
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok
    dispatches = result.extra["dispatches"]
    heavy = [d for d in dispatches if d["kind"] in kinds]
    assert heavy and all(d["scheduled"] and d["config_source"] == "selector" for d in heavy)


SMALL_MLP = """
import torch

def make():
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32))
    return block, (torch.randn(16, 32),)
"""


def _tune_small_mlp(tmp_path, budget: int) -> tuple[int, Path, str]:
    """`tune --torch` on SMALL_MLP into tmp_path/specs.mlir: exit code, library, factory."""
    factory = tmp_path / "small.py"
    factory.write_text(SMALL_MLP)
    library = tmp_path / "specs.mlir"
    output = ["--update-spec", str(library), "--db", str(tmp_path / "t.db")]
    tune = ["tune", "--torch", f"{factory}:make", "--budget", str(budget), "--workers", "1"]
    return main([*tune, *output]), library, f"{factory}:make"


@needs_torch
def test_tune_torch_writes_a_spec_per_dispatch_that_the_whole_module_applies(tmp_path, capsys):
    code, library, factory = _tune_small_mlp(tmp_path, budget=4)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "2 dispatches, 2 distinct with a schedule family" in captured.err
    assert "too few candidates" not in captured.err  # each has 2 of the 4
    assert "speedup vs torch eager" in captured.out
    assert main(["run", "--torch", factory, "--spec", str(library)]) == 0
    out = capsys.readouterr().out
    assert out.count("matmul, spec:specs:") == 2 and "verification passed" in out


@needs_torch
def test_tune_torch_leaves_a_dispatch_given_too_few_candidates_to_its_selector(tmp_path, capsys):
    code, library, _ = _tune_small_mlp(tmp_path, budget=1)
    err = capsys.readouterr().err
    assert code == 0, err
    assert "2 distinct dispatches (100.0% of the time): too few candidates" in err
    assert "nothing tuned" in err
    assert not library.exists()


@needs_torch
def test_tune_torch_goes_on_past_a_dispatch_whose_baseline_fails(tmp_path, capsys, monkeypatch):
    """A dispatch whose selector config fails alone (the model's compile drops it to the
    next path) is left untuned, with the reason; the other one is still tuned."""
    from mlirtune.interfaces.errors import BaselineFailed
    from mlirtune.tune import tuner

    calls = []
    measured = tuner._baseline

    def first_fails(problem, db, outcome):
        calls.append(problem.key)
        if len(calls) == 1:
            raise BaselineFailed("the baseline config failed: test", stage="tune")
        return measured(problem, db, outcome)

    monkeypatch.setattr(tuner, "_baseline", first_fails)
    code, library, factory = _tune_small_mlp(tmp_path, budget=4)
    err = " ".join(capsys.readouterr().err.split())  # unwrapped
    assert code == 0, err
    assert err.count("left untuned: [tune] the baseline config failed: test") == 1
    assert main(["run", "--torch", factory, "--spec", str(library)]) == 0
    assert capsys.readouterr().out.count("matmul, spec:specs:") == 1


@needs_torch
def test_tune_torch_needs_a_library_to_write(tmp_path, capsys):
    factory = tmp_path / "small.py"
    factory.write_text(SMALL_MLP)
    assert main(["tune", "--torch", f"{factory}:make", "--budget", "2"]) == 2
    assert "give --update-spec LIB.mlir" in capsys.readouterr().err


@needs_torch
def test_a_small_encoder_layer_verifies_with_its_head_transposes_scheduled():
    import runpy

    from mlirtune.api import engine_for
    from mlirtune.targets.host_cpu import HostCPU
    from mlirtune.torch import workload

    namespace = runpy.run_path(str(EXAMPLES / "encoder_layer.py"))
    torch = namespace["torch"]
    torch.manual_seed(0)
    layer = namespace["EncoderLayer"](hidden=32, heads=2, inner=64)
    result = engine_for(HostCPU(), use_specs=False).execute(workload(layer, (torch.randn(8, 32),)))
    assert result.verification.ok
    kinds = {d["kind"] for d in result.extra["dispatches"] if d["scheduled"]}
    assert {"matmul", "batch_matmul", "elementwise"} <= kinds


@needs_torch
def test_a_class_token_and_its_normed_row_leave_no_schedule_failing():
    """A ViT's head: the class token concatenated to the patches (no schedule fuses through
    a concat) and the token's row sliced from the final layer norm (no reduction schedule
    tiles a slice as its last op) each open a dispatch of their own."""
    import torch

    from mlirtune.api import engine_for
    from mlirtune.targets.host_cpu import HostCPU
    from mlirtune.torch import workload

    class Head(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.token = torch.nn.Parameter(torch.randn(1, 1, 32))
            self.position = torch.nn.Parameter(torch.randn(1, 17, 32))
            self.norm = torch.nn.LayerNorm(32)

        def forward(self, patches):
            tokens = patches.flatten(2).transpose(1, 2)
            tokens = torch.cat([self.token.expand(tokens.shape[0], -1, -1), tokens], dim=1)
            return self.norm(tokens + self.position)[:, 0]

    torch.manual_seed(0)
    module = Head()
    result = engine_for(HostCPU(), use_specs=False).execute(
        workload(module, (torch.randn(1, 32, 4, 4),))
    )
    assert result.verification.ok
    dispatches = result.extra["dispatches"]
    failed = [d for d in dispatches if any("schedule failed" in n for n in d["notes"])]
    assert not failed, failed
    assert {"elementwise", "reduction"} <= {d["kind"] for d in dispatches if d["scheduled"]}

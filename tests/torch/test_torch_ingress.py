"""PyTorch ingress: modules imported through torch.export and torch-mlir run and verify
against torch eager, and every bad input is a clean error. Skipped without the torch extra."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

from mlirtune.api import engine_for
from mlirtune.cli import main
from mlirtune.interfaces.errors import UsageError
from mlirtune.targets.host_cpu import HostCPU
from tests.torch import needs_torch, problem_workload

pytestmark = [
    pytest.mark.jit,
    needs_torch,
]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "torch"

if importlib.util.find_spec("torch") is not None:
    import torch

    import mlirtune.torch as mt

    class TransposedMatmul(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a.t() @ b.t()

    class Rolled(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.roll(x, shifts=(1, -2), dims=(1, 2)) * 2  # a Swin block's shift

    class SequenceFirst(torch.nn.Module):
        """Projections of a batch-first input transposed to [L, N, E], as a batch-first
        attention makes them: a Linear layer's and a plain product with a matrix."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(16, 24)
            self.matrix = torch.nn.Parameter(torch.randn(16, 24))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            sequence_first = x.transpose(0, 1)
            return self.linear(sequence_first) - sequence_first @ self.matrix

    class Branchy(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2 if x.sum() > 0 else x - 1  # data-dependent: torch.export refuses

    class NonZero(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nonzero(x)  # a result of data-dependent shape

    class Spectrum(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.fft.rfft(x).abs()  # torch-mlir has no lowering to linalg for it

    class Scaled(torch.nn.Module):
        def forward(self, x: torch.Tensor, scale: float, shift: int) -> torch.Tensor:
            return x * scale + shift


def verified(workload) -> bool:
    return engine_for(HostCPU(), use_specs=False).execute(workload).verification.ok


def single_ops():
    torch.manual_seed(0)
    return {
        "linear": (torch.nn.Linear(48, 32), (torch.randn(8, 48),)),
        "conv2d": (torch.nn.Conv2d(8, 16, 3, padding=1), (torch.randn(1, 8, 12, 12),)),
        "softmax": (torch.nn.Softmax(dim=-1), (torch.randn(16, 100),)),
        # Rows of rows (attention scores per head), partial row and column tiles.
        "softmax-3d": (torch.nn.Softmax(dim=-1), (torch.randn(3, 10, 200),)),
        "layernorm": (torch.nn.LayerNorm(64), (torch.randn(8, 64),)),
        "matmul-transposed": (TransposedMatmul(), (torch.randn(24, 16), torch.randn(40, 24))),
        "roll": (Rolled(), (torch.randn(2, 9, 10, 4),)),
        "reflect-pad": (torch.nn.ReflectionPad2d((9, 1, 0, 3)), (torch.randn(2, 3, 6, 12),)),
        "replicate-pad": (torch.nn.ReplicationPad3d(1), (torch.randn(1, 2, 3, 4, 5),)),
        "sequence-first": (SequenceFirst(), (torch.randn(3, 20, 16),)),
    }


@pytest.mark.parametrize(
    "name",
    [
        "linear", "conv2d", "softmax", "softmax-3d", "layernorm", "matmul-transposed", "roll",
        "reflect-pad", "replicate-pad", "sequence-first",
    ],
)  # fmt: skip
def test_single_ops_import_and_verify_against_torch_eager(name):
    module, inputs = single_ops()[name]
    workload = mt.workload(module, inputs)
    assert verified(workload)
    # Our own check beside the verifier's: the kernel's output is torch's, within f32 noise.
    engine = engine_for(HostCPU(), use_specs=False)
    kernel = engine.compile(workload)
    with workload.allocate(engine) as buffers:
        kernel.call(buffers)
        ours = engine.runtime.to_host(buffers[-1]).copy()
    with torch.no_grad():
        theirs = module(*inputs).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["reflect-pad", "replicate-pad"])
def test_padded_borders_are_joined_slices_not_gathers(name):
    """A reflected or replicated border is copied from slices of the input: no element is
    read through an index computed in the body (torch's own decomposition does that)."""
    from mlir import ir

    module, inputs = single_ops()[name]
    with ir.Context(), ir.Location.unknown():
        names = []
        payload = mt.workload(module, inputs).payload_module()
        payload.operation.walk(lambda op: names.append(op.name) or ir.WalkResult.ADVANCE)
    assert "tensor.concat" in names and "tensor.extract" not in names, sorted(set(names))


def test_a_roll_is_joined_from_its_static_slices():
    """torch-mlir casts a roll's two slices to a dynamic type before joining them; the
    join reads the static slices, so no value of unknown size is left to buffer."""
    from mlir import ir

    module, inputs = single_ops()["roll"]
    with ir.Context(), ir.Location.unknown():
        payload = mt.workload(module, inputs).payload_module()
        shaped = []
        payload.operation.walk(
            lambda op: (
                shaped.extend(r.type for r in op.results if isinstance(r.type, ir.ShapedType))
                or ir.WalkResult.ADVANCE
            )
        )
        names = []
        payload.operation.walk(lambda op: names.append(op.name) or ir.WalkResult.ADVANCE)
    assert names.count("tensor.concat") == 2 and "tensor.cast" not in names
    assert all(ir.ShapedType(t).has_static_shape for t in shaped)


def test_a_transposed_input_times_a_matrix_is_one_matrix_product():
    """torch's own decomposition took it as a batched product with the matrix copied to
    every batch (a cross-attention's projections ran at 0.2x eager); the import copies the
    input's rows once and makes one matrix product."""
    from mlir import ir

    module, inputs = single_ops()["sequence-first"]
    with ir.Context(), ir.Location.unknown():
        payload = mt.workload(module, inputs).payload_module()
        names = []
        payload.operation.walk(lambda op: names.append(op.name) or ir.WalkResult.ADVANCE)
    assert "linalg.batch_matmul" not in names
    assert names.count("linalg.matmul") == 2


@pytest.mark.parametrize("threads", [1, 2] if (os.cpu_count() or 1) > 1 else [1])
def test_a_softmax_over_rows_of_rows_is_scheduled(threads):
    module, inputs = single_ops()["softmax-3d"]
    result = engine_for(HostCPU(threads=threads)).execute(mt.workload(module, inputs))
    assert result.verification.ok
    assert [d["scheduled"] for d in result.extra["dispatches"]] == [True]


def test_weights_are_inputs_by_default_or_constants_on_request():
    module, inputs = single_ops()["linear"]
    as_inputs = mt.workload(module, inputs)
    assert [a.name for a in as_inputs.arguments()] == ["weight", "bias", "input0", "output0"]
    as_constants = mt.workload(module, inputs, weights="constants")
    assert [a.name for a in as_constants.arguments()] == ["input0", "output0"]
    assert verified(as_constants)
    flops = as_inputs.get_complexity().flops
    assert flops == 2 * 8 * 32 * 48  # the matmul root's multiply-adds


@pytest.mark.parametrize("example", ["mlp_block", "resnet_block"])
def test_examples_import_and_verify(example, capsys):
    assert main(["run", "--torch", f"{EXAMPLES / example}.py:make"]) == 0
    assert "verification passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("module", "inputs", "message"),
    [
        ("branchy", (4,), r"Branchy cannot be imported \(torch.export"),
        ("nonzero", (4,), r"NonZero: aten.nonzero.default at .* shape depends on the input's"),
        ("linear", (7,), r"Linear fails on its example inputs: RuntimeError"),
        # torch-mlir's own diagnostic, and the line of this file that made the op.
        ("spectrum", (8,), r"linalg\): .*complex<f32>.* at test_torch_ingress.py:\d+$"),
    ],
)
def test_modules_that_cannot_be_imported_are_clean_errors(module, inputs, message):
    made = {
        "branchy": Branchy(),
        "nonzero": NonZero(),
        "linear": torch.nn.Linear(4, 2),
        "spectrum": Spectrum(),
    }[module]
    with pytest.raises(UsageError, match=message) as error:
        mt.workload(made, (torch.randn(3, *inputs),))
    assert error.value.stage == "torch"


def test_python_numbers_among_the_inputs_are_constants():
    """A problem file's `get_inputs()` may return a scale beside its tensors: the numbers
    are baked in, the tensors alone are inputs, and eager runs with the numbers bound."""
    workload = mt.workload(Scaled(), (torch.randn(4, 8), 2.5, 3))
    assert workload.imported.input_names == ("input0",)
    assert verified(workload)
    with pytest.raises(UsageError, match="Scaled: example input 1 is a str"):
        mt.workload(Scaled(), (torch.randn(4, 8), "2.5", 3))
    with pytest.raises(UsageError, match="Scaled: the example inputs hold no tensor"):
        mt.workload(Scaled(), (1.0, 2.5, 3))


def test_the_memory_estimate_holds_torchs_outputs_as_they_are():
    """The reference is torch eager's own f32 outputs, held since the import: no float64
    copy and no reference temporaries (a 2.5 GiB MLP was refused for 5 GiB of them)."""
    from mlirtune.memory import estimate

    workload = mt.workload(torch.nn.Linear(1024, 512), (torch.randn(2, 1024),))
    parts = dict(estimate(workload).parts)
    assert parts["reference outputs"] == 2 * 512 * 4
    assert parts.get("reference temporaries", 0) == 0
    assert parts.get("input generation temporaries", 0) == 0


def test_cli_torch_factories_that_fail_are_exit_2(tmp_path, capsys):
    factory = tmp_path / "model.py"
    factory.write_text(
        "import torch\ndef make():\n    return torch.nn.Linear(4, 2), (torch.randn(3, 4),)\n"
    )
    assert main(["run", "--torch", f"{factory}:make"]) == 0
    capsys.readouterr()
    for spec, message in [
        (f"{factory}:build", "no function 'build'; its functions: make"),
        (f"{tmp_path / 'none.py'}:make", "none.py: no such file"),
        (str(factory), "give FILE.py:FACTORY"),
    ]:
        assert main(["run", "--torch", spec]) == 2
        assert message in capsys.readouterr().err


def test_a_missing_extra_says_what_to_install(monkeypatch):
    from mlirtune.torch import importer

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importer.importlib.util,
        "find_spec",
        lambda name: None if name == "torch_mlir" else real(name),
    )
    with pytest.raises(UsageError, match=r"needs torch_mlir.*pip install -e '\.\[torch\]'"):
        importer.require_torch()


SCALED = """
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x * {scale}


def get_inputs():
    return [torch.randn({rows}, 16)]


def get_init_inputs():
    return []
"""


def test_two_modules_of_one_class_name_compile_apart(tmp_path, engine):
    """One engine, two modules both named Model: each gets a kernel of its own (the cache
    keys the imported IR, not the class name alone)."""
    for rows, scale in ((4, 2.0), (8, 3.0)):
        text = SCALED.format(rows=rows, scale=scale)
        workload = problem_workload(tmp_path, f"scaled_{rows}.py", text)
        assert engine.execute(workload).verification.ok

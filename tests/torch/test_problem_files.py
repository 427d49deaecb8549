"""What users bring as they bring it: problem files in KernelBench's convention (`Model`,
`get_inputs`, `get_init_inputs`), masks (boolean tensors), folders of problems run as a
suite, and schedules that fail on what they were given. Skipped without the torch extra."""

from __future__ import annotations

import json

import pytest
from mlir import ir

from mlirtune.api import engine_for
from mlirtune.cli import main
from mlirtune.interfaces.errors import MlirtuneError
from mlirtune.ir.inspect import ops_named
from mlirtune.targets.host_cpu import HostCPU
from mlirtune.workloads import Matmul
from tests.torch import needs_torch, problem_workload, write_problem

pytestmark = [
    pytest.mark.jit,
    needs_torch,
]

GEMM_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.act = nn.LeakyReLU(0.1)

    def forward(self, x):
        y = self.act(self.linear(x))
        return y * 0.5 + y


batch_size = 16
features = 64


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
"""

# Masks everywhere: a boolean input, a boolean buffer (a constant), a mask reduced across
# a dimension (stored between two ops) and boolean outputs.
MASK_PROBLEM = """
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        keep = torch.tensor([True, False, True, True, False, True, False, True])
        self.register_buffer("keep", keep)

    def forward(self, x, mask):
        both = mask & self.keep
        return torch.where(both, x, -x).sum(dim=1), both.any(dim=1), x[:, 0] > 0


batch_size = 4


def get_inputs():
    return [torch.randn(batch_size, 8), torch.rand(batch_size, 8) > 0.5]


def get_init_inputs():
    return []
"""

DATA_DEPENDENT_PROBLEM = """
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x[x > 0]


batch_size = 8


def get_inputs():
    return [torch.randn(batch_size)]


def get_init_inputs():
    return []
"""


def test_a_problem_file_runs_with_no_factory_name(tmp_path, capsys):
    problem = write_problem(tmp_path, "gemm_leaky.py", GEMM_PROBLEM)
    assert main(["run", "--torch", str(problem)]) == 0
    out = capsys.readouterr().out
    assert "verification passed" in out
    assert "schedule failed" not in out  # the Linear's epilogue fused whole, as one


def test_batch_sets_the_files_batch_size_before_its_inputs_are_made(tmp_path):
    from mlirtune.torch.factory import workload_from_factory

    problem = write_problem(tmp_path, "gemm_leaky.py", GEMM_PROBLEM)
    shapes = {
        batch: [a.shape for a in workload_from_factory(str(problem), batch).arguments()]
        for batch in (None, 3)
    }
    assert shapes[None][-2:] == [(16, 64), (16, 64)]  # the input and the output
    assert shapes[3][-2:] == [(3, 64), (3, 64)]


@pytest.mark.parametrize(
    ("source", "arguments", "message"),
    [
        (GEMM_PROBLEM, [":make"], "no function 'make'"),
        ("def make():\n    return None\n", [":make", "--batch", "2"], "--batch applies to"),
        ("batch_size = 2\n", [], "no Model, get_inputs, get_init_inputs"),
        (
            GEMM_PROBLEM.replace("batch_size = 16", "rows = 16"),
            ["--batch", "2"],
            "needs a module-level batch_size",
        ),
        (GEMM_PROBLEM.replace("[features]", "[features, 1]"), [], "Model(): TypeError"),
    ],
)
def test_problem_files_that_cannot_be_run_are_one_line(
    tmp_path, capsys, source, arguments, message
):
    problem = write_problem(tmp_path, "problem.py", source)
    first, rest = (arguments[0], arguments[1:]) if arguments[:1] == [":make"] else ("", arguments)
    assert main(["run", "--torch", f"{problem}{first}", *rest]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_batch_without_a_problem_file_is_refused(capsys):
    assert main(["run", "matmul", "--batch", "4"]) == 2
    assert "--batch applies to --torch problem files" in capsys.readouterr().err


def test_masks_are_stored_a_byte_per_element(tmp_path):

    workload = problem_workload(tmp_path, "masks.py", MASK_PROBLEM)
    outputs = [a for a in workload.arguments() if a.is_output]
    assert [a.dtype.name for a in outputs] == ["f32", "i8", "i8"]
    engine = engine_for(HostCPU(), use_specs=False)
    assert engine.execute(workload).verification.ok
    # The eager baseline still gets torch's booleans, not bytes.
    baseline = workload.torch_baseline()
    assert baseline is not None
    assert str(baseline()[1].dtype) == "torch.bool"


def test_a_mask_between_two_ops_is_stored_as_bytes():
    """Attention's all-masked-rows check reduces a mask across a row: the reduced mask is
    a buffer of its own (memref-to-LLVM asserted on one of i1)."""
    import torch

    import mlirtune.torch as mt

    class Attention(torch.nn.Module):
        def forward(self, q, k, v):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    torch.manual_seed(0)
    inputs = tuple(torch.randn(1, 2, 16, 8) for _ in range(3))
    workload = mt.workload(Attention(), inputs)
    assert engine_for(HostCPU(), use_specs=False).execute(workload).verification.ok


def test_a_folder_of_problems_runs_as_a_suite(tmp_path, capsys):
    folder = tmp_path / "problems"
    folder.mkdir()
    write_problem(
        folder, "gemm_leaky.py", GEMM_PROBLEM.replace("batch_size = 16", "batch_size = 4")
    )
    write_problem(folder, "masks.py", MASK_PROBLEM)
    write_problem(folder, "data_dependent.py", DATA_DEPENDENT_PROBLEM)
    output = tmp_path / "results.json"
    arguments = ["suite", "run", "--problems", str(folder), "-o", str(output), "--batch", "2"]
    assert main(arguments) == 0
    assert "ok 2, refused 1" in capsys.readouterr().out
    entries = json.loads(output.read_text())["entries"]
    assert {name: e["status"] for name, e in entries.items()} == {
        "data_dependent": "refused",
        "gemm_leaky": "ok",
        "masks": "ok",
    }
    assert "shape depends on the input's values" in entries["data_dependent"]["error"]
    assert set(entries["gemm_leaky"]["baselines"]) == {"torch"}
    assert entries["gemm_leaky"]["workload"]["name"] == "torch"
    # Run again: nothing left to do, nothing lost.
    assert main(arguments) == 0
    assert json.loads(output.read_text())["entries"] == entries


def test_problems_and_a_suite_are_one_or_the_other(tmp_path, capsys):
    assert main(["suite", "run", "smoke", "--problems", str(tmp_path), "-o", "x.json"]) == 2
    assert "give a suite, or --problems DIR" in capsys.readouterr().err
    assert main(["suite", "run", "--problems", str(tmp_path), "-o", "x.json"]) == 2
    assert "no problem files" in capsys.readouterr().err


FAILING_SCHEDULE = """
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %matmul = transform.structured.match ops{["linalg.matmul"]} in %root
      : (!transform.any_op) -> !transform.any_op
    %tiled, %loops:4 = transform.structured.tile_using_for %matmul tile_sizes [4, 4, 4, 4]
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op,
         !transform.any_op, !transform.any_op)
    transform.yield
  }
}
"""


class BrokenSchedule(Matmul):
    """A matmul whose schedule fails to apply, as a family's might on a shape it missed."""

    def schedule_module(self, parameters=None, target=None, lowering=None) -> ir.Module:
        return ir.Module.parse(FAILING_SCHEDULE)


def test_a_schedule_that_fails_drops_to_the_next_path_with_a_note():
    """The next path is the payload split into dispatches, each scheduled by its family."""
    workload = BrokenSchedule(M=16, N=24, K=8)
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok
    notes = " ".join(result.extra["notes"])
    assert "its schedule failed (" in notes
    assert "too many tiles provided" in notes
    assert "split into dispatches" in notes
    assert [d["scheduled"] for d in result.extra["dispatches"]] == [True]


def test_a_schedule_that_fails_on_parameters_the_user_gave_is_their_error():
    workload = BrokenSchedule(M=16, N=24, K=8)
    with pytest.raises(MlirtuneError, match="too many tiles") as error:
        engine_for(HostCPU(), use_specs=False).execute(workload, {"MR": 4})
    assert error.value.stage == "schedule"


RESIDUAL_PROBLEM = """
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(64, 64)

    def forward(self, x):
        return x + torch.nn.functional.silu(self.linear(x))


batch_size = 4


def get_inputs():
    return [torch.randn(batch_size, 8, 64)]


def get_init_inputs():
    return []
"""


def test_a_linear_on_tokens_is_one_matmul_with_its_epilogue_in_one_pass(tmp_path):
    """[batch, tokens, features]: fusion moves the reshapes into the contraction; it comes
    back a 2-D matmul whose bias, SiLU and residual run on its tiles, so the lowered IR
    allocates no buffer for the matmul's result (one pass over memory)."""

    workload = problem_workload(tmp_path, "residual.py", RESIDUAL_PROBLEM)
    engine = engine_for(HostCPU(), use_specs=False)
    result = engine.execute(workload)
    assert result.verification.ok
    assert result.extra["config_source"] == "selector"
    assert not [n for n in result.extra["notes"] if "schedule failed" in n]
    with ir.Context(), ir.Location.unknown():
        lowered = engine.lower_payload(workload)
        allocs = ops_named(lowered.operation, "memref.alloc")
        shapes = [ir.MemRefType(op.results[0].type).shape for op in allocs]
    assert [32, 64] not in shapes and [4, 8, 64] not in shapes, shapes


EMBEDDING_PROBLEM = """
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(64, 16)
        self.linear = torch.nn.Linear(16, 32)

    def forward(self, ids):
        return torch.relu(self.linear(self.embedding(ids)))


batch_size = 2


def get_inputs():
    return [torch.randint(0, 64, (batch_size, 8), dtype=torch.int64)]


def get_init_inputs():
    return []
"""


def test_an_embedding_stays_apart_from_the_linear_that_reads_it(tmp_path):
    """Fused into the contraction, the lookup made its operand a per-element gather that no
    family takes (0.03x eager): the lookup is an element-wise dispatch of its own, and the
    Linear a scheduled matmul."""

    workload = problem_workload(tmp_path, "embedding.py", EMBEDDING_PROBLEM)
    result = engine_for(HostCPU(), use_specs=False).execute(workload)
    assert result.verification.ok
    kinds = {d["kind"]: d["scheduled"] for d in result.extra["dispatches"]}
    assert kinds.get("matmul") is True, result.extra["dispatches"]

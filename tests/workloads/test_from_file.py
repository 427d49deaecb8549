"""Workloads from .mlir files: inspection, inputs, expected outputs, skipped verification."""

import numpy as np
import pytest

from mlirtune.interfaces.errors import MlirtuneError, UsageError
from mlirtune.workloads.from_file import FromFile
from tests.payloads import (
    FAILING_SCHEDULE,
    SILENTLY_FAILING_SCHEDULE,
    ADD_MEMREF_32x64,
    ROWSUM_MEMREF_64x128,
    ROWSUM_MEMREF_VIEW_64x128,
)


def test_arguments_are_inspected_from_the_function_type(matmul_files):
    workload = FromFile(matmul_files / "mm.mlir", entry="mm")
    assert [(a.shape, a.dtype.name) for a in workload.arguments()] == [
        ((16, 8), "f32"),
        ((8, 32), "f32"),
        ((16, 32), "f32"),
    ]


@pytest.mark.jit
def test_given_inputs_and_expected_output_verify(engine, matmul_files):
    d = matmul_files
    workload = FromFile(d / "mm.mlir", "mm", [d / "a.npy", d / "b.npy"], [d / "c.npy"])
    assert [a.is_output for a in workload.arguments()] == [False, False, True]
    verification = engine.execute(workload).verification
    assert verification.ok and not verification.skipped


@pytest.mark.jit
def test_wrong_expected_output_fails(engine, matmul_files):
    d = matmul_files
    workload = FromFile(d / "mm.mlir", "mm", [d / "a.npy", d / "b.npy"], [d / "wrong.npy"])
    verification = engine.execute(workload).verification
    assert not verification.ok
    assert verification.max_abs_error == pytest.approx(1.0, rel=1e-3)


@pytest.mark.jit
def test_without_expected_output_verification_is_skipped_plainly(engine, matmul_files):
    verification = engine.execute(FromFile(matmul_files / "mm.mlir", "mm")).verification
    assert verification.skipped
    assert "nothing was checked" in verification.summary()


def test_shape_mismatch_of_an_input_file(matmul_files):
    d = matmul_files
    with pytest.raises(UsageError, match=r"arg0 of @mm has shape \(16, 8\)"):
        FromFile(d / "mm.mlir", "mm", [d / "b.npy", d / "a.npy"], [d / "c.npy"])


@pytest.mark.parametrize(
    "function",
    [
        "func.func @f(%a: tensor<4xf32>) { return }",  # returns nothing: no value form
        "func.func @f(%a: tensor<?xf32>) -> tensor<?xf32> { return %a : tensor<?xf32> }",
    ],
)
def test_tensor_arguments_outside_the_value_form_are_rejected_clearly(tmp_path, function):
    path = tmp_path / "t.mlir"
    path.write_text(function)
    with pytest.raises(UsageError, match="must take memrefs"):
        FromFile(path, "f")


# --- memref payloads, entry checks, input files ---------------------------------------------


def _memref_files(directory, text, name, arrays):
    (directory / f"{name}.mlir").write_text(text)
    paths = []
    for index, array in enumerate(arrays):
        np.save(directory / f"{name}{index}.npy", array)
        paths.append(directory / f"{name}{index}.npy")
    return directory / f"{name}.mlir", paths


@pytest.mark.jit
@pytest.mark.parametrize(
    ("text", "entry", "make"),
    [
        (ROWSUM_MEMREF_64x128, "rowsum", lambda a: [a, a.sum(axis=1)]),
        (ADD_MEMREF_32x64, "add", None),
    ],
)
def test_memref_roots_are_brought_to_tensors_and_verify(engine, tmp_path, text, entry, make):
    rng = np.random.default_rng(5)
    if make is None:
        x, y = (rng.standard_normal((32, 64)).astype(np.float32) for _ in range(2))
        arrays = [x, y, x + y]
    else:
        arrays = make(rng.standard_normal((64, 128)).astype(np.float32))
    path, files = _memref_files(tmp_path, text, entry, arrays)
    workload = FromFile(path, entry, files[:-1], files[-1:])
    verification = engine.execute(workload).verification
    assert verification.ok and not verification.skipped
    (root,) = engine.compile(workload).provenance()["memref_roots"]
    assert root["tensorized"] and root["op"] == "linalg.generic"
    assert root["location"].startswith(str(path))


@pytest.mark.jit
def test_memref_root_that_cannot_be_brought_to_tensors_takes_the_generic_path(engine, tmp_path):
    a = np.random.default_rng(6).standard_normal((64, 128)).astype(np.float32)
    path, files = _memref_files(tmp_path, ROWSUM_MEMREF_VIEW_64x128, "view", [a, a.sum(axis=1)])
    workload = FromFile(path, "rowsum", files[:1], files[1:])
    assert engine.execute(workload).verification.ok
    provenance = engine.compile(workload).provenance()
    (root,) = provenance["memref_roots"]
    assert not root["tensorized"] and "view of another buffer" in root["reason"]
    assert any("generic path" in note for note in provenance["notes"])


@pytest.mark.jit
def test_tensor_payload_takes_its_current_path(engine, matmul_files):
    d = matmul_files
    workload = FromFile(d / "mm.mlir", "mm", [d / "a.npy", d / "b.npy"], [d / "c.npy"])
    assert engine.execute(workload).verification.ok
    provenance = engine.compile(workload).provenance()
    assert provenance["memref_roots"] == []
    assert not any("memrefs" in note for note in provenance["notes"])


@pytest.mark.jit
def test_silent_schedule_failure_still_names_the_op(tmp_path):
    from mlirtune.engine import MlirJitEngine
    from mlirtune.pipeline import with_schedule_file
    from mlirtune.targets.host_cpu import HostCPU

    (tmp_path / "add.mlir").write_text(ADD_MEMREF_32x64)
    (tmp_path / "s.mlir").write_text(SILENTLY_FAILING_SCHEDULE)
    engine = MlirJitEngine(pipeline=with_schedule_file(tmp_path / "s.mlir", HostCPU()))
    with pytest.raises(MlirtuneError) as error:
        engine.compile(FromFile(tmp_path / "add.mlir", "add"))
    text = str(error.value)
    assert error.value.stage == "schedule"
    assert f"'linalg.generic' (elementwise) at {tmp_path / 'add.mlir'}:3:3" in text
    assert "without a diagnostic" in text


@pytest.mark.jit
def test_schedule_failure_carries_the_interpreter_diagnostic(matmul_files):
    from mlirtune.engine import MlirJitEngine
    from mlirtune.pipeline import with_schedule_file
    from mlirtune.targets.host_cpu import HostCPU

    (matmul_files / "s.mlir").write_text(FAILING_SCHEDULE)
    engine = MlirJitEngine(pipeline=with_schedule_file(matmul_files / "s.mlir", HostCPU()))
    with pytest.raises(MlirtuneError) as error:
        engine.compile(FromFile(matmul_files / "mm.mlir", "mm"))
    text = str(error.value)
    assert f"'linalg.matmul' (matmul) at {matmul_files / 'mm.mlir'}:7:" in text
    assert "too many tiles provided" in text


def test_entry_that_returns_a_value_is_refused(tmp_path):
    path = tmp_path / "r.mlir"
    path.write_text(
        "func.func @f(%a: memref<4xf32>) -> (f32, index) {\n"
        "  %c0 = arith.constant 0 : index\n"
        "  %x = memref.load %a[%c0] : memref<4xf32>\n"
        "  return %x, %c0 : f32, index\n}\n"
    )
    with pytest.raises(UsageError) as error:
        FromFile(path, "f")
    assert error.value.stage == "inspect"
    assert str(error.value) == (
        f"[inspect] {path}: @f returns f32, index; entry functions must return nothing; "
        "outputs are trailing memref arguments"
    )


@pytest.mark.parametrize(
    ("inputs", "expect", "message"),
    [
        (
            ["a", "b", "c"],
            [],
            "has 3 argument(s) (inputs first, then at least one output), "
            "but 3 --inputs file(s) were given",
        ),
        (["a", "b"], ["c", "c"], "but 2 --inputs file(s) and 2 --expect file(s) were given"),
        ([], ["c", "c", "c", "c"], "but 4 --expect file(s) were given"),
    ],
)
def test_file_counts_that_cannot_fit_are_refused(matmul_files, inputs, expect, message):
    d = matmul_files
    with pytest.raises(UsageError) as error:
        FromFile(
            d / "mm.mlir", "mm", [d / f"{n}.npy" for n in inputs], [d / f"{n}.npy" for n in expect]
        )
    assert message in str(error.value)
    assert "give at most 2 --inputs file(s)" in str(error.value)


def test_without_files_only_the_last_argument_is_an_output(matmul_files):
    workload = FromFile(matmul_files / "mm.mlir", "mm")
    assert [a.is_output for a in workload.arguments()] == [False, False, True]


@pytest.mark.jit
def test_float64_input_is_converted_with_a_warning(engine, matmul_files):
    d = matmul_files
    np.save(d / "a64.npy", np.load(d / "a.npy").astype(np.float64))
    with pytest.warns(UserWarning) as caught:
        workload = FromFile(d / "mm.mlir", "mm", [d / "a64.npy", d / "b.npy"], [d / "c.npy"])
    (warning,) = caught
    assert str(warning.message) == (
        f"{d / 'a64.npy'} holds float64 values but arg0 of @mm is f32: "
        "converted from float64 to f32"
    )
    assert workload.inputs[0].dtype == np.float32
    assert engine.execute(workload).verification.ok


def test_exact_integers_are_converted_with_a_warning(matmul_files):
    d = matmul_files
    np.save(d / "ai.npy", np.arange(16 * 8, dtype=np.int32).reshape(16, 8))
    with pytest.warns(UserWarning, match="holds int32 values but arg0 of @mm is f32"):
        workload = FromFile(d / "mm.mlir", "mm", [d / "ai.npy", d / "b.npy"])
    assert workload.inputs[0][15, 7] == np.float32(127)


@pytest.mark.parametrize(
    ("array", "reason"),
    [
        (np.ones((16, 8), dtype=bool), "bool arrays are not converted to f32"),
        (np.ones((16, 8), dtype=np.complex64), "complex64 arrays are not converted to f32"),
        (np.full((16, 8), 2**24 + 1, dtype=np.int64), "not exactly representable in f32"),
        (np.full((16, 8), 1e300), "out of the range of f32"),
    ],
)
def test_conversions_that_lose_meaning_are_refused(matmul_files, array, reason):
    d = matmul_files
    np.save(d / "bad.npy", array)
    with pytest.raises(UsageError) as error:
        FromFile(d / "mm.mlir", "mm", [d / "bad.npy", d / "b.npy"])
    assert error.value.stage == "inputs"
    assert f"{d / 'bad.npy'} holds {array.dtype} values but arg0 of @mm is f32" in str(error.value)
    assert reason in str(error.value)


@pytest.mark.jit
def test_only_what_the_entry_reaches_is_compiled(engine, tmp_path):
    """A file of many functions lowers its entry and its callees alone (200,000 functions
    took minutes to lower whole; only the parse now grows with the file)."""
    helper = (
        "func.func @double{i}(%a: memref<4xf32>, %c: memref<4xf32>) {{\n"
        "  memref.copy %a, %c : memref<4xf32> to memref<4xf32>\n  return\n}}\n"
    )
    entry = (
        "func.func @f(%a: memref<4xf32>, %c: memref<4xf32>) {\n"
        "  func.call @double7(%a, %c) : (memref<4xf32>, memref<4xf32>) -> ()\n  return\n}\n"
    )
    (tmp_path / "many.mlir").write_text("".join(helper.format(i=i) for i in range(2000)) + entry)
    lowered = engine.lower_payload(FromFile(tmp_path / "many.mlir", entry="f"))
    names = {
        op.attributes["sym_name"].value
        for op in lowered.body.operations
        if op.operation.name == "llvm.func" and op.regions[0].blocks
    }
    assert {"f", "double7"} <= names and not names & {"double0", "double1999"}

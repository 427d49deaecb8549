"""A workload from any `.mlir` file: argument shapes and dtypes come from the entry function.

The entry function takes memrefs and returns nothing; outputs are the trailing arguments
written in place. Which arguments are outputs follows from what the user gives: `--expect`
files name the trailing outputs; otherwise the arguments after the `--inputs` files are
outputs, and with neither, the last argument is. Or, in value form (as IREE takes it), it
takes tensors and returns its outputs: the payload is then rewritten into the first form
(`mlirtune.ir.value_functions.to_destinations`), the results becoming trailing arguments.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import ml_dtypes
import numpy as np
from mlir import ir
from mlir.dialects import func

from mlirtune.interfaces.errors import UsageError
from mlirtune.interfaces.verification import VerificationResult
from mlirtune.interfaces.workload import ArgSpec, Complexity
from mlirtune.ir.context import parse_module, run_passes
from mlirtune.ir.dtypes import dtype_of_mlir
from mlirtune.ir.inspect import find_function
from mlirtune.ir.value_functions import to_destinations
from mlirtune.workloads.base import PayloadWorkload


class FromFile(PayloadWorkload):
    """A user payload. Without reference outputs, verification is skipped and says so."""

    name = "from_file"
    description = "any .mlir payload with an entry function"

    def __init__(
        self,
        path: str | Path,
        entry: str = "payload",
        inputs: list[str | Path] | None = None,
        expect: list[str | Path] | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.path = Path(path)
        self.entry = entry
        self.options = {"path": str(self.path), "entry": entry, "seed": seed}
        self._input_paths = [Path(p) for p in inputs or []]
        self._expect_paths = [Path(p) for p in expect or []]
        self._input_files = [_load_npy(p) for p in self._input_paths]
        self._expected = [_load_npy(p) for p in self._expect_paths]
        with ir.Context(), ir.Location.unknown():
            self._args = self._inspect(parse_module(self.path))

    def _inspect(self, module: ir.Module) -> list[ArgSpec]:
        """Read argument shapes and element types from the entry function's type."""
        function = find_function(module, self.entry, str(self.path))
        self.value_form = _in_value_form(function)
        if self.value_form:
            return self._inspect_values(function)
        types = list(function.type.inputs)
        n_outputs = self._output_count(len(types))
        args = []
        for position, arg_type in enumerate(types):
            if not isinstance(arg_type, ir.MemRefType):
                raise UsageError(
                    f"{self.path}: argument {position} of @{self.entry} is {arg_type}; "
                    "entry functions must take memrefs (outputs written in place), or take "
                    "and return statically shaped tensors",
                    stage="inspect",
                )
            memref = arg_type
            if not memref.has_static_shape:
                raise UsageError(
                    f"{self.path}: argument {position} of @{self.entry} has a dynamic shape "
                    f"({arg_type}); only static shapes are supported",
                    stage="inspect",
                )
            is_output = position >= len(types) - n_outputs
            args.append(
                ArgSpec(
                    f"arg{position}",
                    tuple(memref.shape),
                    dtype_of_mlir(memref.element_type),
                    is_output=is_output,
                )
            )
        results = list(function.type.results)
        if results:
            raise UsageError(
                f"{self.path}: @{self.entry} returns {', '.join(map(str, results))}; entry "
                "functions must return nothing; outputs are trailing memref arguments",
                stage="inspect",
            )
        self._check_arrays(args)
        return args

    def _inspect_values(self, function: func.FuncOp) -> list[ArgSpec]:
        """A value-form entry's tensors: its arguments the inputs, its results the outputs."""
        inputs, results = list(function.type.inputs), list(function.type.results)
        for name, given, count in (
            ("--inputs", self._input_files, len(inputs)),
            ("--expect", self._expected, len(results)),
        ):
            if given and len(given) != count:
                raise UsageError(
                    f"{self.path}: @{self.entry} takes {len(inputs)} tensor(s) and returns "
                    f"{len(results)}, but {len(given)} {name} file(s) were given",
                    stage="inspect",
                )
        args = [
            ArgSpec(f"arg{i}", tuple(t.shape), dtype_of_mlir(t.element_type))
            for i, t in enumerate(inputs)
        ]
        args += [
            ArgSpec(f"result{i}", tuple(t.shape), dtype_of_mlir(t.element_type), is_output=True)
            for i, t in enumerate(results)
        ]
        self._check_arrays(args)
        return args

    def _output_count(self, n_args: int) -> int:
        """How many trailing arguments are outputs; a file count that cannot fit the
        arguments (with at least one output) is an error naming the counts."""
        n_inputs, n_expected = len(self._input_files), len(self._expected)
        n_outputs = n_expected or (n_args - n_inputs if n_inputs else 1)
        fits = n_outputs >= 1 and n_inputs + n_outputs <= n_args
        if self._input_files and self._expected:
            fits = fits and n_inputs + n_expected == n_args
        if n_args == 0:
            raise UsageError(
                f"{self.path}: @{self.entry} takes no arguments; entry functions write their "
                "outputs into trailing memref arguments",
                stage="inspect",
            )
        if not fits:
            given = [f"{n_inputs} --inputs file(s)"] if n_inputs else []
            given += [f"{n_expected} --expect file(s)"] if n_expected else []
            raise UsageError(
                f"{self.path}: @{self.entry} has {n_args} argument(s) (inputs first, then at "
                f"least one output), but {' and '.join(given)} were given; "
                + _fitting_counts(n_args),
                stage="inspect",
            )
        return n_outputs

    def _check_arrays(self, args: list[ArgSpec]) -> None:
        """Shapes must match; dtypes are converted where that keeps the values' meaning."""
        inputs = [a for a in args if not a.is_output]
        outputs = [a for a in args if a.is_output]
        pairs = list(zip(inputs, self._input_paths, self._input_files, strict=False))
        pairs += list(zip(outputs, self._expect_paths, self._expected, strict=False))
        for spec, path, array in pairs:
            if tuple(array.shape) != spec.shape:
                raise UsageError(
                    f"{self.path}: {spec.name} of @{self.entry} has shape {spec.shape}, "
                    f"but its .npy file {path} has {tuple(array.shape)}",
                    stage="inspect",
                )
        self._input_files = [
            _convert(array, spec, path, self.entry)
            for spec, path, array in zip(inputs, self._input_paths, self._input_files, strict=False)
        ]
        self._expected = [
            _convert(array, spec, path, self.entry)
            for spec, path, array in zip(outputs, self._expect_paths, self._expected, strict=False)
        ]

    def arguments(self) -> list[ArgSpec]:
        return self._args

    def payload_module(self) -> ir.Module:
        """The file's module, less the functions its entry does not reach: only what runs
        is compiled (a file of 200,000 functions took minutes to lower, its entry alone
        milliseconds)."""
        module = parse_module(self.path)
        entry = find_function(module, self.entry, str(self.path))
        if self.value_form:
            to_destinations(entry)
        entry.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
        private = ir.StringAttr.get("private")
        for op in module.body.operations:
            if isinstance(op, func.FuncOp) and op.sym_name.value != self.entry and op.body.blocks:
                op.attributes["sym_visibility"] = private
        run_passes(module, "builtin.module(symbol-dce)", stage="parse")
        return module

    def make_inputs(self) -> list[np.ndarray]:
        if self._input_files:  # already in the arguments' dtypes (see _convert)
            return [np.ascontiguousarray(a) for a in self._input_files]
        return super().make_inputs()

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(a, dtype=np.float64) for a in self._expected]

    def verify(self, engine) -> VerificationResult:
        if not self._expected:
            return VerificationResult(
                ok=True, skipped=True, detail="no --expect file was given, so nothing was checked"
            )
        return super().verify(engine)

    def get_complexity(self) -> Complexity:
        # Unknown FLOPs: report the traffic only.
        read = sum(a.nbytes for a in self._args if not a.is_output)
        written = sum(a.nbytes for a in self._args if a.is_output)
        return Complexity(0, read, written)


def _in_value_form(function: func.FuncOp) -> bool:
    """Whether the entry takes static tensors and returns static tensors (IREE's form)."""
    types = [*function.type.inputs, *function.type.results]
    return bool(function.type.results) and all(
        isinstance(t, ir.RankedTensorType) and t.has_static_shape for t in types
    )


def _fitting_counts(n_args: int) -> str:
    if n_args < 2:
        return "it takes no input files, and at most 1 --expect file"
    return (
        f"give at most {n_args - 1} --inputs file(s), at most {n_args} --expect file(s), "
        f"and {n_args} in all when giving both"
    )


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype == np.dtype(ml_dtypes.bfloat16)


def _convert(array: np.ndarray, spec: ArgSpec, path: Path, entry: str) -> np.ndarray:
    """`array` in the argument's dtype. Float widening/narrowing and integers a float holds
    exactly are converted with a warning; anything else would change what the values mean
    and is an error naming the file, the argument and both dtypes."""
    source, target = array.dtype, np.dtype(spec.dtype.numpy)
    if source == target:
        return array
    what = f"{path} holds {source} values but {spec.name} of @{entry} is {spec.dtype.name}"
    reason = ""
    if not (_is_float(source) or source.kind in "iu") or not _is_float(target):
        reason = f"{source} arrays are not converted to {spec.dtype.name}"
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            converted = array.astype(target)
        if source.kind in "iu":
            with np.errstate(invalid="ignore"):
                exact = np.array_equal(converted.astype(source), array)
            if not exact:
                reason = f"some integers are not exactly representable in {spec.dtype.name}"
        elif np.any(np.isfinite(array) & ~np.isfinite(converted)):
            reason = f"some values are out of the range of {spec.dtype.name}"
    if reason:
        raise UsageError(f"{what}: {reason}; convert the file first", stage="inputs")
    warnings.warn(f"{what}: converted from {source} to {spec.dtype.name}", stacklevel=2)
    return converted


def _load_npy(path: str | Path) -> np.ndarray:
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as error:
        raise UsageError(f"cannot read {path}: {error}", stage="inputs") from None
    if not isinstance(array, np.ndarray):  # an .npz archive holds several arrays
        array.close()
        raise UsageError(
            f"{path}: an .npz archive of several arrays; give one .npy file per argument",
            stage="inputs",
        )
    return array

"""A workload from any `.mlir` file: argument shapes and dtypes come from the entry function.

The entry function takes memrefs; outputs are the trailing arguments written in place.
Which arguments are outputs follows from what the user gives: `--expect` files name the
trailing outputs; otherwise the arguments after the `--inputs` files are outputs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from mlir import ir

from mlirtune.errors import UsageError
from mlirtune.ir.context import parse_module
from mlirtune.ir.dtypes import dtype_of_mlir
from mlirtune.ir.inspect import find_function
from mlirtune.verify import VerificationResult
from mlirtune.workload import ArgSpec, Complexity, Workload


class FromFile(Workload):
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
        self._input_files = [_load_npy(p) for p in inputs or []]
        self._expected = [_load_npy(p) for p in expect or []]
        with ir.Context(), ir.Location.unknown():
            self._args = self._inspect(parse_module(self.path))

    def _inspect(self, module: ir.Module) -> list[ArgSpec]:
        """Read argument shapes and element types from the entry function's type."""
        function = find_function(module, self.entry, str(self.path))
        types = list(function.type.inputs)
        n_outputs = len(self._expected) if self._expected else len(types) - len(self._input_files)
        if self._input_files and len(self._input_files) + n_outputs != len(types):
            raise UsageError(
                f"{self.path}: @{self.entry} has {len(types)} arguments but "
                f"{len(self._input_files)} input and {len(self._expected)} expected files "
                "were given",
                stage="inspect",
            )
        args = []
        for position, arg_type in enumerate(types):
            if not isinstance(arg_type, ir.MemRefType):
                raise UsageError(
                    f"{self.path}: argument {position} of @{self.entry} is {arg_type}; "
                    "entry functions must take memrefs (outputs written in place)",
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
        self._check_arrays(args)
        return args

    def _check_arrays(self, args: list[ArgSpec]) -> None:
        inputs = [a for a in args if not a.is_output]
        outputs = [a for a in args if a.is_output]
        pairs = list(zip(inputs, self._input_files, strict=False))
        pairs += list(zip(outputs, self._expected, strict=False))
        for spec, array in pairs:
            if tuple(array.shape) != spec.shape:
                raise UsageError(
                    f"{self.path}: {spec.name} of @{self.entry} has shape {spec.shape}, "
                    f"but its .npy file has {tuple(array.shape)}",
                    stage="inspect",
                )

    def arguments(self) -> list[ArgSpec]:
        return self._args

    def payload_module(self) -> ir.Module:
        module = parse_module(self.path)
        find_function(module, self.entry, str(self.path)).attributes["llvm.emit_c_interface"] = (
            ir.UnitAttr.get()
        )
        return module

    def make_inputs(self) -> list[np.ndarray]:
        if self._input_files:
            return [
                np.ascontiguousarray(a, dtype=s.dtype.numpy)
                for a, s in zip(self._input_files, self._args, strict=False)
            ]
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


def _load_npy(path: str | Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise UsageError(f"cannot read {path}: {error}", stage="inputs") from None

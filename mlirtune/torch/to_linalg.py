"""torch-mlir's half of an import, run by mlirtune.torch.importer as a script in a process
of its own: torch-mlir bundles an MLIR and LLVM of another version, and loading them beside
this project's aborts the process (LLVM options registered twice). It reads a saved
torch.export program and writes its linalg-on-tensors IR in MLIR's generic form, which this
project's MLIR parses. It imports nothing from mlirtune.

    python -I to_linalg.py PROGRAM.pt2 OUT.mlir FUNC_NAME
"""

import sys
import warnings


def main(program_path: str, text_path: str, func_name: str) -> None:
    import torch
    from torch_mlir import fx
    from torch_mlir.compiler_utils import OutputType

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's own deprecations
        program = torch.export.load(program_path)
        module = fx.export_and_import(
            program, output_type=OutputType.LINALG_ON_TENSORS, func_name=func_name
        )
    text = module.operation.get_asm(print_generic_op_form=True, large_elements_limit=None)
    with open(text_path, "w") as out:
        out.write(text)


if __name__ == "__main__":
    try:
        main(*sys.argv[1:4])
    except Exception as error:  # reported by the parent as one line
        lines = [line for line in str(error).strip().splitlines() if line.strip()]
        print(f"{type(error).__name__}: {lines[0] if lines else ''}", file=sys.stderr)
        sys.exit(3)

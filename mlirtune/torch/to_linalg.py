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
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    aten = torch.ops.aten
    table = get_decomposition_table()
    table[aten.var_mean.correction] = var_mean
    table[aten.var.correction] = lambda *args, **kwargs: var_mean(*args, **kwargs)[0]
    table[aten.native_group_norm.default] = group_norm
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's own deprecations
        program = torch.export.load(program_path)
        module = fx.export_and_import(
            program,
            output_type=OutputType.LINALG_ON_TENSORS,
            func_name=func_name,
            decomposition_table=table,
        )
    text = module.operation.get_asm(print_generic_op_form=True, large_elements_limit=None)
    with open(text_path, "w") as out:
        out.write(text)


def var_mean(x, dim=None, *, correction=None, keepdim=False):
    """A variance and mean (every norm's statistics: layer, group, instance) in the input's
    own precision, f32 for f16 and bf16, as eager computes them: torch-mlir's own
    lowering takes them in f64, at half the vector width and twice the bytes."""
    import torch

    dims = list(range(x.dim())) if not dim else [d % x.dim() for d in dim]
    count = 1
    for d in dims:
        count *= x.shape[d]
    wide = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    mean = torch.mean(wide, dims, keepdim=True)
    centred = wide - mean
    divisor = count - (1 if correction is None else correction)
    var = torch.sum(centred * centred, dims, keepdim=keepdim) / divisor
    if not keepdim:
        mean = torch.squeeze(mean, dims)
    return var.to(x.dtype), mean.to(x.dtype)


def group_norm(x, weight, bias, batch, channels, spatial, groups, eps):
    """A group norm as a reshape, the statistics and one normalise-scale-shift: torch's own
    decomposition gathers each channel's statistics through index tensors, twice over
    the whole input."""
    import torch

    grouped = x.reshape(batch, groups, -1)
    var, mean = var_mean(grouped, [2], correction=0, keepdim=True)
    rstd = torch.rsqrt(var + eps)
    out = ((grouped - mean) * rstd).reshape(x.shape)
    per_channel = [1, channels] + [1] * (x.dim() - 2)
    if weight is not None:
        out = out * weight.reshape(per_channel)
    if bias is not None:
        out = out + bias.reshape(per_channel)
    return out, mean.reshape(batch, groups), rstd.reshape(batch, groups)


if __name__ == "__main__":
    try:
        main(*sys.argv[1:4])
    except Exception as error:  # reported by the parent as one line
        lines = [line for line in str(error).strip().splitlines() if line.strip()]
        print(f"{type(error).__name__}: {lines[0] if lines else ''}", file=sys.stderr)
        sys.exit(3)

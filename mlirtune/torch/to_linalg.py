"""torch-mlir's half of an import, run by mlirtune.torch.importer as a script in a process
of its own: torch-mlir bundles an MLIR and LLVM of another version, and loading them beside
this project's aborts the process (LLVM options registered twice). It reads a saved
torch.export program and writes its linalg-on-tensors IR in MLIR's generic form, which this
project's MLIR parses. It imports nothing from mlirtune.

Beside torch-mlir's decompositions it applies its own, where torch-mlir's make kernels this
project cannot make fast: variances in the input's precision (not f64), a group norm as
rows, a softmax's masked rows found by its maximum, products of an input of rank 3 or
more with a matrix as one matrix product over its rows, a linear layer on one row as a
product of one column, strided convolutions as convolutions of stride one (a 2-D
depthwise one along W), 3-D depthwise convolutions as grouped ones, and reflected and
replicated pads as joined slices.

    python -I to_linalg.py PROGRAM.pt2 OUT.mlir FUNC_NAME
"""

import math
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
    table[aten._safe_softmax.default] = safe_softmax
    table[aten.convolution.default] = convolution
    table[aten.view.default] = view
    table[aten.linear.default] = linear
    table[aten.matmul.default] = matmul
    for rank in ("1d", "2d", "3d"):
        table[getattr(aten, f"reflection_pad{rank}").default] = reflection_pad
        table[getattr(aten, f"replication_pad{rank}").default] = replication_pad
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
    count = math.prod(x.shape[d] for d in dims)
    wide = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    mean = torch.mean(wide, dims, keepdim=True)
    centred = wide - mean
    divisor = count - (1 if correction is None else correction)
    var = torch.sum(centred * centred, dims, keepdim=keepdim) / divisor
    if not keepdim:
        mean = torch.squeeze(mean, dims)
    return var.to(x.dtype), mean.to(x.dtype)


def view(x, size):
    """aten.view, of a contiguous copy where the tensor is not contiguous: decomposing
    GPT-2's attention at batch 8 left a view of a transposed [8, 128, 256] tensor (its
    `contiguous` gone), which torch's own view refuses. A contiguous tensor's view is traced
    as it is (NotImplemented)."""
    import torch

    if x.is_contiguous():
        return NotImplemented
    copy = torch.ops.aten.clone.default(x, memory_format=torch.contiguous_format)
    return torch.ops.aten.view.default(copy, size)


def linear(x, weight, bias=None):
    """A linear layer on one row (a classifier at batch 1, a decoding step) as the weight's
    rows times that row, a product of one column: the weight is stored [N, K], and its
    product as the right operand reads it a row apart per element (ResNet-18's classifier,
    512 to 1000 on an AMD Zen 3: 0.41 ms against numpy's 0.036). On an input of rank 3 or
    more, as `matmul` takes it. Plus its bias."""
    if x.numel() == x.shape[-1] and weight.dim() == 2:
        column = weight @ x.reshape(x.shape[-1], 1)
        out = column.reshape(*x.shape[:-1], weight.shape[0])
    elif x.dim() <= 2:
        return NotImplemented
    else:
        out = matmul(x, weight.t())
    return out if bias is None else out + bias


def matmul(x, weight):
    """A product of an input of rank 3 or more with a matrix as one matrix product over the
    input's rows, its leading dims flattened (copied once where they are not contiguous).
    torch's own decomposition takes a non-contiguous input (a batch-first attention's
    inputs, transposed to [L, N, E]) as a batched product with the matrix broadcast to
    every batch, which the import materialises: 96 copies of a 128 x 256 projection, 78% of
    a cross-attention's time."""
    if x.dim() <= 2 or weight.dim() != 2:
        return NotImplemented
    rows = x.reshape(-1, x.shape[-1]) @ weight
    return rows.reshape(*x.shape[:-1], weight.shape[-1])


def safe_softmax(x, dim, dtype=None):
    """A softmax whose rows of -inf alone (attention's fully masked rows) are zeros: the
    row's maximum, which the softmax takes anyway, says so. torch's decomposition tests
    every element of the row again, a boolean reduction no vectorizer takes."""
    import torch

    if dtype is not None:
        x = x.to(dtype)
    top = torch.amax(x, dim, keepdim=True)
    exp = torch.exp(x - top)
    out = exp / torch.sum(exp, dim, keepdim=True)
    return torch.where(top == float("-inf"), torch.zeros_like(out), out)


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


def reflection_pad(x, padding):
    """A reflection pad as the input joined with one-wide slices of itself in mirrored
    order (`padding` lists the last dim's sides first). torch's decomposition gathers every
    output element through index tensors, which no vectorizer takes, and torch-mlir's own
    lowering reads the border through a negated index, which MLIR's tiling asserts on;
    joined slices are copies."""
    return _bordered(x, padding, lambda size, side, i: i + 1 if side == 0 else size - 2 - i)


def replication_pad(x, padding):
    """A replication pad as the input joined with copies of its edge slices (see
    reflection_pad)."""
    return _bordered(x, padding, lambda size, side, i: 0 if side == 0 else size - 1)


def _bordered(x, padding, source):
    """`x` with each padded dim's borders joined from one-wide slices: the i-th slice out
    from side 0 (before) or 1 (after) copies the element `source(size, side, i)`."""
    import torch

    if any(p < 0 for p in padding):  # a crop
        return NotImplemented
    for axis in range(len(padding) // 2):
        dim = x.dim() - 1 - axis
        size = x.shape[dim]
        before = [x.narrow(dim, source(size, 0, i), 1) for i in range(padding[2 * axis])]
        after = [x.narrow(dim, source(size, 1, i), 1) for i in range(padding[2 * axis + 1])]
        if before or after:
            x = torch.cat([*reversed(before), x, *after], dim)
    return x


def convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """A 3-D depthwise convolution as a grouped one (`_depthwise_as_grouped`), and a strided
    convolution (1-D or 3-D, or transposed) as convolutions of stride one, whose windows
    read contiguous rows that vector loads take, a 2-D depthwise one strided along W as
    convolutions of W stride one; others (stride one, a dilated transposed one, another
    2-D one, whose own families read strided rows) are left to torch-mlir."""
    out_channels = weight.shape[1] * groups if transposed else weight.shape[0]
    if x.dim() == 5 and groups == x.shape[1] == out_channels:
        return _depthwise_as_grouped(
            x, weight, bias, stride, padding, dilation, transposed, output_padding, groups
        )
    if all(s == 1 for s in stride):
        return NotImplemented
    if transposed:
        if any(d != 1 for d in dilation):
            return NotImplemented
        return _transposed_phases(x, weight, bias, stride, padding, output_padding, groups)
    if x.dim() == 4:
        depthwise = groups == x.shape[1] == out_channels
        if depthwise and 1 < stride[1] <= weight.shape[3] and dilation[1] == 1:
            return _depthwise_row_phases(x, weight, bias, stride, padding, dilation, groups)
        return NotImplemented  # the 2-D convolution families read strided rows themselves
    return _strided_phases(x, weight, bias, stride, padding, dilation, groups)


def _depthwise_as_grouped(
    x, weight, bias, stride, padding, dilation, transposed, output_padding, groups
):
    """A 3-D depthwise convolution (one input and one output channel per group), which
    torch-mlir has no lowering for, as its grouped convolution with two output channels
    per group, the second of zeros, then every other channel: twice the multiply-adds,
    where eager's own 3-D depthwise kernel is slower still (2x16x16^3 from 16 channels:
    10x eager at twice the channels)."""
    import torch

    zeros = torch.zeros_like(weight)
    # Output channels per group: dim 1 of a transposed weight, runs of dim 0 of another.
    paired = (
        torch.cat([weight, zeros], 1)
        if transposed
        else torch.stack([weight, zeros], 1).flatten(0, 1)
    )
    ones = torch.ops.aten.convolution.default(
        x, paired, None, stride, padding, dilation, transposed, output_padding, groups
    )[:, ::2]
    return ones if bias is None else ones + bias.reshape(1, -1, 1, 1, 1)


def _strided_phases(x, weight, bias, stride, padding, dilation, groups):
    """A convolution of stride s and dilation d as the sum of up to s^D convolutions of
    stride one: along each dim, the taps k0, k0 + s/g, ... (g = gcd(s, d)) read the input
    phase of the elements at d * k0, d * k0 + s, ... (zero padding included), as a
    convolution of dilation d/g. Each reads its phase as contiguous rows; together they do
    the strided convolution's multiply-adds, once. A phase is sliced from the input and
    then padded, so the input is never copied padded whole."""
    import itertools

    import torch

    dims = x.dim() - 2
    kernel, lengths = list(weight.shape[2:]), list(x.shape[2:])
    out = [
        (n + 2 * p - d * (k - 1) - 1) // s + 1
        for n, p, k, s, d in zip(lengths, padding, kernel, stride, dilation, strict=True)
    ]
    # Per dim: the filter's step between the taps of one phase, and the phase's dilation.
    steps = [s // math.gcd(s, d) for s, d in zip(stride, dilation, strict=True)]
    spread = [d // math.gcd(s, d) for s, d in zip(stride, dilation, strict=True)]
    ones, zeros = [1] * dims, [0] * dims
    total = None
    for firsts in itertools.product(
        *(range(min(t, k)) for t, k in zip(steps, kernel, strict=True))
    ):
        taps = [slice(k0, None, t) for k0, t in zip(firsts, steps, strict=True)]
        sub_filter = weight[(slice(None), slice(None), *taps)]
        rows, pads = [], []
        for i in range(dims):
            s, p, n = stride[i], padding[i], lengths[i]
            r = dilation[i] * firsts[i]  # the padded position of the phase's first element
            count = out[i] + spread[i] * (sub_filter.shape[2 + i] - 1)  # elements read
            # Padded position r + s * m is input r + s * m - p: the first inside, the
            # number inside, and the zeros before and after them.
            first = max(0, -(-(p - r) // s))
            start = r + s * first - p
            inside = max(0, min(count - first, -(-(n - start) // s)))
            rows.append(slice(start, start + s * inside, s) if inside else slice(0, 0))
            pads.append((first, count - first - inside))
        phase = x[(slice(None), slice(None), *rows)]
        if any(before or after for before, after in pads):
            phase = torch.nn.functional.pad(phase, [n for pair in reversed(pads) for n in pair])
        part = torch.ops.aten.convolution.default(
            phase, sub_filter, None, ones, zeros, spread, False, zeros, groups
        )
        total = part if total is None else total + part
    if bias is not None:
        total = total + bias.reshape(1, -1, *([1] * dims))
    return total


def _depthwise_row_phases(x, weight, bias, stride, padding, dilation, groups):
    """A 2-D depthwise convolution of W stride s (at most its taps along W, and of W
    dilation one) as s convolutions of W stride one, summed. The input is deinterleaved
    once into the s phases of each row (a reshape of the row to [W/s, s] and one
    transpose, which reads whole rows); the taps r, r + s, ... read the padded row's phase
    r, which is the input's phase (r - p) mod s behind -((r - p) // s) zeros of the row's
    padding, and zeros past its end. The depthwise family vectorizes along W only where a
    tap reads a contiguous row; with a W stride it computed one output at a time. The H
    stride stays in the convolutions (their rows are read one at a time anyway), and each
    convolution takes its padding and reads its phase in place (mlirtune.dispatch.free)."""
    import torch

    s, p = stride[1], padding[1]
    n, c, h, w = x.shape
    out = (w + 2 * p - weight.shape[3]) // s + 1
    if w % s:  # whole phases: the row's last ones padded
        x = torch.nn.functional.pad(x, [0, s - w % s])
    length = x.shape[3] // s
    phases = x.reshape(n, c, h, length, s).permute(0, 1, 2, 4, 3).contiguous()
    total = None
    for r in range(s):
        taps = weight[:, :, :, r::s]
        needed = out + taps.shape[3] - 1  # elements of the padded phase its taps read
        before = -((r - p) // s)  # the row's padding ahead of the input's phase
        inside = min(needed - before, length)  # elements read from the input's phase
        phase = phases[:, :, :, (r - p) % s, :inside]
        after = needed - before - inside
        zeros = [before, after, padding[0], padding[0]]
        if any(zeros):
            phase = torch.nn.functional.pad(phase, zeros)
        part = torch.ops.aten.convolution.default(
            phase, taps, None, [stride[0], 1], [0, 0], [dilation[0], 1], False, [0, 0], groups
        )
        total = part if total is None else total + part
    if bias is not None:
        total = total + bias.reshape(1, -1, 1, 1)
    return total


def _transposed_phases(x, weight, bias, stride, padding, output_padding, groups):
    """A transposed convolution of stride s as s^D convolutions of stride one, one per
    output phase (the outputs j, j + s, ... along each dim take the filter taps r, r + s,
    ... where r = (j + padding) % s), interleaved: torch-mlir's own lowering convolves an
    input with s - 1 zeros between its elements, s^D times the multiply-adds. Each phase
    is computed for exactly the outputs it has, so its rows are as long as the output's
    over s (a length the vectors divide where the output's does)."""
    import torch

    dims = x.dim() - 2
    kernel, lengths = list(weight.shape[2:]), list(x.shape[2:])
    channels = weight.shape[1] * groups
    out = [
        (n - 1) * s - 2 * p + k + extra
        for n, s, p, k, extra in zip(lengths, stride, padding, kernel, output_padding, strict=True)
    ]
    rows = [-(-n // s) for n, s in zip(out, stride, strict=True)]  # of phase 0, the longest
    # [C, F/g, k...] as a convolution's [F, C/g, k...]; its taps are then flipped per phase.
    regular = weight.reshape(groups, -1, *weight.shape[1:]).transpose(1, 2)
    regular = regular.reshape(channels, -1, *kernel)

    def phase(offsets: tuple[int, ...]) -> torch.Tensor:
        residues = [(j + p) % s for j, p, s in zip(offsets, padding, stride, strict=True)]
        starts = [(j + p) // s for j, p, s in zip(offsets, padding, stride, strict=True)]
        steps = (slice(r, None, s) for r, s in zip(residues, stride, strict=True))
        taps = regular[(slice(None), slice(None), *steps)]
        if any(n == 0 for n in taps.shape[2:]):  # a phase no tap reaches
            return x.new_zeros(x.shape[0], channels, *rows)
        taps = taps.flip(list(range(2, 2 + dims)))
        # Output q of the phase reads inputs q - t for its taps t: the input from
        # start - (taps - 1) on, cropped or zero-padded to rows + taps - 1.
        pads = []
        for d in reversed(range(dims)):
            left = taps.shape[2 + d] - 1 - starts[d]
            pads += [left, rows[d] + taps.shape[2 + d] - 1 - lengths[d] - left]
        ones, zeros = [1] * dims, [0] * dims
        return torch.ops.aten.convolution.default(
            torch.nn.functional.pad(x, pads), taps, None, ones, zeros, ones, False, zeros, groups
        )

    def interleaved(offsets: tuple[int, ...]) -> torch.Tensor:
        """The phases of `offsets` and every offset of the dims after them, interleaved
        along those dims ([N, F, R0, .., Rd * sd, ...])."""
        d = len(offsets)
        if d == dims:
            return phase(offsets)
        parts = [interleaved((*offsets, j)) for j in range(stride[d])]
        return torch.stack(parts, dim=3 + d).flatten(2 + d, 3 + d)

    full = interleaved(())
    result = full[(slice(None), slice(None), *(slice(0, n) for n in out))]
    if bias is not None:
        result = result + bias.reshape(1, channels, *([1] * dims))
    return result


if __name__ == "__main__":
    try:
        main(*sys.argv[1:4])
    except Exception as error:  # reported by the parent as one line
        lines = [line for line in str(error).strip().splitlines() if line.strip()]
        print(f"{type(error).__name__}: {lines[0] if lines else ''}", file=sys.stderr)
        sys.exit(3)

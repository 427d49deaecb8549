"""What the sliding-window workloads (conv2d, depthwise, pool) share: options giving one
size per spatial dim, and the output extent a window leaves along one dim."""

from __future__ import annotations

from mlirtune.interfaces.errors import UsageError


def parse_sizes(
    owner: str, key: str, value: object, rank: int | None, *, minimum: int
) -> tuple[int, ...]:
    """Option `key`'s `value` (an int, or "a,b,c") as `rank` sizes (one value is repeated;
    rank None takes any count), each at least `minimum`; a UsageError naming the option
    otherwise."""
    text = str(value)

    def error(message: str) -> UsageError:
        return UsageError(f"{owner}: {key}={text!r} {message}", stage="workload")

    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise error("is not an integer and not a comma-separated list of integers") from None
    if rank is not None and len(sizes) == 1:
        sizes *= rank
    if rank is not None and len(sizes) != rank:
        raise error(f"needs 1 or {rank} values, one per spatial dim")
    if min(sizes) < minimum:
        raise error(f"every value must be at least {minimum}")
    return sizes


def output_size(size: int, kernel: int, stride: int, dilation: int, padding: int = 0) -> int:
    """Output extent along one spatial dim of a window (convolution or pooling) of `kernel`
    taps `dilation` apart, moved by `stride` over `size` elements padded on both sides."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1

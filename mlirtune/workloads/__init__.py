"""Built-in workloads, looked up by name."""

from __future__ import annotations

from mlirtune.interfaces.errors import UsageError
from mlirtune.workloads.base import PayloadWorkload
from mlirtune.workloads.batch_matmul import BatchMatmul
from mlirtune.workloads.channel_norm import ChannelNorm
from mlirtune.workloads.conv2d import Conv2d
from mlirtune.workloads.conv_transpose import ConvTranspose
from mlirtune.workloads.depthwise import Depthwise
from mlirtune.workloads.elementwise import Elementwise
from mlirtune.workloads.loss import Loss
from mlirtune.workloads.matmul import Matmul, Mlp
from mlirtune.workloads.norm import Norm
from mlirtune.workloads.pool import Pool
from mlirtune.workloads.reduce import Reduce
from mlirtune.workloads.softmax import Softmax

WORKLOADS: dict[str, type[PayloadWorkload]] = {
    cls.name: cls
    for cls in (
        Matmul,
        Mlp,
        BatchMatmul,
        Conv2d,
        Softmax,
        Elementwise,
        Reduce,
        Norm,
        Pool,
        Loss,
        Depthwise,
        ConvTranspose,
        ChannelNorm,
    )
}


def workload_class(name: str) -> type[PayloadWorkload]:
    """The workload class called `name`, or a UsageError listing the known ones."""
    try:
        return WORKLOADS[name]
    except KeyError:
        raise UsageError(
            f"unknown workload {name!r}; known: {', '.join(sorted(WORKLOADS))}"
        ) from None


__all__ = [
    "WORKLOADS",
    "BatchMatmul",
    "ChannelNorm",
    "Conv2d",
    "ConvTranspose",
    "Depthwise",
    "Elementwise",
    "Loss",
    "Matmul",
    "Mlp",
    "Norm",
    "PayloadWorkload",
    "Pool",
    "Reduce",
    "Softmax",
    "workload_class",
]

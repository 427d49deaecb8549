"""An instance norm with learned scale and shift, then an adaptive max pool to 5 x 5."""

import torch

batch_size = 4


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.InstanceNorm2d(32, affine=True)
        self.pool = torch.nn.AdaptiveMaxPool2d(5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.norm(x))


def get_inputs():
    return [torch.randn(batch_size, 32, 40, 40)]


def get_init_inputs():
    return []

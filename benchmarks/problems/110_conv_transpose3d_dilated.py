"""A ConvTranspose3d with stride, padding, output padding and dilation, then tanh."""

import torch
from torch import nn

batch_size = 2


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.deconv = nn.ConvTranspose3d(
            8, 16, 3, stride=2, padding=1, output_padding=1, dilation=1
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.deconv(x))


def get_inputs():
    return [torch.randn(batch_size, 8, 8, 12, 12)]


def get_init_inputs():
    return []

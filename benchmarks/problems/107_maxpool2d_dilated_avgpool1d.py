"""A dilated, padded MaxPool2d with ceil mode, and an AvgPool1d without padding counted."""

import torch
from torch import nn

batch_size = 4


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pool2d = nn.MaxPool2d(3, stride=2, padding=1, dilation=2, ceil_mode=True)
        self.pool1d = nn.AvgPool1d(4, stride=2, padding=1, count_include_pad=False)

    def forward(
        self, image: torch.Tensor, signal: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.pool2d(image), self.pool1d(signal)


def get_inputs():
    return [torch.randn(batch_size, 16, 33, 33), torch.randn(batch_size, 32, 257)]


def get_init_inputs():
    return []

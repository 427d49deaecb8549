"""AvgPool2d with ceil mode, padding 1 and the padding left out of each window's count."""

import torch
import torch.nn as nn

batch_size = 8


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, 32, 57, 57)]


def get_init_inputs():
    return []

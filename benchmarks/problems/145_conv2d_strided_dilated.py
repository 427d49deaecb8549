"""Conv2d with stride 2 and dilation 2 together, on an input that is not square."""

import torch
import torch.nn as nn

batch_size = 4


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 32, 3, stride=2, dilation=2, padding=2)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, 16, 64, 96)]


def get_init_inputs():
    return []

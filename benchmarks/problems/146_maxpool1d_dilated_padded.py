"""MaxPool1d with a window of 4, stride 2, padding 2 and dilation 3."""

import torch
import torch.nn as nn

batch_size = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool1d(4, stride=2, padding=2, dilation=3)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, 64, 4096)]


def get_init_inputs():
    return []

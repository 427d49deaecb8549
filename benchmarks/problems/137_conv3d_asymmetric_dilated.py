"""Conv3d with an asymmetric kernel (3x5x1) and dilation (2, 1, 1), then a leaky ReLU."""

import torch
import torch.nn as nn

batch_size = 2


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(8, 16, (3, 5, 1), dilation=(2, 1, 1), padding=(2, 2, 0))

    def forward(self, x):
        return nn.functional.leaky_relu(self.conv(x), 0.1)


def get_inputs():
    return [torch.randn(batch_size, 8, 16, 32, 32)]


def get_init_inputs():
    return []

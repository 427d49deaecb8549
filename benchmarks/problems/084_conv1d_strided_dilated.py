"""Conv1d with stride 2 and dilation 3, no bias.

Strided and dilated reads along the one spatial axis; 1018 outputs, no whole vector.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(32, 64, kernel_size=5, stride=2, dilation=3, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(8, 32, 2048)]


def get_init_inputs():
    return []

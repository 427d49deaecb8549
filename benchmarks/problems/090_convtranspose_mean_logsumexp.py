"""ConvTranspose2d, a global mean, a bias, logsumexp over channels, a sum and a scale.

A chain of reductions after an upsampling convolution.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(16, 32, 3)
        self.bias = nn.Parameter(torch.randn(32, 1, 1))

    def forward(self, x):
        x = self.conv_transpose(x)
        x = torch.mean(x, dim=(2, 3), keepdim=True)
        x = x + self.bias
        x = torch.logsumexp(x, dim=1, keepdim=True)
        x = torch.sum(x, dim=(2, 3))
        return x * 10.0


def get_inputs():
    return [torch.randn(16, 16, 32, 32)]


def get_init_inputs():
    return []

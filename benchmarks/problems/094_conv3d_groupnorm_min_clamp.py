"""Conv3d, GroupNorm, a minimum with zero, a clamp to [0, 1] and dropout (eval: none).

A 3-D convolution followed by a group norm and masks.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(3, 16, 3)
        self.gn = nn.GroupNorm(8, 16)
        self.drop = nn.Dropout(0.2)

    def forward(self, x):
        x = self.gn(self.conv(x))
        x = torch.min(x, torch.tensor(0.0))
        x = torch.clamp(x, min=0.0, max=1.0)
        return self.drop(x)


def get_inputs():
    return [torch.randn(4, 3, 16, 32, 32)]


def get_init_inputs():
    return []

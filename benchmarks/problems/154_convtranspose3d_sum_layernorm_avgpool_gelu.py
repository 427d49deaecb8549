"""ConvTranspose3d of stride 2, a learned bias added, LayerNorm over the last dim, AvgPool3d
and GELU."""

import torch
import torch.nn as nn

batch_size = 2


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.deconv = nn.ConvTranspose3d(8, 16, 3, stride=2, padding=1, output_padding=1)
        self.bias = nn.Parameter(torch.randn(1) * 0.1)
        self.norm = nn.LayerNorm(32)
        self.pool = nn.AvgPool3d(2)

    def forward(self, x):
        x = self.norm(self.deconv(x) + self.bias)
        return nn.functional.gelu(self.pool(x))


def get_inputs():
    return [torch.randn(batch_size, 8, 8, 16, 16)]


def get_init_inputs():
    return []

"""L2 normalisation of each row with F.normalize (x / max(||x||, eps)), then a scale.

A sum of squares per row, a square root, a clamp and a broadcast divide.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
rows = 128
features = 256
scale = 10.0


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return F.normalize(x, p=2.0, dim=-1) * self.scale


def get_inputs():
    return [torch.randn(batch_size, rows, features)]


def get_init_inputs():
    return [scale]

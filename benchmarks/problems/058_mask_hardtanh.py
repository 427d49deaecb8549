"""Hardtanh with bounds [-2, 2] applied to a scaled input.

A scalar multiply followed by a saturating piecewise-linear clip.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
dim1 = 256
dim2 = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.hardtanh(3.0 * x, min_val=-2.0, max_val=2.0)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return []

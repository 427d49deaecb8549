"""Sigmoid of the input and a boolean mask of where it exceeds a threshold, both returned.

Two outputs, one of them torch.bool: a check that non-float results come back right.
"""

import torch
import torch.nn as nn

batch_size = 16
dim1 = 256
dim2 = 256
threshold = 0.7


class Model(nn.Module):
    def __init__(self, threshold):
        super().__init__()
        self.threshold = threshold

    def forward(self, x):
        y = torch.sigmoid(x)
        return y, y > self.threshold


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [threshold]

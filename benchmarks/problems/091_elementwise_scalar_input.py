"""A matrix times a Python float given among the inputs.

A number beside the tensors in get_inputs(), baked in as a constant.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, s: float):
        return A * s


def get_inputs():
    return [torch.randn(1024, 1024), 3.14]


def get_init_inputs():
    return []

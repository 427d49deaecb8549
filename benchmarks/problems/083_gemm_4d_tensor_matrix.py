"""An einsum of a 4-D tensor with a matrix over its last axis ('bijl,lk->bijk').

A matmul whose rows are three collapsed leading axes.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.einsum("bijl,lk->bijk", A, B)


def get_inputs():
    return [torch.randn(4, 32, 32, 128), torch.randn(128, 96)]


def get_init_inputs():
    return []

"""F.smooth_l1_loss (Huber with beta 1): quadratic near zero, linear beyond, averaged.

A select between two element-wise branches, then a full reduction.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return F.smooth_l1_loss(predictions, targets)


def get_inputs():
    return [torch.randn(batch_size, 4096), torch.randn(batch_size, 4096)]


def get_init_inputs():
    return []

"""BatchNorm1d over the channels of a [N, C, L] sequence, then GELU and a 1x1 Conv1d."""

import torch
import torch.nn as nn

batch_size = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(64)
        self.proj = nn.Conv1d(64, 128, 1)

    def forward(self, x):
        return self.proj(nn.functional.gelu(self.bn(x)))


def get_inputs():
    return [torch.randn(batch_size, 64, 512)]


def get_init_inputs():
    return []

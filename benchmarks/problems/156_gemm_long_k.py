"""A product of two thin matrices with a long K: [128, 32768] x [32768, 128]."""

import torch
import torch.nn as nn

batch_size = 128


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(batch_size, 32768), torch.randn(32768, 128)]


def get_init_inputs():
    return []

"""One Linear whose output is split in two halves and combined as tanh(a) * sigmoid(b).

A gated (GLU-style) epilogue: the split is a slice of the GEMM result, not a second GEMM.
"""

import torch
import torch.nn as nn

batch_size = 16
seq_len = 32
in_features = 512
hidden = 512


class Model(nn.Module):
    def __init__(self, in_features, hidden):
        super().__init__()
        self.linear = nn.Linear(in_features, 2 * hidden)

    def forward(self, x):
        a, b = self.linear(x).chunk(2, dim=-1)
        return torch.tanh(a) * torch.sigmoid(b)


def get_inputs():
    return [torch.randn(batch_size, seq_len, in_features)]


def get_init_inputs():
    return [in_features, hidden]

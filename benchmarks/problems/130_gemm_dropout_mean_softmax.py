"""A Linear layer, dropout (eval: none), the mean over features and a softmax over it.

The softmax is over a dim of one, so every output is one; the chain still computes the
GEMM and the mean.
"""

import torch
import torch.nn as nn

batch_size = 128


class Model(nn.Module):
    def __init__(self, in_features, out_features, p):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.dropout = nn.Dropout(p)

    def forward(self, x):
        x = self.dropout(self.linear(x))
        x = torch.mean(x, dim=1, keepdim=True)
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, 1024)]


def get_init_inputs():
    return [1024, 512, 0.2]

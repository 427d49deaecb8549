"""Linear layer with bias followed by ReLU on a batch of token vectors.

The plainest GEMM epilogue: a bias add and a max(0, x) fused after the matmul.
"""

import torch
import torch.nn as nn

batch_size = 16
seq_len = 32
in_features = 512
out_features = 1024


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(batch_size, seq_len, in_features)]


def get_init_inputs():
    return [in_features, out_features]

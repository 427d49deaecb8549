"""Linear followed by BatchNorm1d (eval: running statistics) and GELU.

The eval-mode norm is a per-feature affine map that can be folded into the GEMM's weights.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_features = 1024
out_features = 512


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features)
        with torch.no_grad():  # non-trivial running statistics and affine parameters
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return F.gelu(self.bn(self.linear(x)))


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]

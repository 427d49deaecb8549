"""Three-layer MLP with ReLU between layers, narrowing to a small output.

A chain of three GEMMs on a 2-D batch, with shapes that shrink at the last layer.
"""

import torch
import torch.nn as nn

batch_size = 32
in_features = 1024
hidden = 768
out_features = 256


class Model(nn.Module):
    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(in_features, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, out_features),
        )

    def forward(self, x):
        return self.layers(x)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden, out_features]

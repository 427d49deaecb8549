"""Conv3d, a 2x2x2 max pool, logsumexp over the channels (kept) and ReLU."""

import torch
import torch.nn as nn

batch_size = 2


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(3, 16, 3, padding=1)
        self.pool = nn.MaxPool3d(2)

    def forward(self, x):
        x = self.pool(self.conv(x))
        return torch.relu(torch.logsumexp(x, dim=1, keepdim=True))


def get_inputs():
    return [torch.randn(batch_size, 3, 16, 32, 32)]


def get_init_inputs():
    return []

"""A batch of matrices times one shared matrix, broadcast over the batch, then a bias."""

import torch

batch_size = 16


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(256, 384) / 16)
        self.bias = torch.nn.Parameter(torch.randn(384))

    def forward(self, x):
        return torch.matmul(x, self.weight) + self.bias


def get_inputs():
    return [torch.randn(batch_size, 128, 256)]


def get_init_inputs():
    return []

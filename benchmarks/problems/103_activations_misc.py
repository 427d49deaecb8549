"""SELU, softplus, softsign and ELU, each on a share of the input, summed."""

import torch
from torch import nn

batch_size = 16


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (
            nn.functional.selu(x)
            + nn.functional.softplus(x, beta=2.0, threshold=10.0)
            + nn.functional.softsign(x)
            + nn.functional.elu(x, alpha=0.5)
        )


def get_inputs():
    return [torch.randn(batch_size, 4096)]


def get_init_inputs():
    return []

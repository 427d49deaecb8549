"""A cumulative sum of the elements a boolean mask keeps, the mask an input."""

import torch

batch_size = 64


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x * mask, dim=1)


def get_inputs():
    x = torch.randn(batch_size, 2048)
    return [x, torch.rand(batch_size, 2048) > 0.5]


def get_init_inputs():
    return []

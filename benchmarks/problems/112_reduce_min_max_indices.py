"""Minimum over a middle axis, and a top-1 (max with index) over the last."""

import torch

batch_size = 16


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        values, indices = torch.max(x, dim=2)
        return torch.min(x, dim=1).values, values, indices


def get_inputs():
    return [torch.randn(batch_size, 64, 256)]


def get_init_inputs():
    return []

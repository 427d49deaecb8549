"""A batched outer product and a contraction over two axes, written as einsums."""

import torch


class Model(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        outer = torch.einsum("bi,bj->bij", a, b)
        return torch.einsum("bij,jik->bk", outer, c)


def get_inputs():
    return [torch.randn(16, 64), torch.randn(16, 48), torch.randn(48, 64, 32)]


def get_init_inputs():
    return []

"""Upper-triangular matrices multiplied, and a batched einsum contraction."""

import torch

batch_size = 8


class Model(torch.nn.Module):
    def forward(
        self, a: torch.Tensor, b: torch.Tensor, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        upper = torch.triu(torch.matmul(torch.triu(a), torch.triu(b)))
        return upper, torch.einsum("bij,bjk->bik", x, y)


def get_inputs():
    return [
        torch.randn(256, 256),
        torch.randn(256, 256),
        torch.randn(batch_size, 64, 96),
        torch.randn(batch_size, 96, 48),
    ]


def get_init_inputs():
    return []

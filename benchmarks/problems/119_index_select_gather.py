"""Rows picked by an index tensor, scaled by values gathered along the columns."""

import torch

batch_size = 128


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        picked = torch.index_select(x, 0, rows)
        scale = torch.gather(picked, 1, cols)
        return picked * scale.sum(dim=1, keepdim=True)


def get_inputs():
    x = torch.randn(4096, 256)
    rows = torch.randint(0, 4096, (batch_size,))
    cols = torch.randint(0, 256, (batch_size, 8))
    return [x, rows, cols]


def get_init_inputs():
    return []

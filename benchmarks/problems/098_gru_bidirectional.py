"""A two-layer bidirectional GRU; its whole output sequence."""

import torch

batch_size = 2


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = torch.nn.GRU(16, 32, num_layers=2, batch_first=True, bidirectional=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x)
        return out


def get_inputs():
    return [torch.randn(batch_size, 10, 16)]


def get_init_inputs():
    return []

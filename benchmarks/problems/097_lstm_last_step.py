"""A one-layer LSTM over a short sequence; the last step's hidden state is projected."""

import torch

batch_size = 4


class Model(torch.nn.Module):
    def __init__(self, features: int = 32, hidden: int = 64, classes: int = 10) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(features, hidden, batch_first=True)
        self.head = torch.nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out[:, -1, :])


def get_inputs():
    return [torch.randn(batch_size, 12, 32)]


def get_init_inputs():
    return []

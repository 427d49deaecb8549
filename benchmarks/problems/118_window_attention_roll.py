"""Shifted-window attention as in a Swin block: roll the image, split it into windows,
attend within each window, merge the windows and roll back."""

import torch

batch_size = 2


class Model(torch.nn.Module):
    def __init__(self, dim: int = 64, window: int = 7, heads: int = 4) -> None:
        super().__init__()
        self.window, self.heads = window, heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        s, n = self.window, self.heads
        shifted = torch.roll(x, shifts=(-(s // 2), -(s // 2)), dims=(1, 2))
        windows = shifted.view(b, h // s, s, w // s, s, c).permute(0, 1, 3, 2, 4, 5)
        windows = windows.reshape(-1, s * s, c)
        q, k, v = self.qkv(windows).reshape(-1, s * s, 3, n, c // n).permute(2, 0, 3, 1, 4)
        attn = torch.softmax(q @ k.transpose(-2, -1) * (c // n) ** -0.5, dim=-1)
        out = self.proj((attn @ v).transpose(1, 2).reshape(-1, s * s, c))
        out = out.view(b, h // s, w // s, s, s, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)
        return torch.roll(out, shifts=(s // 2, s // 2), dims=(1, 2))


def get_inputs():
    return [torch.randn(batch_size, 28, 28, 64)]


def get_init_inputs():
    return []

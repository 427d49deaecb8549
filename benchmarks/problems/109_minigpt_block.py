"""A pre-norm GPT block: causal self-attention written out (masked_fill, softmax), then an MLP."""

import math

import torch
from torch import nn

batch_size = 2


class Model(nn.Module):
    def __init__(self, width: int = 128, heads: int = 4, length: int = 64) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"), nn.Linear(4 * width, width)
        )
        self.register_buffer(
            "mask", torch.tril(torch.ones(length, length)).view(1, 1, length, length)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.mlp(self.norm2(x))


def get_inputs():
    return [torch.randn(batch_size, 64, 128)]


def get_init_inputs():
    return []

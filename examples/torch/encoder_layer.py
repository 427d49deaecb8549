"""A BERT-style encoder layer: multi-head self-attention, residual and layernorm, then a GELU
MLP, residual and layernorm (sequence 128, hidden 768, 12 heads, f32).

    mlirtune run --torch examples/torch/encoder_layer.py:make
"""

import math

import torch


class EncoderLayer(torch.nn.Module):
    def __init__(self, hidden: int = 768, heads: int = 12, inner: int = 3072) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.out = torch.nn.Linear(hidden, hidden)
        self.norm1 = torch.nn.LayerNorm(hidden)
        self.up = torch.nn.Linear(hidden, inner)
        self.down = torch.nn.Linear(inner, hidden)
        self.norm2 = torch.nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sequence, hidden = x.shape
        q, k, v = self.qkv(x).split(hidden, dim=-1)
        q, k, v = (t.reshape(sequence, self.heads, -1).transpose(0, 1) for t in (q, k, v))
        scores = q @ k.transpose(1, 2) / math.sqrt(hidden // self.heads)
        attention = (scores.softmax(dim=-1) @ v).transpose(0, 1).reshape(sequence, hidden)
        x = self.norm1(x + self.out(attention))
        return self.norm2(x + self.down(torch.nn.functional.gelu(self.up(x))))


def make() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return EncoderLayer(), (torch.randn(128, 768),)

"""Cross attention (nn.MultiheadAttention): queries from one sequence, keys and values from
another, with a boolean key-padding mask that hides each batch's trailing keys."""

import torch
import torch.nn as nn

batch_size = 4
queries, keys, width, heads = 64, 96, 128, 4


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)

    def forward(self, q, kv, padding):
        out, _ = self.attn(q, kv, kv, key_padding_mask=padding, need_weights=False)
        return out


def get_inputs():
    lengths = torch.tensor([keys - 8 * i for i in range(batch_size)])
    padding = torch.arange(keys)[None, :] >= lengths[:, None]
    return [torch.randn(batch_size, queries, width), torch.randn(batch_size, keys, width), padding]


def get_init_inputs():
    return []

"""transformers' DistilBERT encoder (3 layers, width 256, 4 heads), built without weights,
on a batch of 128-token sequences."""

import torch
from transformers import DistilBertConfig, DistilBertModel

batch_size = 1
sequence = 128
vocabulary = 8192


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        config = DistilBertConfig(
            vocab_size=vocabulary,
            dim=256,
            n_layers=3,
            n_heads=4,
            hidden_dim=1024,
            max_position_embeddings=sequence,
        )
        self.net = DistilBertModel(config)

    def forward(self, tokens):
        return self.net(tokens).last_hidden_state


def get_inputs():
    return [torch.randint(0, vocabulary, (batch_size, sequence))]


def get_init_inputs():
    return []

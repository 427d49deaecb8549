"""transformers' BERT encoder (4 layers, width 256, 4 heads), built without weights, on a
batch of 128-token sequences."""

import torch
from transformers import BertConfig, BertModel

batch_size = 1
sequence = 128
vocabulary = 8192


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        config = BertConfig(
            vocab_size=vocabulary,
            hidden_size=256,
            num_hidden_layers=4,
            num_attention_heads=4,
            intermediate_size=1024,
            max_position_embeddings=sequence,
        )
        self.net = BertModel(config)

    def forward(self, tokens):
        return self.net(tokens).last_hidden_state


def get_inputs():
    return [torch.randint(0, vocabulary, (batch_size, sequence))]


def get_init_inputs():
    return []

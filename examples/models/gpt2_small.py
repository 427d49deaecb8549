"""transformers' GPT-2 decoder (4 layers, width 256, 4 heads), built without weights, on a
batch of 128-token sequences (no key-value cache: one forward pass)."""

import torch
from transformers import GPT2Config, GPT2Model

batch_size = 1
sequence = 128
vocabulary = 8192


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        config = GPT2Config(
            vocab_size=vocabulary,
            n_embd=256,
            n_layer=4,
            n_head=4,
            n_positions=sequence,
            bos_token_id=vocabulary - 1,  # the end-of-text token, within the smaller vocabulary
            eos_token_id=vocabulary - 1,
        )
        config.use_cache = False
        self.net = GPT2Model(config)

    def forward(self, tokens):
        # An explicit mask of ones: without one, transformers looks for packed sequences
        # (a cumulative sum over the positions), which torch-mlir leaves as tm_tensor.scan.
        mask = torch.ones_like(tokens)
        return self.net(tokens, attention_mask=mask).last_hidden_state


def get_inputs():
    return [torch.randint(0, vocabulary, (batch_size, sequence))]


def get_init_inputs():
    return []

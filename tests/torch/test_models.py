"""Real models nobody here wrote, built without weights: one of torchvision's, timm's and
transformers' each imports, splits into dispatches and verifies against torch eager.
Skipped without the torch and models extras."""

from __future__ import annotations

import importlib.util

import pytest

from mlirtune.api import engine_for
from mlirtune.targets.host_cpu import HostCPU

NEEDED = ("torch", "torch_mlir", "torchvision", "timm", "transformers")
pytestmark = [
    pytest.mark.jit,
    pytest.mark.skipif(
        any(importlib.util.find_spec(name) is None for name in NEEDED),
        reason="the torch and models extras are not installed (pip install -e '.[torch,models]')",
    ),
]


def torchvision_resnet18():
    import torch
    from torchvision.models import resnet18

    return resnet18(), (torch.randn(1, 3, 32, 32),)


def timm_vit():
    import timm
    import torch

    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, depth=2)
    return model, (torch.randn(1, 3, 32, 32),)


def transformers_gpt2(batch: int = 1):
    import torch
    from transformers import GPT2Config, GPT2Model

    class Decoder(torch.nn.Module):
        """GPT-2's hidden states, with a mask of ones (see examples/models/gpt2_small.py)."""

        def __init__(self) -> None:
            super().__init__()
            config = GPT2Config(vocab_size=512, n_embd=64, n_layer=2, n_head=2, n_positions=32)
            config.use_cache = False
            self.net = GPT2Model(config)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            mask = torch.ones_like(tokens)
            return self.net(tokens, attention_mask=mask).last_hidden_state

    return Decoder(), (torch.randint(0, 512, (batch, 32)),)


def transformers_gpt2_batched():
    """Over a batch, decomposing the attention left a view of its transposed output, which
    torch refused (mlirtune.torch.to_linalg.view)."""
    return transformers_gpt2(batch=2)


@pytest.mark.parametrize(
    "make", [torchvision_resnet18, timm_vit, transformers_gpt2, transformers_gpt2_batched]
)
def test_a_real_model_imports_splits_and_verifies(make):
    import torch

    import mlirtune.torch as mt

    torch.manual_seed(0)
    model, inputs = make()
    workload = mt.workload(model.eval(), inputs)
    result = engine_for(HostCPU()).execute(workload)
    assert result.verification.ok, result.verification.summary()
    dispatches = result.extra["dispatches"]
    assert len(dispatches) > 3  # split, not lowered whole
    assert sum(d["scheduled"] for d in dispatches) >= len(dispatches) // 2

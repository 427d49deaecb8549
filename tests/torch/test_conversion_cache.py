"""torch-mlir's conversions kept on disk (mlirtune/torch/conversions.py): a module imported
again reads its IR back without torch-mlir's child; another module, or other weights baked
in, converts anew; a cache that cannot be written or an IR too large to keep costs nothing
but the next conversion."""

from __future__ import annotations

import importlib.util

import pytest

from tests.torch import needs_torch

pytestmark = needs_torch

if importlib.util.find_spec("torch") is not None:
    import torch

    import mlirtune.torch.conversions as conversions
    import mlirtune.torch.importer as importer


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache folder of the test's own; the kept conversions' folder in it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "mlirtune" / "torch"


def linear(inputs: int, outputs: int) -> tuple[torch.nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(inputs, outputs), torch.nn.ReLU()), (
        torch.randn(4, inputs),
    )


def test_a_module_imported_again_reads_its_conversion_back(cache, monkeypatch):
    first = importer.import_module(*linear(16, 8))
    assert len(list(cache.glob("*.mlir"))) == 1
    monkeypatch.setattr(importer, "run_capped", None)  # a child started now would raise
    again = importer.import_module(*linear(16, 8))
    assert again.text == first.text


def test_another_module_or_other_baked_weights_convert_anew(cache):
    importer.import_module(*linear(16, 8))
    importer.import_module(*linear(16, 12))
    assert len(list(cache.glob("*.mlir"))) == 2
    module, inputs = linear(16, 8)
    importer.import_module(module, inputs, weights="constants")
    with torch.no_grad():
        module[0].weight.add_(1.0)
    changed = importer.import_module(module, inputs, weights="constants")
    assert len(list(cache.glob("*.mlir"))) == 4
    assert changed.outputs[0].shape == (4, 8)


def test_an_unwritable_cache_or_a_large_ir_is_not_kept(cache, monkeypatch):
    cache.parent.mkdir(parents=True)
    cache.write_text("a file where the folder would be")
    assert importer.import_module(*linear(16, 8)).text.count('"func.func"') == 1
    cache.unlink()
    monkeypatch.setattr(conversions, "LARGEST_KEPT_BYTES", 100)
    importer.import_module(*linear(16, 8))
    assert not cache.exists() or not list(cache.glob("*.mlir"))


def test_a_kept_conversion_that_cannot_be_read_converts_again(cache):
    importer.import_module(*linear(16, 8))
    (kept,) = cache.glob("*.mlir")
    kept.write_bytes(b"\xff\xfe not text")
    again = importer.import_module(*linear(16, 8))
    assert again.text.count('"func.func"') == 1

"""The convolution family's typed knobs, apart from the family (convolution/__init__.py) so
that the path modules it imports (nhwc.py, nchw_*.py) can take them too."""

from __future__ import annotations

from dataclasses import dataclass

from mlirtune.interfaces.schedule import KnobValues


@dataclass(frozen=True)
class ConvolutionKnobs(KnobValues):
    """A register tile of `ow_tile` output pixels x `f_tile` output channels (unit-stride
    nchw: `f_tile` rows of `ow_tile` vector columns, `oh_tile` output rows of them);
    `c_tile` input channels per filter-loop step; `flat_rows` 1 computes each output plane
    as one flat row (nchw_flat.py); `pack_filter` 1 copies each F_TILE filter slice
    contiguous once (nhwc.py); `threads` the tiles are spread over."""

    ow_tile: int
    f_tile: int
    c_tile: int
    oh_tile: int
    flat_rows: int
    pack_filter: int
    images_outer: int
    threads: int

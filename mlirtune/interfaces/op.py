"""OpInfo: the description of a root op that schedules, selectors and constraints work from."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class OpInfo:
    """What a schedule, selector or constraint generator needs to know about a root op.

    `kind` is one of: matmul, batch_matmul, conv2d, reduction, elementwise.
    `dims` names the loop sizes (M, N, K, B for contractions; N, OH, OW, F, KH, KW, C for
    NHWC convolutions; ROWS, COLS for row-wise and element-wise ops).
    """

    kind: str
    dims: dict[str, int]
    dtypes: tuple[str, ...]
    op_name: str = ""
    attributes: dict[str, int] = field(default_factory=dict)

    @property
    def element_type(self) -> str:
        return self.dtypes[0]

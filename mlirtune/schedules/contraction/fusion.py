"""The ops that every schedule of the contraction family fuses into, or tiles beside, a
contraction's tiles: its fill and an element-wise epilogue (an MLP's bias and ReLU)."""

POINTWISE = ("linalg.fill", "linalg.generic")

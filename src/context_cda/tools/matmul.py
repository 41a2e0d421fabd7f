"""The machine's fp32 matmul rate, the peak the benchmarks' utilisation figures and the CPU calibration divide by.

Imports torch only (no pydantic, no project config), so ``benchmarks/gpu/run.py`` can use it on a bare GPU image.
"""

from __future__ import annotations

import time


def measured_matmul_rate(rows: int = 2048, inner: tuple[int, int] = (768, 3072), repeats: int = 5) -> float:
    """fp32 FLOP/s of a ``rows x inner[0] @ inner[0] x inner[1]`` product with torch's threads, best of ``repeats``
    (default: a transformer layer's widest at GPT-2's width): the peak the benchmarks and the calibration divide by."""
    import torch

    a, b = torch.randn(rows, inner[0]), torch.randn(inner[1], inner[0])
    torch.nn.functional.linear(a, b)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(4):
            torch.nn.functional.linear(a, b)
        best = min(best, (time.perf_counter() - t) / 4)
    return 2.0 * rows * inner[0] * inner[1] / best

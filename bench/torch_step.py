"""PyTorch doing bench/gpu_work_bench.ts's training step: copy N float32
values to the GPU (`.to()`), reduce them (`.sum()`), copy the result back
(`.cpu()`). Median microseconds of 500 steps after 100 warm-up steps."""
import sys
import time

import torch

n = int(sys.argv[1])
data = torch.tensor([(i % 13) - 6 for i in range(n)], dtype=torch.float32)
expected = float(data.sum())
times = []
for step in range(600):
    start = time.perf_counter()
    total = data.to("cuda:0").sum().cpu()
    elapsed = (time.perf_counter() - start) * 1e6
    assert abs(float(total) - expected) <= 1e-3 * max(1.0, abs(expected))
    if step >= 100:
        times.append(elapsed)
times.sort()
print(f"torch step (.to(), .sum(), .cpu()): {times[len(times) // 2]:.1f} µs "
      f"(median of 500, torch {torch.__version__})")

"""CuPy RawKernel launch overhead on the same PTX as bench/gpu_work_bench.ts.

Median microseconds per launch of the `noop` kernel over 50 rounds of
back-to-back launches (after 10 warm-up rounds), each round ended by one
synchronisation, as the Deno side measures it.
"""
import sys
import time

import cupy as cp

ptx_path, launches = sys.argv[1], int(sys.argv[2])
module = cp.RawModule(path=ptx_path)
noop = module.get_function("noop")
per_launch = []
for round_ in range(60):
    start = time.perf_counter()
    for _ in range(launches):
        noop((1,), (1,), ())
    elapsed = time.perf_counter() - start
    cp.cuda.Stream.null.synchronize()
    if round_ >= 10:
        per_launch.append(elapsed * 1e6 / launches)
per_launch.sort()
print(f"cupy RawKernel launch: {per_launch[len(per_launch) // 2]:.2f} µs per launch "
      f"(median of 50 rounds of {launches}, cupy {cp.__version__})")

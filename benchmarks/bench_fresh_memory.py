"""How fast a host writes results into fresh memory: the cost under `invert`'s default
path on an accelerator, whose results are copied from the device into arrays the call
has just allocated (`invert(..., out=earlier)` writes into memory already written).

The arrays of a 1024 x 1024 x 64 float32 `invert` (w and residual float32, status int8,
iterations int32: 0.87 GB) are filled from arrays already written, by rows split over
threads as `lumaxlike._inverse.chunking.copy_rows` does, in five ways:

- "fresh, 1 thread": `np.empty`, one thread (every page faulted in on first write);
- "fresh, N threads": `np.empty`, N threads (faults in parallel);
- "populated, N threads": an anonymous map with MAP_POPULATE (the kernel faults every
  page in at once), then N threads;
- "huge pages asked, N threads": an anonymous map with MADV_HUGEPAGE, then N threads;
- "written, N threads": the same arrays again (no faults: bandwidth alone).

NumPy only (no JAX), so it runs on any host. Median of ``--repeat`` (3) runs each;
``--json PATH`` writes the figures with the host's kernel release, CPU count and
transparent-huge-page mode.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import platform
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

N_PROBLEMS = 1024 * 1024 * 64
DTYPES = (np.float32, np.int8, np.int32, np.float32)  # w, status, iterations, residual


def fill(targets, sources, pool, threads: int) -> None:
    """targets[k][...] = sources[k], by blocks of rows over `threads` threads."""
    for target, source in zip(targets, sources):
        if threads == 1:
            target[...] = source
            continue
        edges = np.linspace(0, len(target), 4 * threads + 1).astype(int)

        def block(first, last, target=target, source=source):
            target[first:last] = source[first:last]

        list(pool.map(lambda span: block(*span), zip(edges[:-1], edges[1:])))


def mapped(flags: int = 0, advice: int | None = None) -> list[np.ndarray]:
    """The result arrays in anonymous maps (`flags` added; `advice` given to madvise)."""
    arrays = []
    for dtype in DTYPES:
        size = N_PROBLEMS * np.dtype(dtype).itemsize
        memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | flags)
        if advice is not None:
            memory.madvise(advice)
        arrays.append(np.frombuffer(memory, dtype))
    return arrays


def measure(name, allocate, threads, sources, pool, repeat) -> dict:
    """Median and all seconds of allocating (`allocate()`) and filling, `repeat` times."""
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        targets = allocate()
        fill(targets, sources, pool, threads)
        seconds.append(time.perf_counter() - start)
        del targets
    print(
        f"{name}: {statistics.median(seconds):.3f} s (runs {', '.join(f'{s:.3f}' for s in seconds)})"
    )
    return {
        "case": name,
        "threads": threads,
        "median_s": statistics.median(seconds),
        "runs_s": seconds,
    }


def host() -> dict:
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    return {
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "transparent_hugepages": thp.read_text().strip() if thp.exists() else "absent",
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    sources = [np.ones(N_PROBLEMS, dtype) for dtype in DTYPES]
    bytes_total = sum(a.nbytes for a in sources)
    print(f"{bytes_total / 1e9:.2f} GB of results; host {host()}")
    written = [np.empty_like(a) for a in sources]
    threads, repeat = args.threads, args.repeat
    with ThreadPoolExecutor(threads) as pool:
        fill(written, sources, pool, threads)
        huge = getattr(mmap, "MADV_HUGEPAGE", None)
        cases = [
            ("fresh, 1 thread", lambda: [np.empty(N_PROBLEMS, d) for d in DTYPES], 1),
            ("fresh, N threads", lambda: [np.empty(N_PROBLEMS, d) for d in DTYPES], threads),
            ("populated, N threads", lambda: mapped(flags=mmap.MAP_POPULATE), threads),
            ("huge pages asked, N threads", lambda: mapped(advice=huge), threads),
            ("written, N threads", lambda: written, threads),
        ]
        rows = [measure(name, make, n, sources, pool, repeat) for name, make, n in cases]
    if args.json:
        report = {
            "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            "host": host(),
            "bytes": bytes_total,
            "rows": rows,
        }
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

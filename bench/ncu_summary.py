"""ncu_summary.py: per-kernel time table from an Nsight Compute CSV export.

Usage on the GPU machine:
  ncu --clock-control none --metrics gpu__time_duration.sum --csv \
      --launch-count N ./program args > ncu.csv
  python3 bench/ncu_summary.py ncu.csv [top]
Prints kernels ordered by total time: calls, total and mean microseconds,
share of the whole. Durations are as ncu measured them, one kernel at a
time (serialised, caches flushed between kernels by default), so they are
an upper bound of each kernel's share inside a graph.
"""
import csv
import io
import sys
from collections import defaultdict


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    text = open(path, errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        print("no ncu CSV table in", path)
        return 1
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    total = defaultdict(float)
    calls = defaultdict(int)
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = r.get("Metric Unit", "nsecond")
        v = float(r["Metric Value"].replace(",", ""))
        us = v / 1000.0 if unit.startswith("n") else v if unit.startswith("u") else v * 1000.0
        name = r["Kernel Name"].split("(")[0][:70]
        total[name] += us
        calls[name] += 1
    whole = sum(total.values())
    print(f"{len(rows)} kernel launches, {whole/1000:.2f} ms in all")
    print(f"{'kernel':72s} {'calls':>6s} {'total us':>10s} {'mean us':>9s} {'share':>6s}")
    for name, t in sorted(total.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{name:72s} {calls[name]:6d} {t:10.1f} {t/calls[name]:9.1f} {100*t/whole:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())

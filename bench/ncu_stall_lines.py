#!/usr/bin/env python3
"""ncu_stall_lines.py: the source lines of one kernel that hold most of its
warp-state samples, from `ncu -i REP --page source --csv --print-source sass` (an instruction a
row, "Address" for its line) or `cuda` (scripts/gpu-stall.sh runs both).

The page is one CSV table a source file (ncu prints each file's name on a
line of its own before its table, or not at all for one file): a header row
with a "Source" column, a "# " / "Line" column and the sampling columns
("Warp Stall Sampling (All Samples)", "... (Not-issued Samples)", and per
reason where ncu has them). Lines without samples are left out; the rest
are printed from the most sampled down until --cover of all samples (or
--top lines) are shown, each with its share, its file:line and its text.
"""
import argparse
import csv
import io
import sys


def number(text):
    try:
        return float(text.replace(",", ""))
    except (ValueError, AttributeError):
        return None


def parse(text):
    """Rows (file, line, source, {column: value}) of every table on the page."""
    rows, header, fname = [], None, "?"
    for rec in csv.reader(io.StringIO(text)):
        if not rec:
            continue
        if rec[0] == "File Name" and len(rec) == 2:  # ncu 2025's file line before each file's table
            fname, header = rec[1], None
            continue
        if len(rec) == 1 and not header:
            fname = rec[0].strip()
            continue
        if "Source" in rec:
            header = rec
            continue
        if header is None or len(rec) != len(header):
            if len(rec) == 1:
                fname, header = rec[0].strip(), None
            continue
        cells = dict(zip(header, rec))
        line = cells.get("#", cells.get("Line", cells.get("Line No", cells.get("Address", ""))))
        metrics = {k: number(v) for k, v in cells.items() if k not in ("#", "Line", "Line No", "Source", "Address")}
        rows.append((fname, line, cells.get("Source", ""), {k: v for k, v in metrics.items() if v is not None}))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=60, help="at most this many lines")
    ap.add_argument("--cover", type=float, default=0.95, help="stop once this share of the samples is shown")
    args = ap.parse_args()
    with open(args.csv, errors="replace") as f:
        text = f.read()
    rows = parse(text)
    if not rows:
        sys.exit("no source table in %s (first lines:)\n%s" % (args.csv, "\n".join(text.splitlines()[:20])))
    cols = sorted({k for r in rows for k in r[3]})
    key = next((c for c in cols if "Not-issued" in c), None) or next((c for c in cols if "Sampling" in c), None)
    if key is None:
        sys.exit("no warp-sampling column among: " + ", ".join(cols))
    reasons = [c for c in cols if c != key and ("stall" in c.lower() or "Sampling" in c)]
    total = sum(r[3].get(key, 0) for r in rows)
    print("%d source lines, %.0f samples in '%s'; columns: %s" % (len(rows), total, key, ", ".join(cols)))
    if total <= 0:
        return
    shown = 0.0
    ranked = sorted(rows, key=lambda r: -r[3].get(key, 0))
    print("%7s %7s  %-40s %s" % ("share", "cum", "file:line", "source"))
    for i, (fname, line, src, m) in enumerate(ranked):
        s = m.get(key, 0)
        if s <= 0 or i >= args.top or shown / total >= args.cover:
            break
        shown += s
        where = "%s:%s" % (fname.rsplit("/", 1)[-1], line)
        extra = ", ".join("%s %.0f" % (c, m[c]) for c in reasons if m.get(c))
        print("%6.1f%% %6.1f%%  %-40s %s%s" % (100 * s / total, 100 * shown / total, where[:40], src.strip()[:110],
                                              ("   [" + extra + "]") if extra else ""))


if __name__ == "__main__":
    main()

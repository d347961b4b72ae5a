#!/usr/bin/env python3
"""compare.py: one table of ours (``ssmtrade bench --json``) against PyTorch
(``bench/torch_bench.py --json``) from the same run on the same card, with
the targets of issue 7 and pass/fail:

  training step, 2,048 and 8,192 windows, bf16   >= 5x faster than PyTorch's best mode at bf16
  action step, 4,096 envs                         >= 5x faster than PyTorch's best mode (compile /
                                                  reduce-overhead) at the same precision
  action step, 128 envs, bf16                     ours under 150 us
  peak GPU memory, training step at 8,192         ours (held by the training state) <= PyTorch's
                                                  max_memory_allocated (smallest over its modes)
  full PPO at B = 4,096                           >= 200,000 env steps/s
  env + window builder at B = 65,536              >= 1e9 env steps/s

Ratios are PyTorch median / ours median at the same precision; "best mode"
is the fastest PyTorch mode that ran (with --quick not every mode runs).
Also: the card's ceilings, the throughput lines, and a roofline of our
training step (hand-counted FLOPs and an estimate of bytes, ssmtrade
bench's st_bench_train_cost, against the GEMM and copy ceilings measured
in the same run); PyTorch's achieved TFLOP/s uses the same count.

    python3 bench/compare.py ours.json torch.json [--more ours2.json ...] [--md bench.md]

--more: further ``ssmtrade bench --json`` files of the same build (the
benchmarks are often run in two device calls, e.g. ``--what train,act``
then ``--what envwin,e2e``): each fills the sections the first lacks. The
Throughput table says so when no file has envwin or e2e rows, and their
targets are then listed as not measured.

Prints the tables (markdown) and writes them to --md. Exit status 0, or 2
when a file is missing or unreadable; --strict: 1 when a target fails.
"""
import argparse
import json
import math
import sys

TRAIN_MODES = ("eager", "compile")
ACT_MODES = ("eager", "compile", "reduce-overhead")


def load(path):
    with open(path) as f:
        return json.load(f)


def ok_rows(rows):
    return [r for r in rows or [] if "error" not in r and "median_ms" in r]


def fmt_ms(x):
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"{x:.4g}"


def fmt_ratio(x):
    return "n/a" if x is None else f"{x:.2f}x"


def fmt_num(x, unit="", sep=""):
    """x with an SI prefix (k, M, G, T) and unit, sep between the number and them."""
    if x is None or not math.isfinite(x):
        return "n/a"
    for scale, suf in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{sep}{suf}{unit}"
    return f"{x:.3g}{sep}{unit}".rstrip()


def gib(b):
    return "n/a" if b is None else f"{b / 2**30:.2f} GiB"


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


class Targets:
    def __init__(self):
        self.rows = []

    def add(self, what, value, target, passed):
        verdict = "n/a" if passed is None else ("PASS" if passed else "FAIL")
        self.rows.append((what, value, target, verdict))
        return verdict


def torch_lookup(rows, key, n, prec):
    """{mode: median_ms} of the PyTorch rows of size n at prec."""
    return {r["mode"]: r["median_ms"] for r in ok_rows(rows) if r.get(key) == n and r.get("precision") == prec}


def train_section(ours, th, tg, lines):
    lines += ["", "## Training step (window build + forward + PPO loss + backward + clip + AdamW), ms", ""]
    rows = []
    for r in ours.get("train", []):
        n, p = r.get("windows"), r.get("precision")
        mine = r.get("median_ms") if "error" not in r else None
        t = torch_lookup(th.get("train"), "windows", n, p)
        best = min(t.values()) if t else None
        ratio = best / mine if best and mine else None
        target, verdict = "", ""
        if n in (2048, 8192) and p == "bf16":
            target = ">= 5x"
            verdict = tg.add(f"train {n} windows bf16 vs PyTorch best", fmt_ratio(ratio), target,
                             None if ratio is None else ratio >= 5)
        rows.append((n, p, fmt_ms(mine) if mine else "error: " + r.get("error", "?")[:60], fmt_ms(t.get("eager")),
                     fmt_ms(t.get("compile")), fmt_ratio(ratio), target, verdict))
    lines += table(["windows", "prec", "ours", "PyTorch eager", "PyTorch compile", "ratio vs best", "target",
                    "pass/fail"], rows)
    # memory at the largest size
    lines += ["", "Peak GPU memory of the training step:", ""]
    mrows = []
    for r in ours.get("train", []):
        if "error" in r:
            continue
        n, p = r["windows"], r["precision"]
        peaks = [x for x in ok_rows(th.get("train")) if x["windows"] == n and x["precision"] == p and
                 "peak_allocated_bytes" in x]
        low = min(peaks, key=lambda x: x["peak_allocated_bytes"]) if peaks else None
        verdict = ""
        if n == 8192:
            verdict = tg.add(f"train 8192 windows {p} peak memory <= PyTorch", gib(r.get("held_bytes")),
                             "<= " + (gib(low["peak_allocated_bytes"]) if low else "n/a"),
                             None if low is None else r["held_bytes"] <= low["peak_allocated_bytes"])
        mrows.append((n, p, gib(r.get("held_bytes")), gib(r.get("memgetinfo_delta_bytes")),
                      gib(low["peak_allocated_bytes"]) + f" ({low['mode']})" if low else "n/a",
                      gib(low.get("peak_reserved_bytes")) if low else "n/a", verdict))
    lines += table(["windows", "prec", "ours held", "ours cudaMemGetInfo delta", "PyTorch max allocated",
                    "PyTorch max reserved", "pass/fail"], mrows)


def act_section(ours, th, tg, lines):
    lines += ["", "## Action step (window + forward + sample; ours also steps the environments), ms", ""]
    rows = []
    for r in ours.get("act", []):
        n, p = r.get("envs"), r.get("precision")
        # with a bar table, the step's time plus its share of the table's build (once a rollout of T steps)
        mine = r.get("median_with_build_ms", r.get("median_ms")) if "error" not in r else None
        t = torch_lookup(th.get("act"), "envs", n, p)
        best = min(t.values()) if t else None
        comp = [t[m] for m in ("compile", "reduce-overhead") if m in t]
        ratio = best / mine if best and mine else None
        target, verdict = "", ""
        if n == 4096:
            target = ">= 5x"
            verdict = tg.add(f"act {n} envs {p} vs PyTorch best", fmt_ratio(ratio), target,
                             None if ratio is None else ratio >= 5)
        if n == 128 and p == "bf16":
            target = "ours < 150 us"
            verdict = tg.add("act 128 envs bf16 under 150 us", fmt_ms(mine) + " ms", target,
                             None if mine is None else mine < 0.150)
        rows.append((n, p, fmt_ms(mine) if mine else "error: " + r.get("error", "?")[:60], fmt_ms(t.get("eager")),
                     fmt_ms(min(comp)) if comp else "n/a", fmt_ms(t.get("reduce-overhead")), fmt_ratio(ratio),
                     target, verdict))
    lines += table(["envs", "prec", "ours", "PyTorch eager", "PyTorch compile (best mode)", "of which reduce-overhead",
                    "ratio vs best", "target", "pass/fail"], rows)
    if any(r.get("act_window") for r in ours.get("act", [])):
        lines += ["", "(ours: `--act-window 1`, the materialised window and the window forward, not the trainer's "
                  "action step)"]


def merge_ours(ours, more):
    """ours with every section (a list or object key) that it lacks taken from more."""
    for k, v in more.items():
        if k not in ours or (isinstance(v, list) and not ours[k]):
            ours[k] = v
    return ours


# The 1e9 target is the environment plus the window builder's. The row index
# (env_and_row_index) is graded against none: it leaves the window's feature
# reads to the forward (the gather, timed in act), so a pass would not be the
# builder's target met.
ENVWIN_TARGETS = {
    "env_and_window": "env + window builder B={envs}",
}


def throughput_section(ours, tg, lines):
    lines += ["", "## Throughput", ""]
    if not ours.get("e2e"):
        tg.add("full PPO B=4096", "not measured", ">= 200k", None)
    if not ours.get("envwin"):
        tg.add("env + window builder B=65536", "not measured", ">= 1e9", None)
    if not ours.get("e2e") and not ours.get("envwin"):
        lines += ["(no envwin or e2e rows in the JSON: run `ssmtrade bench --what envwin,e2e --json F` and pass F "
                  "with --more)"]
        return
    rows = []
    for r in ours.get("e2e", []):
        sps = r.get("env_steps_per_s")
        verdict = ""
        if r.get("envs") == 4096:
            verdict = tg.add(f"full PPO B=4096 {r.get('precision')}", fmt_num(sps, " steps/s"), ">= 200k",
                             None if sps is None else sps >= 2e5)
        rows.append((f"full PPO, B={r.get('envs')}, T={r.get('T', ours.get('e2e_rollout'))}, "
                     f"{r.get('epochs', ours.get('e2e_epochs'))} epochs, "
                     f"{r.get('precision')}", fmt_num(sps, " env steps/s") if sps else "error: " +
                     r.get("error", "?")[:60], f"update {r['update_s_median']:.3f} s" if sps else "", verdict))
    copy = ours.get("ceilings", {}).get("copy", {}).get("GBps")
    for r in ours.get("envwin", []):
        sps = r.get("env_steps_per_s")
        verdict, note = "", ""
        what = r.get("what")
        if what in ENVWIN_TARGETS:
            verdict = tg.add(ENVWIN_TARGETS[what].format(envs=r.get("envs")), fmt_num(sps, " steps/s"), ">= 1e9",
                             None if sps is None else sps >= 1e9)
        obs = r.get("obs_bytes", r.get("window_bytes"))
        if copy and obs:
            bound = r["envs"] / (obs / (copy * 1e9))
            kind = "window" if r.get("window_bytes") else "row index"
            note = f"{kind} at copy bandwidth: <= {fmt_num(bound, ' steps/s')}"
        if what == "env_and_row_index":
            note = "no target (the forward gathers the features, in act's time)" + ("; " + note if note else "")
        rows.append((f"{r.get('what')}, B={r.get('envs')}", fmt_num(sps, " env steps/s") if sps else "error: " +
                     r.get("error", "?")[:60], note, verdict))
    lines += table(["what", "ours", "note", "pass/fail"], rows)


def ceilings_section(ours, lines):
    c = ours.get("ceilings", {})
    lines += ["", "## Ceilings measured on the card in the same run", ""]
    rows = []
    if "GBps" in c.get("copy", {}):
        rows.append(("device-to-device copy (read + write)", f"{c['copy']['GBps']:.0f} GB/s"))
    for k, what in (("sgemm", "sgemm fp32, no TF32"), ("gemm_bf16", "gemm bf16 in/out, fp32 accumulate"),
                    ("gemm_fp32_fast_bf16", "gemm fp32 in/out on bf16 tensor cores (our bf16 linears)")):
        if "TFLOPs" in c.get(k, {}):
            rows.append((f"{what}, {c[k].get('size')}^3", f"{c[k]['TFLOPs']:.1f} TFLOP/s"))
    lines += table(["ceiling", "value"], rows or [("(none measured)", "")])


def roofline_section(ours, th, lines):
    c = ours.get("ceilings", {})
    copy = c.get("copy", {}).get("GBps")
    peak = {"fp32": c.get("sgemm", {}).get("TFLOPs"), "bf16": c.get("gemm_fp32_fast_bf16", {}).get("TFLOPs")}
    fpw = ours.get("train_flops_per_window")
    lines += ["", "## Roofline of the training step (FLOPs by hand: products and SSD contractions; bytes: "
                  "estimate, 3 x activations + 3 x window + 44 B/parameter)", ""]
    rows = []
    for r in ok_rows(ours.get("train")):
        n, p, s = r["windows"], r["precision"], r["median_ms"] * 1e-3
        tf, gbs = r["flops"] / s / 1e12, r["bytes_est"] / s / 1e9
        t = torch_lookup(th.get("train"), "windows", n, p)
        best = min(t.values()) if t else None
        ttf = (fpw * n / (best * 1e-3) / 1e12) if (fpw and best) else None
        rows.append((n, p, fmt_num(r["flops"], "FLOP"), fmt_num(r["bytes_est"], "B"), f"{tf:.2f}",
                     f"{100 * tf / peak[p]:.1f}%" if peak.get(p) else "n/a", f"{gbs:.0f}",
                     f"{100 * gbs / copy:.1f}%" if copy else "n/a",
                     f"{r['flops'] / r['bytes_est']:.1f}", f"{ttf:.2f}" if ttf else "n/a"))
    lines += table(["windows", "prec", "FLOPs", "bytes (est)", "ours TFLOP/s", "of GEMM ceiling", "ours GB/s",
                    "of copy ceiling", "FLOP/byte", "PyTorch best TFLOP/s"], rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ours", help="ssmtrade bench --json output")
    ap.add_argument("torch", help="bench/torch_bench.py --json output")
    ap.add_argument("--more", action="append", default=[], metavar="FILE",
                    help="another ssmtrade bench --json of the same build: fills the sections the first lacks")
    ap.add_argument("--md", help="also write the tables here (markdown)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target fails")
    a = ap.parse_args()
    try:
        ours = load(a.ours)
    except (OSError, ValueError) as e:
        print(f"compare: cannot read {a.ours}: {e}", file=sys.stderr)
        return 2
    for path in a.more:
        try:
            merge_ours(ours, load(path))
        except (OSError, ValueError) as e:
            print(f"compare: cannot read {path}: {e}", file=sys.stderr)
            return 2
    try:
        th = load(a.torch)
    except (OSError, ValueError) as e:
        print(f"compare: cannot read {a.torch}: {e} (PyTorch columns left empty)", file=sys.stderr)
        th = {}
    if "skipped" in ours:
        print(f"compare: ssmtrade bench measured nothing: {ours['skipped']}", file=sys.stderr)
    lines = ["# ssmtrade vs PyTorch, same card, same run", "",
             f"- ours: {ours.get('device', '?')}; preset {ours.get('preset', '?')}, "
             f"{ours.get('parameters', '?')} parameters; medians of {ours.get('repeats', '?')} "
             f"(CUDA graphs, {ours.get('sets', '?')} rotating input sets)",
             f"- PyTorch {th.get('torch', '?')} on {th.get('device', '?')}: {th.get('parameters', '?')} parameters; "
             f"medians of {th.get('repeats', '?')}, {th.get('sets', '?')} rotating input sets"
             f"{', --quick (not every mode ran)' if th.get('quick') else ''}; TF32 "
             f"{'on' if th.get('tf32') else 'off'}"]
    if ours.get("parameters") and th.get("parameters") and ours["parameters"] != th["parameters"]:
        lines.append(f"- WARNING: parameter counts differ ({ours['parameters']} vs {th['parameters']}): "
                     "not the same model")
    tg = Targets()
    train_section(ours, th, tg, lines)
    act_section(ours, th, tg, lines)
    throughput_section(ours, tg, lines)
    ceilings_section(ours, lines)
    roofline_section(ours, th, lines)
    lines += ["", "## Targets", ""]
    lines += table(["target", "measured", "wanted", "pass/fail"], tg.rows)
    verdicts = [r[3] for r in tg.rows]
    summary = (f"{verdicts.count('PASS')} pass, {verdicts.count('FAIL')} fail, {verdicts.count('n/a')} not measured")
    lines += ["", f"targets: {summary}"]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    return 1 if (a.strict and "FAIL" in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())

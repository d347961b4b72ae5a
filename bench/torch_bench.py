#!/usr/bin/env python3
"""torch_bench.py: the PyTorch side of the benchmark harness (issue 7): the
same model (bench/torch_model.py, checked against scripts/torch_reference.py
by ``torch_model.py --check``) timed on the shapes ``ssmtrade bench`` uses.

  train  windows built on the GPU from a features tensor by indexing (as our
         window builder does, inside the timed step) + forward + PPO loss +
         backward + clip_grad_norm_ + AdamW(fused=True); 128 / 2,048 / 8,192
         windows; modes eager and torch.compile (default mode), fp32 and bf16
         (torch.autocast; fp32 master weights, loss in fp32). Peak memory of
         the step: torch.cuda.max_memory_allocated, reset after the warm-up.
  act    window + forward + categorical sample (Gumbel-max on torch.rand)
         on 128 / 4,096 environments, under no_grad; modes eager,
         torch.compile default and mode="reduce-overhead" (CUDA graphs).

Every measurement: a warm-up (compiles, records CUDA graphs), then CUDA
events around each step, median / p10 / p90 over the repeats, rotating over
``--sets`` input sets. fp32 is strict fp32 (TF32 off for matmul and cuDNN),
the same precision as ours. torch.compile compiles per shape (dynamic=False)
and is slow: ``--quick`` runs only the configurations the targets compare
(train 2,048 and 8,192 compile bf16, 128 eager fp32; act 4,096
reduce-overhead bf16, 128 reduce-overhead fp32). The inductor cache goes to
$TORCHINDUCTOR_CACHE_DIR (default /tmp/torchinductor_ssmtrade).

    python3 bench/torch_bench.py [--quick] --json torch.json
    python3 bench/torch_bench.py --device cpu --smoke     # code-path check, no GPU, eager only
"""
import os

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/torchinductor_ssmtrade")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_model as tm  # noqa: E402

# src/train/train_config.h defaults
COEFS = dict(clip=0.2, vclip=0.2, vf_coef=0.5, ent_coef=0.05)
LR, BETAS, ADAM_EPS, WEIGHT_DECAY, MAX_GRAD_NORM = 5e-4, (0.9, 0.999), 1e-8, 0.01, 0.5
N_INST, BARS = 8, 12000  # the synthetic market's size (features are random here: times do not depend on values)
T0 = time.time()


def log(msg):
    print(f"[{time.time() - T0:7.1f}s] {msg}", flush=True)


def autocast(prec, device):
    if prec == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def quantile(xs, q):
    xs = sorted(xs)
    at = q * (len(xs) - 1)
    lo = int(math.floor(at))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (at - lo) * (xs[hi] - xs[lo])


def market(d, device, seed):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(N_INST * BARS, d["F"], generator=g).clamp_(-5, 5).to(device)
    offs = (torch.arange(N_INST) * BARS).to(device)
    return feats, offs


def input_sets(kind, n, d, sets, device, seed):
    """`sets` random input sets of n windows: (instrument, bar, context) and,
    for training, the PPO batch (actions, old log-probs, advantages, values, returns)."""
    g = torch.Generator().manual_seed(seed + 1000 * n)
    out = []
    for _ in range(sets):
        s = {
            "inst": torch.randint(0, N_INST, (n,), generator=g),
            "bar": torch.randint(d["K"] - 1, BARS, (n,), generator=g),
            "ctx": 0.5 * torch.randn(n, d["C"], generator=g),
        }
        if kind == "train":
            s["action"] = torch.randint(0, d["A"], (n,), generator=g)
            s["old_logp"] = -math.log(d["A"]) + 0.1 * torch.randn(n, generator=g)
            s["adv"] = torch.randn(n, generator=g)
            s["old_value"] = 0.5 * torch.randn(n, generator=g)
            s["ret"] = torch.randn(n, generator=g)
        out.append({k: v.to(device) for k, v in s.items()})
    return out


def new_model(d, device, seed):
    model = tm.init_params(tm.FastModel(d), seed).to(device=device, dtype=torch.float32)
    return model


def compiled(fn, mode):
    if mode == "eager":
        return fn
    return torch.compile(fn, mode=None if mode == "compile" else mode, dynamic=False)


def make_train_step(model, opt, d, mk, prec, mode, device):
    feats, offs = mk
    K = d["K"]
    params = list(model.parameters())

    def fwd_loss(inst, bar, ctx, action, old_logp, adv, old_value, ret):
        X = tm.build_windows(feats, offs, inst, bar, ctx, K)
        with autocast(prec, device):
            logits, value = model(X)
        return tm.ppo_loss(logits.float(), value.float(), action, old_logp, adv, old_value, ret, **COEFS)

    f = compiled(fwd_loss, mode)

    def step(s):
        opt.zero_grad(set_to_none=True)
        loss = f(s["inst"], s["bar"], s["ctx"], s["action"], s["old_logp"], s["adv"], s["old_value"], s["ret"])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, MAX_GRAD_NORM)
        opt.step()
        return loss

    return step


def make_act_step(model, d, mk, prec, mode, device):
    feats, offs = mk
    K = d["K"]

    def act(inst, bar, ctx):
        X = tm.build_windows(feats, offs, inst, bar, ctx, K)
        with autocast(prec, device):
            logits, value = model(X)
        logits = logits.float()
        u = torch.rand_like(logits).clamp(min=1e-12)
        action = torch.argmax(logits - torch.log(-torch.log(u)), dim=-1)  # a categorical sample
        logp = torch.log_softmax(logits, dim=-1).gather(1, action.unsqueeze(1)).squeeze(1)
        return action, logp, value.float()

    f = compiled(act, mode)
    mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)

    def step(s):
        if mode == "reduce-overhead" and mark is not None:
            mark()
        with torch.no_grad():
            return f(s["inst"], s["bar"], s["ctx"])

    return step


def time_step(step, sets, warmup, repeats, device):
    """(times dict, seconds of the first call: compilation included)."""
    cuda = device.type == "cuda"
    t0 = time.time()
    step(sets[0])
    if cuda:
        torch.cuda.synchronize()
    first_s = time.time() - t0
    for i in range(1, warmup):
        step(sets[i % len(sets)])
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    ms = []
    if cuda:
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
        for i in range(repeats):
            ev[i][0].record()
            step(sets[(warmup + i) % len(sets)])
            ev[i][1].record()
        torch.cuda.synchronize()
        ms = [a.elapsed_time(b) for a, b in ev]
    else:
        for i in range(repeats):
            t = time.perf_counter()
            step(sets[(warmup + i) % len(sets)])
            ms.append(1e3 * (time.perf_counter() - t))
    r = {"median_ms": quantile(ms, 0.5), "p10_ms": quantile(ms, 0.1), "p90_ms": quantile(ms, 0.9),
         "repeats": repeats, "first_call_s": first_s}
    if cuda:
        r["base_allocated_bytes"] = base
        r["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        r["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
    return r


def run_config(kind, n, mode, prec, a, d, mk, device):
    row = {"windows" if kind == "train" else "envs": n, "mode": mode, "precision": prec}
    tag = f"{kind} {n} {mode} {prec}"
    log(f"{tag}: warm-up{' (compiling)' if mode != 'eager' else ''} ...")
    model = opt = step = sets = None
    try:
        if mode != "eager":
            torch._dynamo.reset()
        model = new_model(d, device, a.seed)
        sets = input_sets(kind, n, d, a.sets, device, a.seed)
        if kind == "train":
            fused = {"fused": True} if device.type == "cuda" else {}
            opt = torch.optim.AdamW(tm.decay_groups(model, WEIGHT_DECAY), lr=LR, betas=BETAS, eps=ADAM_EPS, **fused)
            step = make_train_step(model, opt, d, mk, prec, mode, device)
        else:
            model.requires_grad_(False)
            step = make_act_step(model, d, mk, prec, mode, device)
        r = time_step(step, sets, max(a.warmup, 3 if mode != "eager" else 1), a.repeats, device)
        row.update(r)
        if kind == "train":
            loss = step(sets[0]).item()
            row["loss"] = loss
            if not math.isfinite(loss):
                row["error"] = f"non-finite loss {loss}"
        extra = ""
        if "peak_allocated_bytes" in r:
            extra = f", peak {r['peak_allocated_bytes'] / 2**30:.2f} GiB allocated"
        log(f"{tag}: median {r['median_ms']:.3f} ms (p10 {r['p10_ms']:.3f}, p90 {r['p90_ms']:.3f}), "
            f"first call {r['first_call_s']:.1f} s{extra}")
    except Exception as e:  # one failed configuration must not stop the others
        row["error"] = f"{type(e).__name__}: {e}"[:2000]
        log(f"{tag}: FAILED: {row['error'][:500]}")
        traceback.print_exc(limit=4)
    finally:
        del model, opt, step, sets
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return row


def configs(a):
    """(kind, n, mode, precision) in run order."""
    if a.quick:
        return [("train", 2048, "compile", "bf16"), ("train", 8192, "compile", "bf16"), ("train", 128, "eager", "fp32"),
                ("act", 4096, "reduce-overhead", "bf16"), ("act", 128, "reduce-overhead", "fp32")]
    out = []
    what = a.what.split(",")
    precs = a.precision.split(",")
    if "train" in what:
        for n in [int(x) for x in a.windows.split(",")]:
            for p in precs:
                for m in ("eager", "compile"):
                    if m in a.modes.split(","):
                        out.append(("train", n, m, p))
    if "act" in what:
        for n in [int(x) for x in a.envs.split(",")]:
            for p in precs:
                for m in ("eager", "compile", "reduce-overhead"):
                    if m in a.modes.split(","):
                        out.append(("act", n, m, p))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="write every number with its configuration here")
    ap.add_argument("--quick", action="store_true", help="only the configurations the targets compare")
    ap.add_argument("--preset", default="default", choices=sorted(tm.DIMS))
    ap.add_argument("--what", default="train,act")
    ap.add_argument("--windows", default="128,2048,8192")
    ap.add_argument("--envs", default="128,4096")
    ap.add_argument("--precision", default="fp32,bf16")
    ap.add_argument("--modes", default="eager,compile,reduce-overhead")
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--sets", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny preset, sizes 4 and 8, eager only, 3 repeats: checks the code paths (any device)")
    a = ap.parse_args()
    device = torch.device(a.device)
    if a.smoke:
        a.preset, a.windows, a.envs, a.modes, a.repeats, a.warmup, a.quick = "tiny", "4,8", "4,8", "eager", 3, 1, False
        if device.type == "cpu":  # CPU autocast's op lists differ from CUDA's (old versions reject bf16 LayerNorm)
            a.precision = "fp32"
    if device.type == "cuda" and not torch.cuda.is_available():
        print("torch_bench: no CUDA device (use --device cpu --smoke for a code-path check)", file=sys.stderr)
        return 3
    d = tm.DIMS[a.preset]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dcfg = getattr(getattr(torch, "_dynamo", None), "config", None)  # every compiled shape is its own entry
    for knob in ("recompile_limit", "cache_size_limit"):  # renamed in torch 2.6, old name an alias
        if dcfg is not None and hasattr(dcfg, knob):
            try:
                setattr(dcfg, knob, max(64, getattr(dcfg, knob)))
                break
            except Exception:  # noqa: BLE001 (a config knob we can live without)
                pass
    name = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"
    params = sum(p.numel() for p in tm.FastModel(d).parameters())
    log(f"torch {torch.__version__} on {name}; preset {a.preset} ({params} parameters); "
        f"inductor cache {os.environ['TORCHINDUCTOR_CACHE_DIR']}")
    result = {"tool": "torch_bench", "torch": torch.__version__, "device": name, "preset": a.preset, "dims": d,
              "parameters": params, "repeats": a.repeats, "warmup": a.warmup, "sets": a.sets, "quick": a.quick,
              "tf32": False, "train": [], "act": []}
    mk = market(d, device, a.seed)
    for kind, n, mode, prec in configs(a):
        result[kind].append(run_config(kind, n, mode, prec, a, d, mk, device))
        if a.json:  # written after every configuration: a run cut short keeps what it measured
            with open(a.json, "w") as f:
                json.dump(result, f, indent=1)
    failed = sum("error" in r for r in result["train"] + result["act"])
    result["failed"] = failed
    result["total_s"] = time.time() - T0
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
        log(f"wrote {a.json}")
    log(f"done: {len(result['train']) + len(result['act'])} configurations, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

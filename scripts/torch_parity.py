#!/usr/bin/env python3
"""torch_parity.py: whole-model parity of the C model with PyTorch autograd
(issue 6, "Whole-model parity with PyTorch"; DESIGN section 5 and the PPO
loss of src/train/ppo_loss.h).

Usage
-----
    cmake --build build --target model_io model_io_f32
    ./build/model_io --preset tiny --windows 3 --seed 1 --out /tmp/mio
    ./build/model_io_f32 /tmp/mio            # optional: the float32 C run
    python3 scripts/torch_parity.py /tmp/mio [more dirs...] [--strict-f32]

model_io writes the weights (every parameter under its DESIGN name), the
window and PPO batch, and the C float64 run's logits, value, loss and every
gradient (tools/model_io.h lists the layout). This script loads the weights
into scripts/torch_reference.py's nn.Module (load_state_dict, strict names),
runs it in float64 on the same batch, backpropagates the same PPO loss with
autograd, and prints for every tensor

    rel = norm(ours - torch) / norm(torch)     (the plain norm when norm(torch) = 0)

for: logits, value, the loss and its parts, the loss's gradient at logits
and value, every parameter gradient and the window gradient.

  float64 (C f64 vs torch f64, CPU): every rel <= 1e-10 or the exit status is
      1 (two float64 implementations of the same function agree to ~1e-13).
  float32, reported separately (exit status unaffected unless --strict-f32,
      then 2): the C float build (outputs_f32.safetensors, when present) and
      torch float32 on the GPU (when CUDA is available; TF32 off), each
      against torch float64; bounds 1e-5 for forward values and the loss,
      1e-4 for gradients.

Only torch is needed (no numpy, no safetensors package).

Results
-------
H200 machine, torch 2.11.0+cu130, C built with -DST_CUDA=OFF (CPU model),
seed 7; worst rel err over every tensor of the table (54 for L=1, 64 for L=2):

  preset (windows)   C f64 vs torch f64   C f32 vs torch f64   torch f32 GPU vs f64
  tiny    (8)        1.6e-15              1.4e-06              1.1e-06
  odd     (4)        8.3e-15              2.0e-06              6.7e-06
  default (3)        3.6e-15              3.3e-06              1.8e-06

(odd: K = 50 with Q = 16, so the chunked SSD's padded last chunk is covered;
default: two chunks of 32.) Every loss part, including clipfrac 0.375 on
tiny, i.e. both PPO clip regimes, matches. The torch float64 run takes
0.1-0.3 s on the CPU per preset; model_io about 0.4 s (tiny).

The check can fail: scaling the C gradient grad.mix.0.A_log by 1 + 1e-9 gives
rel err 1.0e-09 there and exit status 1; changing one weight of
vsn.var.fc1_w by a relative 1e-4 (so C ran on other weights than torch)
puts 52 of 54 tensors over 1e-10 (logits 9e-08) and exits 1.
"""
import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_reference as ref  # noqa: E402

BOUND_F64 = 1e-10
BOUND_F32_FWD = 1e-5
BOUND_F32_GRAD = 1e-4
FORWARD = ["logits", "value", "loss", "loss.policy", "loss.value", "loss.entropy", "loss.approx_kl",
           "loss.clipfrac"]


def load_dir(d):
    """Weights, batch and C outputs of a model_io folder."""
    wmeta, wt = ref.read_safetensors(os.path.join(d, "weights.safetensors"))
    _, bt = ref.read_safetensors(os.path.join(d, "batch.safetensors"))
    _, ot = ref.read_safetensors(os.path.join(d, "outputs.safetensors"))
    f32 = os.path.join(d, "outputs_f32.safetensors")
    o32 = ref.read_safetensors(f32)[1] if os.path.exists(f32) else None
    return wmeta, wt, bt, ot, o32


def torch_run(model, batch, device, dtype):
    """Forward, PPO loss and autograd backward; {name: tensor} in float64 on
    the CPU, named as in the outputs file."""
    torch = ref.torch
    model = model.to(device=device, dtype=dtype)
    model.zero_grad(set_to_none=True)
    cv = lambda name: batch[name].to(device=device, dtype=dtype)
    X = cv("window").clone().requires_grad_(True)
    logits, value = model(X)
    logits.retain_grad()
    value.retain_grad()
    loss, stats = ref.ppo_loss(logits, value, batch["action"].to(device), cv("old_logp"), cv("adv"),
                               cv("old_value"), cv("ret"))
    loss.backward()
    out = {"logits": logits, "value": value, "grad.logits": logits.grad, "grad.value": value.grad,
           "grad.window": X.grad}
    out.update({k: v.reshape(1) for k, v in stats.items()})
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad if p.grad is not None else torch.zeros_like(p)
    return {k: v.detach().to("cpu", torch.float64) for k, v in out.items()}


def rel_err(ours, theirs):
    """norm(ours - theirs) / norm(theirs); the plain norm when theirs is 0."""
    torch = ref.torch
    if tuple(ours.shape) != tuple(theirs.shape):
        return math.inf
    num = torch.linalg.vector_norm(ours - theirs).item()
    den = torch.linalg.vector_norm(theirs).item()
    return num / den if den > 0 else num


def compare(title, ours, theirs, bound_of):
    """Prints one table; returns the number of failures."""
    print(f"\n== {title}")
    print(f"{'tensor':34s} {'shape':>14s} {'norm(torch)':>12s} {'rel err':>10s} {'bound':>8s}")
    bad = 0
    names = FORWARD + ["grad.logits", "grad.value"] + sorted(
        k for k in theirs if k.startswith("grad.") and k not in ("grad.logits", "grad.value", "grad.window")) + [
            "grad.window"]
    for name in names:
        if name not in ours:
            print(f"{name:34s} missing from our outputs  FAIL")
            bad += 1
            continue
        e, b = rel_err(ours[name], theirs[name]), bound_of(name)
        ok = e <= b  # NaN fails
        bad += not ok
        shape = "x".join(str(s) for s in theirs[name].shape)
        norm = ref.torch.linalg.vector_norm(theirs[name]).item()
        print(f"{name:34s} {shape:>14s} {norm:12.4e} {e:10.2e} {b:8.0e}{'' if ok else '  FAIL'}")
    extra = sorted(set(k for k in ours if k.startswith("grad.")) - set(theirs))
    for name in extra:
        print(f"{name:34s} in our outputs but not a torch parameter  FAIL")
        bad += 1
    worst = max(rel_err(ours[n], theirs[n]) for n in names if n in ours)
    print(f"-- {len(names)} tensors, worst rel err {worst:.2e}, {bad} over the bound")
    return bad


def f32_bound(name):
    return BOUND_F32_FWD if name in FORWARD else BOUND_F32_GRAD


def check_dir(d):
    """(float64 failures, float32 failures) of one model_io folder."""
    torch = ref.torch
    wmeta, wt, bt, ot, o32 = load_dir(d)
    dims = ref.dims_from_meta(wmeta)
    model = ref.SsmTradeModel(dims)
    state = {k: ref.to_torch(v) for k, v in wt.items()}
    model.load_state_dict(state, strict=True)  # every name, both ways
    batch = {k: ref.to_torch(v) for k, v in bt.items()}
    ours = {k: ref.to_torch(v) for k, v in ot.items()}
    n = batch["window"].shape[0]
    print(f"\n######## {d}: preset {wmeta.get('preset', '?')}, seed {wmeta.get('seed', '?')}, {n} windows, "
          f"{sum(p.numel() for p in model.parameters())} parameters, sizes {dims}")
    t0 = time.time()
    theirs = torch_run(model, batch, "cpu", torch.float64)
    print(f"torch float64 CPU run: {time.time() - t0:.2f} s; loss C {ours['loss'].item():.17g} "
          f"torch {theirs['loss'].item():.17g}")
    bad64 = compare("C float64 vs torch float64 (bound 1e-10)", ours, theirs, lambda name: BOUND_F64)
    bad32 = 0
    if o32 is not None:
        c32 = {k: ref.to_torch(v) for k, v in o32.items()}
        bad32 += compare("C float32 vs torch float64 (bounds 1e-5 forward, 1e-4 gradients)", c32, theirs, f32_bound)
    else:
        print("\n(no outputs_f32.safetensors: run model_io_f32 DIR for the C float32 comparison)")
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        t0 = time.time()
        g32 = torch_run(model, batch, "cuda", torch.float32)
        print(f"\ntorch float32 on {torch.cuda.get_device_name(0)}: {time.time() - t0:.2f} s")
        bad32 += compare("torch float32 (GPU) vs torch float64 (bounds 1e-5 forward, 1e-4 gradients)", g32, theirs,
                         f32_bound)
    else:
        print("\n(no CUDA device: torch float32 GPU comparison skipped)")
    return bad64, bad32


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+", help="folders written by tools/model_io")
    ap.add_argument("--strict-f32", action="store_true", help="exit 2 when a float32 comparison is over its bound")
    a = ap.parse_args()
    if ref.torch is None:
        print("torch_parity: PyTorch is not installed", file=sys.stderr)
        return 3
    print(f"torch {ref.torch.__version__}")
    bad64 = bad32 = 0
    for d in a.dirs:
        b64, b32 = check_dir(d)
        bad64 += b64
        bad32 += b32
    print(f"\nSUMMARY: float64 parity {'PASS' if bad64 == 0 else 'FAIL'} ({bad64} over 1e-10); "
          f"float32 {'within bounds' if bad32 == 0 else f'{bad32} over bounds (reported, separate)'}")
    if bad64:
        return 1
    return 2 if (bad32 and a.strict_f32) else 0


if __name__ == "__main__":
    sys.exit(main())

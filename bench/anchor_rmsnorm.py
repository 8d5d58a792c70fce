"""Anchors for the RMSNorm benchmark: torch.nn.functional.rms_norm and an RMSNorm in
Triton tuned with @triton.autotune over 27 configs, on the same shapes and dtype,
timed with triton.testing.do_bench (CUDA events, L2 flushed, median), each called
eagerly and replayed from a CUDA graph of the same call (its GPU time without
Python's and the launch's host cost, which shows at the smallest sizes).

Prints one JSON object on stdout. Run by `cargo bench --bench rmsnorm`, in the same
process tree and on the same GPU as our kernel's timings.
"""

import argparse
import json
import sys
import time

import torch
import triton
import triton.language as tl

from cuda_graph import capture


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": block}, num_warps=warps, num_stages=stages)
        for block in (1024, 2048, 4096)
        for warps in (4, 8, 16)
        for stages in (1, 2, 3)
    ],
    key=["n_rows", "hidden"],
)
@triton.jit
def rmsnorm_kernel(x, w, y, n_rows, hidden, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    xr = x + row * hidden
    yr = y + row * hidden
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, hidden, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(xr + cols, mask=cols < hidden, other=0.0).to(tl.float32)
        acc += v * v
    inv = tl.rsqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < hidden
        v = tl.load(xr + cols, mask=mask, other=0.0).to(tl.float32)
        g = tl.load(w + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(yr + cols, (v * inv * g).to(tl.bfloat16), mask=mask)


def triton_rmsnorm(x, w, eps):
    n_rows, hidden = x.shape
    y = torch.empty_like(x)
    rmsnorm_kernel[(n_rows,)](x, w, y, n_rows, hidden, eps)
    return y


def rel_error(out, ref):
    out = out.double()
    if not torch.isfinite(out).all():
        return float("inf")
    return (torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref)).item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--eps", type=float, default=1e-5)
    parser.add_argument("--rows", type=int, nargs="+", required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    rows_out = []
    for n_rows in args.rows:
        x = (torch.rand(n_rows, args.hidden, device="cuda") * 4 - 2).to(torch.bfloat16)
        w = (torch.rand(args.hidden, device="cuda") + 0.5).to(torch.bfloat16)
        ref = x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + args.eps) * w.double()
        torch_fn = lambda: torch.nn.functional.rms_norm(x, (args.hidden,), w, args.eps)
        start = time.perf_counter()
        out = triton_rmsnorm(x, w, args.eps)
        torch.cuda.synchronize()
        tune_s = time.perf_counter() - start
        triton_err = rel_error(out, ref)
        torch_err = rel_error(torch_fn(), ref)
        triton_fn = lambda: triton_rmsnorm(x, w, args.eps)
        dst = torch.empty_like(x)
        copy_fn = lambda: dst.copy_(x)
        bench = lambda fn: triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
        # A replay is checked like the eager call it was captured from.
        torch_replay, torch_out = capture(torch_fn)
        triton_replay, triton_out = capture(triton_fn)
        for replay, replayed, eager_err in (
            (torch_replay, torch_out, torch_err),
            (triton_replay, triton_out, triton_err),
        ):
            replayed.fill_(float("nan"))
            replay()
            if rel_error(replayed, ref) > 2 * eager_err + 1e-6:
                raise SystemExit("a captured RMSNorm anchor is less accurate than its eager call")
        rows_out.append({
            "rows": n_rows,
            "torch_ms": bench(torch_fn),
            "triton_ms": bench(triton_fn),
            "torch_graph_ms": bench(torch_replay),
            "triton_graph_ms": bench(triton_replay),
            "copy_ms": bench(copy_fn),
            "triton_config": str(rmsnorm_kernel.best_config),
            "triton_tune_s": tune_s,
            "torch_rel_error": torch_err,
            "triton_rel_error": triton_err,
        })
        del x, w, ref, out, dst, torch_replay, torch_out, triton_replay, triton_out
        torch.cuda.empty_cache()
    json.dump({"torch": torch.__version__, "triton": triton.__version__, "gpu": torch.cuda.get_device_name(), "rows": rows_out}, sys.stdout)


if __name__ == "__main__":
    main()

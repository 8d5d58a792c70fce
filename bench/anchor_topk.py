"""Anchor for the top-k indexer benchmark: torch on the same shapes and dtype
(bf16 query and keys, f32 head weights): matmul, relu, weighted sum over heads,
torch.topk; two formulations of the head sum, the faster one is the anchor; and
torch.topk alone on the scores already computed (the selection by itself); timed
with triton.testing.do_bench (CUDA events, L2 flushed, median).

Prints one JSON object on stdout; run by `cargo bench --bench topk`.
"""

import argparse
import json
import sys

import torch
import triton


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--heads", type=int, default=64)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--top", type=int, default=2048)
    parser.add_argument("--ctx", type=int, nargs="+", required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    rows = []
    for n_ctx in args.ctx:
        q = (torch.rand(args.heads, args.dim, device="cuda") * 2 - 1).to(torch.bfloat16)
        k = (torch.rand(n_ctx, args.dim, device="cuda") * 2 - 1).to(torch.bfloat16)
        w = torch.rand(args.heads, device="cuda") * 1.25 - 0.25

        wb = w.to(torch.bfloat16)

        def f32_scores():
            # relu(q k^T) in bf16, the head sum in f32.
            return (torch.relu(q @ k.T).float() * w[:, None]).sum(0)

        def weighted_sum():
            return torch.topk(f32_scores(), args.top).indices

        def second_matmul():
            # The head sum as a second matrix product: w^T relu(q k^T).
            scores = wb @ torch.relu(q @ k.T)
            return torch.topk(scores, args.top).indices

        # The selection alone: torch.topk on the scores already computed (f32).
        scores = f32_scores()

        def select_only():
            return torch.topk(scores, args.top).indices

        bench = lambda fn: triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
        times = {"weighted_sum": bench(weighted_sum), "second_matmul": bench(second_matmul)}
        best = min(times, key=times.get)
        # The anchor is torch's faster formulation at each size.
        rows.append(
            {
                "n_ctx": n_ctx,
                "torch_ms": times[best],
                "torch_formulation": best,
                "torch_all_ms": times,
                "torch_topk_ms": bench(select_only),
            }
        )
        del q, k, w, scores
        torch.cuda.empty_cache()
    json.dump({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "rows": rows}, sys.stdout)


if __name__ == "__main__":
    main()

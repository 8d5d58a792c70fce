"""Anchor for the top-k indexer benchmark: torch on the same shapes and dtype
(bf16 query and keys, f32 head weights): q @ k.T, relu, the weighted sum over
heads, torch.topk.

Four formulations of the scores, each with torch.topk sorted and unsorted (ours
returns the set unordered, so torch need not sort it either):
  bf16_dots_f32_sum   relu(q @ k.T) in bf16, the head sum in f32
  bf16_dots_bf16_sum  the head sum as a second bf16 matrix product, w^T relu(q k^T)
  f32_dots_f32_sum    q @ k.T with f32 output (torch.mm out_dtype), the head sum in f32
  f32_dots_f32_matmul the same dots, the head sum as an f32 matrix product
Each formulation's top-k is checked as ours is (src/topk.rs `check_top_k`: against
the float64 scores, within 1e-4 of the largest): the two with bf16 dots round every
dot to 8 bits and fail it at 16k-128k. The anchor is the fastest formulation that
passes; the fastest of all (passing or not) is reported beside it.

Each is timed eagerly and replayed from a CUDA graph of the same call (torch's GPU
time without Python's and the launches' host cost: on the H200 machines the eager
time of one formulation moves 2x between back-to-back runs, the replay by 1%). And
torch.topk alone on f32 scores already computed (the selection by itself), the
faster of sorted and unsorted, eager and replayed. Timed with
triton.testing.do_bench (CUDA events, L2 flushed, median).

Prints one JSON object on stdout; run by `cargo bench --bench topk`.
"""

import argparse
import json
import sys

import torch
import triton

from cuda_graph import capture


def captured(fn, accept):
    """fn's replay from a CUDA graph, once `accept(indices)` holds for what a replay
    gives."""
    replay, out = capture(fn)
    out.fill_(-1)
    replay()
    if not accept(out):
        raise SystemExit("a captured torch formulation picked another top-k than its eager call")
    return replay


def violations(reference, indices, top):
    """src/topk.rs `check_top_k`: indices out of range or repeated, below the k-th
    score by more than eps, and indices above it by more than eps left out."""
    n = reference.numel()
    kth = torch.topk(reference, top).values[-1].item()
    eps = 1e-4 * reference.abs().max().item() + 1e-6
    indices = indices.long()
    valid = indices[(indices >= 0) & (indices < n)]
    bad = indices.numel() - valid.numel()
    unique = torch.unique(valid)
    bad += valid.numel() - unique.numel()
    bad += int((reference[unique] < kth - eps).sum())
    chosen = torch.zeros(n, dtype=torch.bool, device=reference.device)
    chosen[unique] = True
    bad += int(((reference > kth + eps) & ~chosen).sum())
    return bad


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
        # The reference of our check: every dot of bf16 values exact, the sum in f64.
        reference = (torch.relu(q.double() @ k.double().T) * w.double()[:, None]).sum(0)

        def f32_dots():
            return torch.mm(q, k.T, out_dtype=torch.float32)

        scores_of = {
            "bf16_dots_f32_sum": lambda: (torch.relu(q @ k.T).float() * w[:, None]).sum(0),
            "bf16_dots_bf16_sum": lambda: wb @ torch.relu(q @ k.T),
            "f32_dots_f32_sum": lambda: (torch.relu(f32_dots()) * w[:, None]).sum(0),
            "f32_dots_f32_matmul": lambda: w @ torch.relu(f32_dots()),
        }
        formulations = {}
        for name, scores in scores_of.items():
            for ordered in (True, False):
                label = name if ordered else name + "_unsorted"
                formulations[label] = (lambda s=scores, o=ordered: torch.topk(s(), args.top, sorted=o).indices)
        # Each formulation's own top-k, checked as ours is; the replay of one that
        # passes must pass too.
        failed = {name: violations(reference, fn(), args.top) for name, fn in formulations.items()}
        passing = [name for name in formulations if failed[name] == 0]

        def same_as_eager(name):
            return lambda out: failed[name] != 0 or violations(reference, out, args.top) == 0

        bench = lambda fn: triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
        eager = {name: bench(fn) for name, fn in formulations.items()}
        graph = {name: bench(captured(fn, same_as_eager(name))) for name, fn in formulations.items()}

        def fastest(times, names):
            return min(names, key=times.get) if names else None

        scores = scores_of["f32_dots_f32_sum"]()
        selections = {
            "sorted": lambda: torch.topk(scores, args.top).indices,
            "unsorted": lambda: torch.topk(scores, args.top, sorted=False).indices,
        }
        select = {name: bench(fn) for name, fn in selections.items()}
        select_graph = {
            name: bench(captured(fn, lambda out: violations(reference, out, args.top) == 0))
            for name, fn in selections.items()
        }
        best, best_graph = fastest(eager, passing), fastest(graph, passing)
        any_graph = fastest(graph, list(formulations))
        rows.append(
            {
                "n_ctx": n_ctx,
                # The anchor: torch's fastest formulation that passes our check.
                "torch_ms": eager[best] if best else None,
                "torch_formulation": best,
                "torch_graph_ms": graph[best_graph] if best_graph else None,
                "torch_graph_formulation": best_graph,
                # torch's fastest of all, whether or not it passes.
                "torch_any_graph_ms": graph[any_graph],
                "torch_any_graph_formulation": any_graph,
                "torch_violations": failed,
                "torch_all_ms": eager,
                "torch_graph_all_ms": graph,
                "torch_topk_ms": min(select.values()),
                "torch_topk_graph_ms": min(select_graph.values()),
                "torch_topk_all_ms": select,
                "torch_topk_graph_all_ms": select_graph,
            }
        )
        del q, k, w, wb, reference, scores
        torch.cuda.empty_cache()
    json.dump({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "rows": rows}, sys.stdout)


if __name__ == "__main__":
    main()

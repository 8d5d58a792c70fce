#!/usr/bin/env python3
"""Per kernel and key of a tuning table: the fastest valid variant of ours against
the fallback (cuBLAS for the GEMM, keep-all for the top-k indexer), both as the sweep
timed them side by side (same worker, same flush, same inputs), and the fastest
algo = 2 (Hopper) point where the kernel has one.

    python3 bench/table_vs_fallback.py kernels/tuning/nvidia-h200.json [kernel-prefix ...]
"""
import json
import sys


def main():
    table = json.load(open(sys.argv[1]))
    prefixes = sys.argv[2:] or [""]
    for name, kernel in table["kernels"].items():
        if not any(name.startswith(p) for p in prefixes):
            continue
        ranges = [(r["first"], r["last"] if r["last"] < 2**63 else "inf", r["variant"]) for r in kernel["ranges"]]
        print(f"{name} ({kernel['timing'].split('; ')[-1]}): ranges {ranges}")
        keys = sorted({m["key"] for v in kernel["variants"] for m in v["measurements"]})
        for key in keys:
            rows = [
                (m["median_us"], v["name"], v["role"])
                for v in kernel["variants"]
                if not v["rejected"]
                for m in v["measurements"]
                if m["key"] == key
            ]
            ours = sorted(r for r in rows if r[2] == "tuned")
            fallback = [r for r in rows if r[2] != "tuned"]
            if not ours:
                continue
            line = f"  {kernel['key']}={key:<7} best ours {ours[0][0]:9.2f} us ({ours[0][1]})"
            if fallback:
                line += f"  fallback {fallback[0][0]:9.2f} us  {fallback[0][0] / ours[0][0]:.3f}x"
            hopper = [r for r in ours if r[1].startswith("algo=2")]
            if hopper and fallback:
                line += f"  best algo=2 {hopper[0][0]:.2f} us {fallback[0][0] / hopper[0][0]:.3f}x ({hopper[0][1]})"
            print(line + f"  [{len(ours)} of ours timed]")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Each GEMM as a decode step calls it, beside what a tuning table measured for the
same kernel at the same m (issue 48, item 1: the sweep's timing judged by the step's).

    python3 bench/h200/step-vs-table.py DECODE.json TABLE.json

DECODE.json: `cargo bench --bench decode_step -- --variants --out DECODE.json` (its
`per_gemm` cuBLAS rows and `per_variant` rows); TABLE.json: a tuning table of the
same GPU. The step's kernel (`gemm`, `linear`) names the table's entries. A table
median timed from a single launch (a variant the sweep found hopeless) is shown but
left out of the summary."""
import json
import sys


def measured(table, kernel, n, k, name, m):
    entry = table["kernels"].get(f"{kernel}@n={n},k={k}")
    if entry is None:
        return None
    if name == "vendor:cuBLAS":
        # The vendor's default launch: the kernel sweep's incumbent where that is
        # the default, else (one of its points was) the incumbent of the vendor's
        # own sweep (`KernelTable::default_launch_us`).
        for size in entry["sizes"]:
            if size["key"] == m and size["incumbent"] == name:
                return size["incumbent_us"], None
        for size in entry.get("vendor_sizes", []):
            if size["key"] == m:
                return size["incumbent_us"], None
        return None
    for variant in entry["variants"]:
        if variant["name"] == name:
            for at in variant["measurements"]:
                if at["key"] == m:
                    return at["median_us"], at["repeats"]
    return None


def main():
    step = json.load(open(sys.argv[1]))
    table = json.load(open(sys.argv[2]))
    # The step's GEMM (`gemm`, or `linear` for --model llama-3.1-8b); files of
    # record from before `linear` have no `kernel`.
    kernel = step.get("kernel", "gemm")
    rows = [(r["m"], r["n"], r["k"], "vendor:cuBLAS", r["in_step_us"])
            for r in step.get("per_gemm", []) if r["path"] == "cuBLAS"]
    rows += [(r["m"], r["n"], r["k"], r["variant"], r["in_step_us"])
             for r in step.get("per_variant", []) if r["in_step_us"] is not None]
    print(f"{'m':>3} {'N x K':>12} {'step us':>9} {'table us':>9} {'table-step':>10} {'step/table':>10}  kernel")
    kept = []
    for m, n, k, name, us in rows:
        found = measured(table, kernel, n, k, name, m)
        if found is None:
            continue
        median, repeats = found
        single = repeats == 1
        note = "  (table: one launch)" if single else ""
        print(f"{m:>3} {f'{n} x {k}':>12} {us:9.2f} {median:9.2f} {median - us:10.2f} {us / median:10.3f}  {name}{note}")
        if not single:
            kept.append((us, median, name))
    if kept:
        within = sum(1 for us, median, _ in kept if abs(us / median - 1) <= 0.05)
        offsets = sorted(median - us for us, median, _ in kept)
        ratios = [us / median for us, median, _ in kept]
        print(f"\n{len(kept)} rows (one-launch medians left out): the table within 5% of the step at "
              f"{within}; step / table {min(ratios):.3f}-{max(ratios):.3f}; table - step "
              f"{offsets[0]:.2f} to {offsets[-1]:.2f} us, median {offsets[len(offsets) // 2]:.2f} us")
        cublas = [median - us for us, median, name in kept if name == "vendor:cuBLAS"]
        ours = [median - us for us, median, name in kept if name != "vendor:cuBLAS"]
        for what, values in (("cuBLAS", cublas), ("ours", ours)):
            if values:
                values.sort()
                print(f"  {what}: table - step median {values[len(values) // 2]:.2f} us over {len(values)} rows")


if __name__ == "__main__":
    main()

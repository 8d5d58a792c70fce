#!/usr/bin/env python3
"""Each duel of a tuning table beside the medians of the same two variants at its
key: a duel must time what the medians timed (session 39 found duels timed on
inputs never drawn, zeros, in a worker new to the key).

    python3 bench/h200/duel-vs-median.py TABLE.json [KERNEL_PREFIX]

Per entry: the duels' side / median ratios (incumbent and challenger), and every
duel whose side is more than 3% off its median, with the verdicts the duel and
the medians give."""
import json
import sys


def medians(entry):
    """(variant, key) -> median, over measurements of more than one launch."""
    out = {}
    for variant in entry["variants"]:
        for m in variant.get("measurements", []):
            if m["repeats"] > 1:
                out[(variant["name"], m["key"])] = m["median_us"]
    return out


def duels(entry):
    """(block, which, size, challenger, duel) for every duel and confirmation."""
    for block in ("vendor_sizes", "sizes"):
        for size in entry.get(block, []):
            challenger = size["winner"] if size["winner"] != size["incumbent"] else size["runner_up"]
            for which in ("duel", "confirmation"):
                duel = size.get(which)
                if duel and challenger:
                    yield block, which, size, challenger, duel


def main():
    table = json.load(open(sys.argv[1]))
    prefix = sys.argv[2] if len(sys.argv) > 2 else ""
    margin_of = lambda e: float(e.get("min_margin", 0.01))
    total = off = 0
    for name, entry in sorted(table["kernels"].items()):
        if not name.startswith(prefix):
            continue
        known = medians(entry)
        ratios = []
        for block, which, size, challenger, duel in duels(entry):
            # The decision's own medians where the variants' records lack them (a
            # vendor's point keeps its measurements only where it won).
            key = size["key"]
            a = known.get((size["incumbent"], key), size["incumbent_us"])
            b = known.get((challenger, key))
            if b is None and challenger == size["winner"]:
                b = size["winner_us"]
            if b is None:
                continue
            sides = (duel["incumbent_us"] / a, duel["challenger_us"] / b)
            ratios.extend(sides)
            total += 1
            if max(abs(s - 1) for s in sides) > 0.03:
                off += 1
                margin = margin_of(entry)
                by_duel = "challenger" if duel["low"] > 1 + margin else "incumbent"
                by_median = "challenger" if a / b > 1 + margin else "incumbent"
                print(
                    f"  {name} {block} {which} at {key}: incumbent {duel['incumbent_us']:.1f} us "
                    f"in the duel, {a:.1f} median ({sides[0]:.2f}x); challenger "
                    f"{duel['challenger_us']:.1f} / {b:.1f} ({sides[1]:.2f}x); duel {duel['ratio']:.3f} "
                    f"-> {by_duel}, medians {a / b:.3f} -> {by_median}"
                )
        if ratios:
            print(f"{name}: {len(ratios) // 2} duels, side / median {min(ratios):.2f}-{max(ratios):.2f}")
    print(f"{off} of {total} duels more than 3% off their medians")


if __name__ == "__main__":
    main()

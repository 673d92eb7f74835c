"""Reads an agent's growth curve (tokens per layer after each turn) from a strata store and writes
it as CSV, plus a PNG plot when matplotlib is installed (Debian: python3-matplotlib).

    python3 examples/python/growth_curves.py agents.db python-example --csv growth.csv --png growth.png
"""

from __future__ import annotations

import argparse
import csv
import sys
from typing import TextIO

import strata

LAYERS = ["system", "tools", "index", "docs", "history", "volatile"]


def write_csv(out: TextIO, header: list[str], rows: list[list[int]]) -> None:
    writer = csv.writer(out)
    writer.writerow(header)
    writer.writerows(rows)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", help="SQLite store file")
    parser.add_argument("agent", help="agent id")
    parser.add_argument("--csv", default="-", help="CSV output file ('-': standard output)")
    parser.add_argument("--png", default="", help="plot file (needs matplotlib)")
    args = parser.parse_args(argv)

    try:
        points = strata.Store.open(args.store).growth(args.agent)
    except strata.Error as e:
        print(f"growth_curves: {e}", file=sys.stderr)
        return 1
    rows = [[p.turn, *(p.layer_tokens[layer] for layer in LAYERS), p.total_tokens, p.compactions,
             p.invalidated_tokens, p.summary_input_tokens, p.summary_cached_tokens,
             p.summary_output_tokens] for p in points]
    header = ["turn", *LAYERS, "total", "compactions", "invalidated_tokens", "summary_input_tokens",
              "summary_cached_tokens", "summary_output_tokens"]
    if args.csv == "-":
        write_csv(sys.stdout, header, rows)
    else:
        with open(args.csv, "w", newline="") as f:
            write_csv(f, header, rows)
    if args.png:
        try:
            import matplotlib  # type: ignore[import]
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt  # type: ignore[import]
        except ImportError:
            print("growth_curves: matplotlib is not installed; wrote the CSV only", file=sys.stderr)
            return 0
        turns = [r[0] for r in rows]
        stacks = [[r[1 + i] for r in rows] for i in range(len(LAYERS))]
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.stackplot(turns, stacks, labels=LAYERS)
        ax.set_xlabel("turn")
        ax.set_ylabel("tokens")
        ax.set_title(f"{args.agent}: context size per layer")
        ax.legend(loc="upper left")
        fig.savefig(args.png, dpi=120, bbox_inches="tight")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Before/after tables for the compaction section of docs/benchmarks.md.

Reads bench_compaction outputs, one per (label, source): `label:source:FILE` arguments, where the
"after" files hold every policy and the "before" files at least the strata policy. Prints, per
budget, one row per source and overall (sums over the sources) for strata before and after: cost
against each baseline (none, sliding, last-n, clear-tool-uses, observation-masking; a baseline that
violates the budget is marked *) and against
the cheapest of them that respects the budget, prefix reuse, retention of old identifiers (and the
best baseline's), violations, pairing errors, compactions.

  bench/compaction_tables.py after:mini-swe-agent:A1.txt after:swe-agent:A2.txt \\
                             before:mini-swe-agent:B1.txt before:swe-agent:B2.txt
"""
import sys
from collections import defaultdict

BASELINES = ("none", "sliding", "last-n", "clear-tool-uses", "observation-masking")


def parse(path):
    rows, budget = {}, None
    for line in open(path):
        if line.startswith("### Budget "):
            budget = int(line.split()[2])
        elif line.startswith("| ") and not line.startswith("| policy") and budget is not None:
            c = [x.strip() for x in line.strip().strip("|").split("|")]
            kept, old = c[10].split("(")[1].rstrip(")").split("/")
            requests, mean = int(c[1]), float(c[5])
            rows[(c[0], budget)] = dict(requests=requests, violations=int(c[2]), pairing=int(c[3]),
                                        input=requests * mean, reused=float(c[6]) * requests * mean,
                                        cost=float(c[8]), kept=int(kept), old=int(old), compactions=int(c[11]))
    return rows


def add(a, b):
    return {k: a.get(k, 0) + b[k] for k in b}


def main():
    data = defaultdict(dict)  # (label, source) -> rows
    for arg in sys.argv[1:]:
        label, source, path = arg.split(":", 2)
        data[(label, source)].update(parse(path))
    sources = sorted({s for (_, s) in data})
    budgets = sorted({b for rows in data.values() for (_, b) in rows})
    for label in ("before", "after"):
        total = {}
        for source in sources:
            for key, row in data.get((label, source), {}).items():
                total[key] = add(total.get(key, {}), row)
        data[(label, "overall")] = total
    for b in budgets:
        print(f"\n#### Budget {b:,} tokens\n")
        print("| traces | strata | cost vs none | vs sliding | vs last-n | vs clear-tool-uses "
              "| vs observation-masking | vs cheapest in budget | prefix reuse | retention (best baseline) "
              "| violations | pairing errors | compactions |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for source in sources + ["overall"]:
            base = data[("after", source)]
            in_budget = [p for p in BASELINES if (p, b) in base and base[(p, b)]["violations"] == 0]
            best_ret = max(base[(p, b)]["kept"] / max(1, base[(p, b)]["old"]) for p in in_budget)
            cheapest = min(in_budget, key=lambda p: base[(p, b)]["cost"])
            for label in ("before", "after"):
                rows = data.get((label, source))
                if not rows or ("strata", b) not in rows:
                    continue
                s = rows[("strata", b)]
                rel = []
                for p in BASELINES:
                    if (p, b) not in base:
                        rel.append("n/a")
                        continue
                    r = s["cost"] / base[(p, b)]["cost"]
                    rel.append(f"{r:.3f}" + ("*" if base[(p, b)]["violations"] else ""))
                rel.append(f"{s['cost'] / base[(cheapest, b)]['cost']:.3f} ({cheapest})")
                print(f"| {source} ({s['requests']} requests) | {label} | {' | '.join(rel)} | "
                      f"{s['reused'] / s['input']:.3f} | {s['kept'] / max(1, s['old']):.3f} ({best_ret:.3f}) | "
                      f"{s['violations']} | {s['pairing']} | {s['compactions']} |")


if __name__ == "__main__":
    main()

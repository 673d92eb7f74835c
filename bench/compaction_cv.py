#!/usr/bin/env python3
"""Cross-validation of the strata policy's cost-model knobs between two trace sources.

For each source (a subdirectory of the traces directory) and budget, runs bench_compaction for the
baselines once and for the strata policy with every knob setting of the grid; scores a setting on a
source by its cost relative to the cheapest baseline that respects the budget, averaged over the
budgets (a setting that violates the budget, or keeps fewer old identifiers than the best baseline,
is marked). Then, in both directions, picks the best setting on one source and reports it on the
other, next to the other source's own best and the hysteresis-only policy (cost model off).

  bench/compaction_cv.py --bench build/bench/bench_compaction --traces DIR \\
      [--tokenizer estimate] [--budgets 8000,16000,32000] [--priors 5,20] [--margins 1,3]
      [--windows 3] [--after-use on,off]
"""
import argparse
import itertools
import os
import subprocess
import sys

BASELINES = ("none", "sliding", "last-n", "clear-tool-uses", "observation-masking")


def run(bench, tokenizer, traces, budgets, policies, extra):
    args = [bench, "--tokenizer", tokenizer, "--traces", traces, "--budgets", budgets,
            "--policies", policies, "--threads", "2"] + extra
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    rows, budget = {}, None
    for line in out.splitlines():
        if line.startswith("### Budget "):
            budget = int(line.split()[2])
        elif line.startswith("| ") and not line.startswith("| policy") and budget is not None:
            cells = [c.strip() for c in line.strip("|").split("|")]
            kept, old = cells[10].split("(")[1].rstrip(")").split("/")
            rows[(cells[0], budget)] = {
                "violations": int(cells[2]), "pairing": int(cells[3]), "reuse": float(cells[6]),
                "cost": float(cells[8]), "kept": int(kept), "old": int(old), "compactions": int(cells[11])}
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bench", required=True)
    p.add_argument("--traces", required=True)
    p.add_argument("--tokenizer", default="estimate")
    p.add_argument("--budgets", default="8000,16000,32000")
    p.add_argument("--priors", default="5,10,20,40")
    p.add_argument("--margins", default="1,2,4")
    p.add_argument("--windows", default="3")
    p.add_argument("--after-use", default="on,off")
    a = p.parse_args()
    budgets = [int(b) for b in a.budgets.split(",")]
    sources = sorted(d for d in os.listdir(a.traces) if os.path.isdir(os.path.join(a.traces, d)))
    grid = [("on", float(pr), float(m), int(w), au) for pr, m, w, au in
            itertools.product(a.priors.split(","), a.margins.split(","), a.windows.split(","),
                              a.after_use.split(","))]
    off = ("off", 10.0, 2.0, 3, "off")
    grid.append(off)
    score = {}  # (source, setting) -> (mean relative cost, ok, detail)
    for source in sources:
        traces = os.path.join(a.traces, source)
        base = run(a.bench, a.tokenizer, traces, a.budgets, ",".join(BASELINES), [])
        for setting in grid:
            model, prior, margin, window, after_use = setting
            rows = run(a.bench, a.tokenizer, traces, a.budgets, "strata",
                       ["--cost-model", model, "--prior", str(prior), "--margin", str(margin),
                        "--use-window", str(window), "--mask-after-use", after_use])
            rel, ok, notes = [], True, []
            for b in budgets:
                in_budget = [pol for pol in BASELINES if base[(pol, b)]["violations"] == 0]
                cheapest = min(base[(pol, b)]["cost"] for pol in in_budget)
                best_ret = max(base[(pol, b)]["kept"] / max(1, base[(pol, b)]["old"])
                               for pol in in_budget)
                s = rows[("strata", b)]
                rel.append(s["cost"] / cheapest)
                ret = s["kept"] / max(1, s["old"])
                if s["violations"] or s["pairing"]:
                    notes.append(f"{b}: {s['violations']} violations, {s['pairing']} pairing errors")
                if ret < best_ret - 1e-9:
                    notes.append(f"{b}: retention {ret:.3f} < {best_ret:.3f}")
                ok &= s["violations"] == 0 and s["pairing"] == 0 and ret >= best_ret - 1e-9
            score[(source, setting)] = (sum(rel) / len(rel), ok, rel)
            print(f"{source:16} {model:3} prior {prior:5} margin {margin:4} window {window} "
                  f"after-use {after_use:3}: "
                  f"mean {sum(rel)/len(rel):.3f} " + " ".join(f"{r:.3f}" for r in rel) +
                  ("" if ok else "  (" + "; ".join(notes) + ")"), flush=True)
    print()
    for tune, test in ((sources[0], sources[1]), (sources[1], sources[0])):
        cands = [s for s in grid if s[0] == "on" and score[(tune, s)][1]] or [s for s in grid if s[0] == "on"]
        best = min(cands, key=lambda s: score[(tune, s)][0])
        own = min((s for s in grid if s[0] == "on"), key=lambda s: score[(test, s)][0])
        print(f"tuned on {tune}: prior {best[1]}, margin {best[2]}, window {best[3]}, after-use {best[4]} "
              f"(mean {score[(tune, best)][0]:.3f} there) -> on {test}: {score[(test, best)][0]:.3f} "
              f"[{' '.join(f'{r:.3f}' for r in score[(test, best)][2])}]; "
              f"{test}'s own best {score[(test, own)][0]:.3f} (prior {own[1]}, margin {own[2]}, "
              f"after-use {own[4]}); "
              f"cost model off {score[(test, off)][0]:.3f}")
    worst = min((s for s in grid if s[0] == "on"),
                key=lambda s: max(score[(src, s)][0] for src in sources))
    print(f"best worst-case over sources: prior {worst[1]}, margin {worst[2]}, window {worst[3]}, "
          f"after-use {worst[4]}: " +
          ", ".join(f"{src} {score[(src, worst)][0]:.3f}" for src in sources))


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Cross-validation of named strata-policy variants between trace sources.

A variant is a name and the bench_compaction flags that make it ("defaults=" is the library's
defaults). Each source (a subdirectory of a --traces directory; several --traces may be given, e.g.
the shared traces and bench/synthetic_traces.py's shapes) is replayed once with the five baselines
and once per variant, at every budget; each run's output is kept in --out (a run already there is
read back instead of repeated). A variant's score on a source is its cost relative to the cheapest
baseline that respects the budget, per budget and as their mean; it is marked when it violates the
budget, breaks a pairing, or keeps fewer old identifiers than the best baseline in budget.

Then, for each source left out in turn, the variant chosen on the other sources of the same
--traces directory (the lowest mean among the unmarked ones there; the lowest mean if all are
marked) is reported on the left-out source, and the totals over every source at each budget.

  bench/compaction_variants_cv.py --bench build/bench/bench_compaction --traces TRACES \\
      [--traces SYN] --tokenizer SPEC --budgets 8000,32000 --out DIR \\
      --variant defaults= --variant "at-break=--mask-at-break on"
"""
import argparse
import os
import shlex
import subprocess
import sys

BASELINES = ("none", "sliding", "last-n", "clear-tool-uses", "observation-masking")


def parse(text):
    rows, budget = {}, None
    for line in text.splitlines():
        if line.startswith("### Budget "):
            budget = int(line.split()[2])
        elif line.startswith("| ") and not line.startswith("| policy") and budget is not None:
            c = [x.strip() for x in line.strip().strip("|").split("|")]
            kept, old = c[10].split("(")[1].rstrip(")").split("/")
            rows[(c[0], budget)] = {"requests": int(c[1]), "violations": int(c[2]),
                                    "pairing": int(c[3]), "cost": float(c[8]), "kept": int(kept),
                                    "old": int(old), "compactions": int(c[11])}
    return rows


def run(a, traces, name, policies, flags):
    path = os.path.join(a.out, f"{os.path.basename(traces)}.{name}.txt")
    if not os.path.exists(path):
        args = ["nice", "-n", "10", a.bench, "--tokenizer", a.tokenizer, "--traces", traces,
                "--budgets", a.budgets, "--policies", policies, "--threads", str(a.threads)] + flags
        out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
        with open(path, "w") as f:
            f.write(out)
    with open(path) as f:
        return parse(f.read())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bench", required=True)
    p.add_argument("--traces", action="append", required=True)
    p.add_argument("--tokenizer", default="estimate")
    p.add_argument("--budgets", default="8000,32000")
    p.add_argument("--out", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--variant", action="append", required=True, help="NAME=FLAGS")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    budgets = [int(b) for b in a.budgets.split(",")]
    variants = [(v.split("=", 1)[0], shlex.split(v.split("=", 1)[1])) for v in a.variant]
    groups = []  # sources per --traces directory
    base, rows = {}, {}
    for traces in a.traces:
        sources = sorted(d for d in os.listdir(traces) if os.path.isdir(os.path.join(traces, d)))
        groups.append(sources)
        for source in sources:
            directory = os.path.join(traces, source)
            base[source] = run(a, directory, "baselines", ",".join(BASELINES), [])
            for name, flags in variants:
                rows[(source, name)] = run(a, directory, name, "strata", flags)

    def cheapest(source, b):
        in_budget = [pol for pol in BASELINES if base[source][(pol, b)]["violations"] == 0]
        if not in_budget:
            return None, None, 0.0
        pol = min(in_budget, key=lambda q: base[source][(q, b)]["cost"])
        best_ret = max(base[source][(q, b)]["kept"] / max(1, base[source][(q, b)]["old"])
                       for q in in_budget)
        return pol, base[source][(pol, b)]["cost"], best_ret

    score = {}
    for sources in groups:
        for source in sources:
            for name, _ in variants:
                rel, ok, notes = [], True, []
                for b in budgets:
                    s = rows[(source, name)][("strata", b)]
                    pol, cost, best_ret = cheapest(source, b)
                    ret = s["kept"] / max(1, s["old"])
                    if s["violations"] or s["pairing"]:
                        ok = False
                        notes.append(f"{b}: {s['violations']} violations, {s['pairing']} pairing")
                    if cost is None:
                        continue
                    rel.append(s["cost"] / cost)
                    if ret < best_ret - 1e-9:
                        ok = False
                        notes.append(f"{b}: retention {s['kept']}/{s['old']} < {best_ret:.4f}")
                mean = sum(rel) / len(rel) if rel else 0.0
                score[(source, name)] = (mean, ok, rel)
                print(f"{source:20} {name:24} mean {mean:.3f} [" +
                      " ".join(f"{r:.3f}" for r in rel) + "]" +
                      ("" if ok else "  (" + "; ".join(notes) + ")"))
    print()
    for sources in groups:
        for test in sources:
            tune = [s for s in sources if s != test]
            if not tune:
                continue

            def tuned(name):
                return sum(score[(s, name)][0] for s in tune) / len(tune)
            clean = [n for n, _ in variants if all(score[(s, n)][1] for s in tune)]
            pick = min(clean or [n for n, _ in variants], key=tuned)
            m, ok, rel = score[(test, pick)]
            print(f"tuned on {'+'.join(tune)}: {pick} (mean {tuned(pick):.3f} there) -> on {test}: "
                  f"{m:.3f} [" + " ".join(f"{r:.3f}" for r in rel) + "]" +
                  ("" if ok else " (marked)"))
    print()
    for b in budgets:
        for sources in groups:
            # Overall: sums over the sources, against the baseline cheapest in sum among those that
            # respect the budget on every source.
            in_budget = [q for q in BASELINES
                         if all(base[s][(q, b)]["violations"] == 0 for s in sources)]
            if not in_budget:
                continue
            total = {q: sum(base[s][(q, b)]["cost"] for s in sources) for q in in_budget}
            pol = min(in_budget, key=total.get)
            best = max(sum(base[s][(q, b)]["kept"] for s in sources) /
                       max(1, sum(base[s][(q, b)]["old"] for s in sources)) for q in in_budget)
            for name, _ in variants:
                r = [rows[(s, name)][("strata", b)] for s in sources]
                kept, old = sum(x["kept"] for x in r), sum(x["old"] for x in r)
                print(f"{b:6} {'+'.join(sources):40} {name:24} overall "
                      f"{sum(x['cost'] for x in r) / total[pol]:.3f} ({pol}) retention "
                      f"{kept}/{old} (best baseline {best:.4f}) violations "
                      f"{sum(x['violations'] for x in r)} pairing {sum(x['pairing'] for x in r)} "
                      f"compactions {sum(x['compactions'] for x in r)}")

if __name__ == "__main__":
    sys.exit(main())

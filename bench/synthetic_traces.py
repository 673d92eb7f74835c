#!/usr/bin/env python3
"""Synthetic agent trajectories of shapes the shared traces lack, for the compaction benchmark.

The shared traces are coding agents (mini-swe-agent, SWE-agent) whose tool outputs are shell
output of medium length. A policy tuned on them alone may not hold on other agents, so this
generator writes three other shapes, each as a source directory in the trace format that
`bench_compaction --traces` and `strata replay` read (one JSON message per line, OpenAI-style
`tool_calls` and `tool` messages with `tool_call_id`):

  customer-service   a support agent calling JSON tool APIs (customers, orders, products,
                     returns): several user turns per conversation, 2-5 calls per user turn,
                     JSON answers of 0.2-3 KB, replies that quote ids learned turns earlier.
  short-observations a coding agent with many steps whose observations are short (exit codes,
                     one grep line, a diff stat: 20-300 characters): 80-250 calls.
  few-long-outputs   an agent with few calls, 2-4 of them answered with 8-40 KB (build logs,
                     file dumps, test reports) and the rest short; later steps use names that
                     appear only in the long outputs.

Every trajectory is a pure function of (shape, index, --seed): the same command writes the same
bytes. Identifiers that an assistant message reuses (snake_case names, paths, CamelCase types) are
drawn from earlier tool outputs, so the benchmark's retention metric has something to measure.

  bench/synthetic_traces.py --out DIR [--per-shape 20] [--seed 1] [--shapes a,b,c]

writes DIR/<shape>/<shape>-NN.jsonl and DIR/manifest.jsonl (id, source, file, n_messages,
chars, tool_chars), and prints one line per shape.
"""
import argparse
import json
import os
import random

SHAPES = ("customer-service", "short-observations", "few-long-outputs")

WORDS = ("alpha beta gamma delta parse render buffer header token cache index segment record "
         "window budget policy writer reader stream config loader handler session").split()
MODULES = ("billing", "catalog", "shipping", "auth", "search", "ledger", "inventory", "notify")


def snake(rng, parts=2):
    return "_".join(rng.choice(WORDS) for _ in range(parts))


def camel(rng):
    return "".join(rng.choice(WORDS).capitalize() for _ in range(2))


def path(rng):
    return "src/%s/%s.py" % (rng.choice(MODULES), snake(rng))


class Builder:
    """Accumulates one trajectory's messages and numbers its tool calls."""

    def __init__(self):
        self.messages = []
        self.calls = 0

    def add(self, role, content, **extra):
        m = {"role": role, "content": content}
        m.update(extra)
        self.messages.append(m)

    def call(self, text, name, arguments, result):
        self.calls += 1
        call_id = "call_%03d" % self.calls
        self.add("assistant", text, tool_calls=[{
            "id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}])
        self.add("tool", result, tool_call_id=call_id, name=name)


def customer_service(rng):
    b = Builder()
    b.add("system", "You are the support agent of an online store. Use the tools to look up "
          "customers, orders, products and returns; never invent an order or a price; quote the "
          "order_ref and sku of what you talk about. Refunds above 200 EUR need a supervisor.\n"
          + "Policy: " + " ".join(rng.choice(WORDS) for _ in range(180)))
    customer = "cust_%05d" % rng.randrange(100000)
    known = []
    for turn in range(rng.randint(3, 8)):
        ask = rng.choice(["Where is my order?", "I want to return an item.",
                          "Is the product back in stock?", "I was charged twice.",
                          "Can I change the shipping address?"])
        if known and rng.random() < 0.6:
            ask += " It is about %s." % rng.choice(known)
        b.add("user", ask)
        for _ in range(rng.randint(2, 5)):
            tool = rng.choice(["get_customer", "list_orders", "get_order", "search_products",
                               "get_inventory", "create_return"])
            order = "order_ref_%06d" % rng.randrange(10 ** 6)
            sku = "sku_%s_%04d" % (rng.choice(WORDS), rng.randrange(10000))
            items = [{"sku": sku if i == 0 else "sku_%s_%04d" % (rng.choice(WORDS), rng.randrange(10000)),
                      "name": camel(rng), "qty": rng.randint(1, 4),
                      "unit_price_eur": round(rng.uniform(3, 400), 2)}
                     for i in range(rng.randint(1, 12))]
            body = {"customer_id": customer, "order_ref": order, "status": rng.choice(
                ["shipped", "processing", "delivered", "refunded"]), "items": items,
                "carrier": {"name": rng.choice(["ups", "dhl", "gls"]),
                            "tracking_code": "TrackRef%08d" % rng.randrange(10 ** 8)},
                "notes": " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 60)))}
            result = json.dumps(body, indent=rng.choice([None, 2]))
            b.call("", tool, {"customer_id": customer, "order_ref": order}, result)
            known += [order, sku]
        reused = rng.sample(known, min(len(known), 3))
        b.add("assistant", "Here is what I found: %s. Anything else?" % ", ".join(reused))
    return b.messages


def short_observations(rng):
    b = Builder()
    b.add("system", "You are a coding agent. Run one shell command per step; keep going until "
          "the tests pass.")
    b.add("user", "Fix the failing test in %s (%s raises on an empty %s)." % (
        path(rng), camel(rng), snake(rng)))
    seen = []
    for step in range(rng.randint(80, 250)):
        p = rng.choice(seen) if seen and rng.random() < 0.5 else path(rng)
        kind = rng.choice(["grep", "test", "edit", "ls", "diff"])
        if kind == "grep":
            name = snake(rng, 3)
            out = "%s:%d:    def %s(self):" % (p, rng.randint(1, 900), name)
            seen.append(name)
        elif kind == "test":
            out = "%d passed, %d failed in %.2fs" % (rng.randint(0, 90), rng.randint(0, 3),
                                                      rng.uniform(0.1, 9))
        elif kind == "edit":
            out = "exit 0"
        elif kind == "ls":
            out = "\n".join(path(rng) for _ in range(rng.randint(1, 6)))
        else:
            out = " %s | %d %s" % (p, rng.randint(1, 40), "+" * rng.randint(1, 12))
        seen.append(p)
        cmd = {"grep": "grep -n def %s" % p, "test": "pytest -q %s" % p,
               "edit": "sed -i 's/%s/%s/' %s" % (snake(rng), snake(rng), p),
               "ls": "ls src/%s" % rng.choice(MODULES), "diff": "git diff --stat"}[kind]
        thought = "Looking at %s next." % (rng.choice(seen) if rng.random() < 0.4 else p)
        b.call(thought, "bash", {"command": cmd}, out)
    b.add("assistant", "The test passes now.")
    return b.messages


def long_block(rng, lines):
    out = []
    for i in range(lines):
        out.append(rng.choice([
            "%s:%d: warning: unused variable '%s'" % (path(rng), rng.randint(1, 900), snake(rng)),
            "PASSED tests/test_%s.py::test_%s" % (rng.choice(MODULES), snake(rng)),
            "[%05d] %s.%s took %d ms" % (i, camel(rng), snake(rng), rng.randint(1, 900)),
            "    at %s (%s:%d)" % (camel(rng), path(rng), rng.randint(1, 900))]))
    return "\n".join(out)


def few_long_outputs(rng):
    b = Builder()
    b.add("system", "You are a build engineer agent. Investigate the failing build and fix it.")
    b.add("user", "The nightly build of %s fails; find out why." % rng.choice(MODULES))
    long_left = rng.randint(2, 4)
    learned = []
    for step in range(rng.randint(6, 15)):
        if long_left and (rng.random() < 0.4 or step >= 8):
            long_left -= 1
            out = long_block(rng, rng.randint(150, 700))
            lines = out.splitlines()
            learned += [l.split(":")[0] for l in rng.sample(lines, 3)]
            b.call("Fetching the full log.", "bash", {"command": "cat build.log"}, out)
        else:
            target = rng.choice(learned) if learned else path(rng)
            b.call("Checking %s." % target, "bash", {"command": "head -n 5 %s" % target},
                   "\n".join("%d: %s = %s" % (i, snake(rng), camel(rng)) for i in range(5)))
    b.add("assistant", "The failure comes from %s." % (rng.choice(learned) if learned else "the log"))
    return b.messages


GENERATORS = {"customer-service": customer_service, "short-observations": short_observations,
              "few-long-outputs": few_long_outputs}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--per-shape", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--shapes", default=",".join(SHAPES))
    a = p.parse_args()
    manifest = []
    for shape in a.shapes.split(","):
        if shape not in GENERATORS:
            p.error("unknown shape %r (known: %s)" % (shape, ", ".join(SHAPES)))
        os.makedirs(os.path.join(a.out, shape), exist_ok=True)
        total = 0
        for i in range(a.per_shape):
            rng = random.Random("%s/%d/%d" % (shape, i, a.seed))
            messages = GENERATORS[shape](rng)
            name = "%s/%s-%02d.jsonl" % (shape, shape, i)
            with open(os.path.join(a.out, name), "w", encoding="utf-8") as f:
                for m in messages:
                    f.write(json.dumps(m, ensure_ascii=False) + "\n")
            chars = sum(len(m["content"]) for m in messages)
            tool_chars = sum(len(m["content"]) for m in messages if m["role"] == "tool")
            manifest.append({"id": "%s-%02d" % (shape, i), "source": shape, "file": name,
                             "n_messages": len(messages), "chars": chars, "tool_chars": tool_chars})
            total += chars
        print("%s: %d trajectories, %d characters" % (shape, a.per_shape, total))
    with open(os.path.join(a.out, "manifest.jsonl"), "w", encoding="utf-8") as f:
        for m in manifest:
            f.write(json.dumps(m) + "\n")


if __name__ == "__main__":
    main()

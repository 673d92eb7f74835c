#!/usr/bin/env python3
"""`strata probe` end to end.

Two strata-sim children answer in --answer retrieve mode, B with a degradation past depth 0.7. The
docs/probe.md example runs as written (it must exit 1 naming the two deep buckets); one endpoint
alone passes; an endpoint that always fails has its requests reported apart; then the HTML report
is opened in headless Chromium and its heatmap and recovery cells are read back from the page and
compared with the JSON. Chromium is installed by scripts/setup, so a missing one fails the test.

usage: check_probe.py STRATA STRATA_SIM REPOSITORY
"""
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

CLI, SIM, REPO = sys.argv[1:4]


def start_sim(*args):
    proc = subprocess.Popen([SIM, "--port", "0", *args], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    match = re.search(r"http=(\S+)", line)
    assert match, "strata-sim did not start: %r" % line
    return proc, "http://%s/v1" % match.group(1)


def docs_example():
    text = open(os.path.join(REPO, "docs", "probe.md"), encoding="utf-8").read()
    match = re.search(r"<!-- run by tests/integration/probe/check_probe.py -->\n```sh\n(.*?)```", text, re.S)
    assert match, "docs/probe.md lost its tested example"
    return match.group(1)


def run(command, env, cwd):
    return subprocess.run(["bash", "-c", command], env=env, cwd=cwd, capture_output=True, text=True, timeout=240)


class Cells(html.parser.HTMLParser):
    """The td elements with class cell or recovery: their attributes and text."""

    def __init__(self):
        super().__init__()
        self.cells, self.current = [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "td" and attrs.get("class", "").split()[:1] in (["cell"], ["recovery"]):
            self.current = dict(attrs, text="")
            self.cells.append(self.current)

    def handle_endtag(self, tag):
        if tag == "td":
            self.current = None

    def handle_data(self, data):
        if self.current is not None:
            self.current["text"] += data


def check_results(results, stderr):
    a, b = results["endpoints"]
    for bucket in a["buckets"]:
        assert bucket["accuracy"] == 1.0 and bucket["failed"] == 0, bucket
    for bucket in b["buckets"]:
        want = 0.0 if bucket["depth"] > 0.7 else 1.0
        assert bucket["accuracy"] == want, bucket
    for row in results["recovery"]:
        assert row["recovery"] == (0.0 if row["depth"] > 0.7 else 1.0), row
    assert len(results["failing"]) == 2, results["failing"]
    for name in ("length 4k, depth 0.90", "length 16k, depth 0.90"):
        assert name in stderr, stderr
    assert "depth 0.10" not in stderr and "depth 0.50" not in stderr, stderr
    assert results["worst"] and all(w["endpoint"] == "B" for w in results["worst"])


def check_page(dom, results):
    parser = Cells()
    parser.feed(dom)
    heat = [c for c in parser.cells if c["class"] == "cell"]
    recovery = [c for c in parser.cells if c["class"].startswith("recovery")]
    buckets = {(e["name"], b["length"], b["depth"]): b for e in results["endpoints"] for b in e["buckets"]}
    assert len(heat) == len(buckets), (len(heat), len(buckets))
    for cell in heat:
        bucket = buckets[(cell["data-endpoint"], cell["data-length"], float(cell["data-depth"]))]
        assert abs(float(cell["data-accuracy"]) - bucket["accuracy"]) < 1e-3, (cell, bucket)
        assert int(cell["data-probes"]) == bucket["probes"] and int(cell["data-correct"]) == bucket["correct"]
        assert abs(float(cell["data-low"]) - bucket["interval"][0]) < 1e-3
        shown = re.match(r"(\d+)%", cell["text"])  # the number a reader sees
        assert shown and int(shown.group(1)) == round(bucket["accuracy"] * 100), cell
    rows = {(r["length"], r["depth"]): r for r in results["recovery"]}
    assert len(recovery) == len(rows)
    for cell in recovery:
        row = rows[(cell["data-length"], float(cell["data-depth"]))]
        assert abs(float(cell["data-recovery"]) - row["recovery"]) < 1e-3, (cell, row)
        assert abs(float(cell["text"]) - row["recovery"]) < 0.01
        assert ("fail" in cell["class"]) == (row["recovery"] < 0.95)
    return len(heat), len(recovery)


def main():
    work = tempfile.mkdtemp(prefix="strata-probe-")
    sims = []
    try:
        a_proc, a_url = start_sim("--answer", "retrieve")
        b_proc, b_url = start_sim("--answer", "retrieve", "--degrade", "depth>0.7:p=1")
        f_proc, f_url = start_sim("--answer", "retrieve", "--fault", "503")
        sims = [a_proc, b_proc, f_proc]
        for name in ("tests", "docs"):
            os.symlink(os.path.join(REPO, name), os.path.join(work, name))
        tools = os.path.join(work, "bin")
        os.mkdir(tools)
        os.symlink(CLI, os.path.join(tools, "strata"))
        env = dict(os.environ, PATH=tools + os.pathsep + os.environ.get("PATH", ""), A=a_url, B=b_url)

        example = run(docs_example(), env, work)
        assert example.returncode == 1, (example.returncode, example.stderr)
        results = json.load(open(os.path.join(work, "probe.json")))
        check_results(results, example.stderr)
        assert "probe: " in example.stderr  # progress

        alone = run('strata probe --endpoint "$A" --source tests/data --lengths 4k --probes-per-bucket 3 '
                    "--min-recovery 0.95 --no-progress --json alone.json", env, work)
        assert alone.returncode == 0, alone.stderr
        assert json.load(open(os.path.join(work, "alone.json")))["failing"] == []

        faulty = run('strata probe --endpoint "%s" --source tests/data --lengths 4k --depths 0.5 '
                     "--probes-per-bucket 1 --retries 0 --no-progress --json faulty.json" % f_url, env, work)
        assert faulty.returncode == 1 and "failed after retries" in faulty.stderr, faulty.stderr
        endpoint = json.load(open(os.path.join(work, "faulty.json")))["endpoints"][0]
        assert endpoint["failed"] == 1 and endpoint["probes"] == 0 and endpoint["accuracy"] is None, endpoint
        assert "503" in endpoint["failure_samples"][0]["error"]

        usage = run('strata probe --endpoint "$A" --source tests/data --depths 2', env, work)
        assert usage.returncode == 2 and '"2"' in usage.stderr, usage.stderr

        bad = subprocess.run([SIM, "--port", "0", "--answer", "retrieve", "--degrade", "deep:p=0.5"],
                             capture_output=True, text=True, timeout=30)
        assert bad.returncode == 2 and "deep:p=0.5" in bad.stderr, bad.stderr
        bad = subprocess.run([SIM, "--port", "0", "--degrade", "depth>0.5:p=0.5"], capture_output=True, text=True, timeout=30)
        assert bad.returncode == 2 and "needs --answer retrieve" in bad.stderr, bad.stderr

        browser = shutil.which("chromium") or shutil.which("chromium-browser")
        if not browser:
            print("FAILED: chromium is not installed (run scripts/setup, which installs it)")
            return 1
        dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                              "--no-first-run", "--user-data-dir=" + os.path.join(work, "profile"), "--dump-dom",
                              "file://" + os.path.join(work, "probe.html")],
                             capture_output=True, text=True, timeout=120)
        assert dom.returncode == 0, dom.stderr
        heat, recovery = check_page(dom.stdout, results)
        print("strata probe: the example failed as it should; %d heatmap and %d recovery cells match the JSON"
              % (heat, recovery))
        return 0
    finally:
        for proc in sims:
            proc.terminate()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

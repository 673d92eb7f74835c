"""strata-sidecar's console (/ui) and `strata inspect --html`, checked in headless Chromium: a
sidecar over strata-sim with two tenants and a metrics token; agents driven over gRPC so that
one has a prefix break from a document version change and one from a compaction. The pages are
loaded in Chromium (DOM dumped after the page's requests finished, network log kept) and read
back: the agents list, every bar against the records, the marks with their causes, nothing
loaded from any other host, another tenant's agent invisible through every route. A screenshot
of each page is kept in the build tree (test-artifacts/console-*.png)."""

from __future__ import annotations

import html.parser
import json
import os
import pathlib
import re
import shutil
import subprocess
import urllib.error
import urllib.request

import pytest

from sidecar_testing import BUILD, complete, pb, sha256_hex, write_config

ALPHA = "alpha-console-token-Q7"
BETA = "beta-console-token-W3"
METRICS = "metrics-console-token-Z9"
CLI = BUILD / "sdk" / "apps" / "strata" / "strata"
ARTIFACTS = BUILD / "test-artifacts"


def chromium() -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    assert browser, "chromium is not installed (scripts/setup installs it)"
    return browser


def page_requests(net_log: pathlib.Path):
    """The URLs the page requested, from Chromium's network log: every URL request but those of
    Chromium's own services (component updates, account checks), which have the request type
    "other" and no initiator; a page's navigation, scripts and fetches have a type of their own
    or the page as initiator."""
    log = json.loads(net_log.read_text(errors="replace"))
    types = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    urls = []
    for event in log["events"]:
        params = event.get("params") or {}
        if types.get(event["type"]) != "URL_REQUEST_START_JOB" or "url" not in params:
            continue
        if params.get("request_type") == "other" and params.get("initiator") == "not an origin":
            continue
        urls.append(params["url"])
    return urls


def browse(url: str, work: pathlib.Path, name: str, screenshot: bool = False):
    """Loads `url` in headless Chromium until its requests are answered; returns (DOM, the URLs
    the page requested, from Chromium's network log)."""
    net_log = work / f"{name}.netlog.json"
    common = [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-default-apps", "--disable-extensions", "--no-first-run",
              "--no-default-browser-check", "--mute-audio", "--no-pings",
              "--disable-domain-reliability", "--disable-features=NetworkTimeServiceQuerying",
              "--virtual-time-budget=15000", "--window-size=1400,2200"]
    dom = subprocess.run(common + [f"--user-data-dir={work / ('profile-' + name)}",
                                   f"--log-net-log={net_log}", "--dump-dom", url],
                         capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr
    urls = page_requests(net_log)
    if screenshot:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        png = ARTIFACTS / f"console-{name}.png"
        shot = subprocess.run(common + [f"--user-data-dir={work / ('shot-' + name)}",
                                        f"--screenshot={png}", url],
                              capture_output=True, text=True, timeout=180)
        assert shot.returncode == 0 and png.stat().st_size > 10000, shot.stderr
    return dom.stdout, urls


class Dom(html.parser.HTMLParser):
    """The elements of a dumped page: (tag, attributes, text inside)."""

    def __init__(self, text: str):
        super().__init__()
        self.elements = []
        self.open = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        element = [tag, dict(attrs), ""]
        self.elements.append(element)
        if tag not in ("input", "br", "meta", "line", "rect", "path", "polyline"):
            self.open.append(element)

    def handle_endtag(self, tag):
        while self.open:
            if self.open.pop()[0] == tag:
                break

    def handle_data(self, data):
        for element in self.open:
            element[2] += data

    def find(self, tag=None, cls=None, **attrs):
        out = []
        for t, a, text in self.elements:
            if tag and t != tag:
                continue
            if cls and cls not in (a.get("class") or "").split():
                continue
            if all(a.get(k.replace("_", "-")) == v for k, v in attrs.items()):
                out.append((a, text))
        return out


def get(base: str, path: str, token: str | None):
    request = urllib.request.Request(base + path)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def chat(base: str, token: str, agent: str, messages):
    """One chat completion through the proxy for `agent`; the answer's text."""
    request = urllib.request.Request(
        base + "/v1/chat/completions", method="POST",
        data=json.dumps({"model": "glm-5.3-flash", "messages": messages}).encode(),
        headers={"Authorization": f"Bearer {token}", "X-Strata-Agent": agent,
                 "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())["choices"][0]["message"]["content"]


def drive_proxy(base: str) -> None:
    """Agent p1 through the OpenAI proxy: two turns, then a client that rewrote its first user
    message (the history is replaced from message 0, the first after the system prompt)."""
    system = {"role": "system", "content": "You are terse."}
    first = {"role": "user", "content": "List the files."}
    answer = chat(base, ALPHA, "p1", [system, first])
    chat(base, ALPHA, "p1", [system, first, {"role": "assistant", "content": answer},
                             {"role": "user", "content": "And the largest?"}])
    chat(base, ALPHA, "p1", [system, {"role": "user", "content": "List the directories."}])


def drive(stub) -> None:
    """Agent a1: a document v1, two turns, the document at v2 (a break), two tool results with
    last-n(1) (the next build compacts: a break); a2 and a3 one turn each."""
    config = {"budget": {"window": 65536}, "policy": {"name": "last-n", "last_n": 1},
              "endpoint": {"max_output_tokens": 64}}
    stub.CreateAgent(pb.CreateAgentRequest(agent_id="a1", config_json=json.dumps(config)))
    put = lambda version, text: stub.PutDocument(pb.PutDocumentRequest(  # noqa: E731
        agent_id="a1", layer=pb.DOCUMENT_LAYER_INDEX, name="api", content=text, version=version))
    put("v1", "GET /v1/items lists the items.")
    complete(stub, "a1", "What does the API do?")
    complete(stub, "a1", "And what else?")
    put("v2", "GET /v2/items lists the items, paged.")
    complete(stub, "a1", "What changed?")
    # A tool result the next request sends, then a second one: last-n(1) masks the first, which
    # the server has cached, so the request after it breaks the prefix by compacting.
    for n, output in ((1, "x" * 2000), (2, "a.txt b.txt")):
        stub.AppendUser(pb.AppendUserRequest(agent_id="a1", content=f"Run tool {n}."))
        stub.AppendAssistant(pb.AppendAssistantRequest(agent_id="a1", tool_calls=[
            pb.ToolCall(id=f"call_{n}", name="bash", arguments='{"cmd": "ls"}')]))
        stub.AppendToolResult(pb.AppendToolResultRequest(agent_id="a1", tool_call_id=f"call_{n}",
                                                         content=output))
        complete(stub, "a1", f"What did tool {n} print?")
    complete(stub, "a1", "Thanks.")
    for agent in ("a2", "a3"):
        stub.CreateAgent(pb.CreateAgentRequest(agent_id=agent))
        complete(stub, agent, "Hello.")


@pytest.fixture
def console(tmp_path, start_sim, start_sidecar):
    sim = start_sim(None, ["--output-tokens", "8"])
    config = write_config(tmp_path, {
        "upstream": sim.base_url, "http_listen": "127.0.0.1:0",
        "metrics_token_sha256": [sha256_hex(METRICS)],
        "tenants": [{"name": "alpha", "token_sha256": [sha256_hex(ALPHA)]},
                    {"name": "beta", "token_sha256": [sha256_hex(BETA)]}]})
    sidecar = start_sidecar(["--config", str(config)])
    address = re.search(r"http listening on (\S+)", sidecar.wait_for_output("http listening on "))
    drive(sidecar.stub(ALPHA))
    drive_proxy("http://" + address.group(1))
    beta = sidecar.stub(BETA)
    beta.CreateAgent(pb.CreateAgentRequest(agent_id="b1"))
    complete(beta, "b1", "Hello from beta.")
    return sidecar, "http://" + address.group(1)


def records_oldest_first(base: str, token: str, tenant: str, agent: str):
    status, body = get(base, f"/ui/api/agents/{tenant}/{agent}/records?limit=1000", token)
    assert status == 200, body
    return list(reversed(json.loads(body)["records"]))


def check_agent_page(dom_text: str, records, urls, allowed) -> None:
    """The bars are the records' tokens; both breaks and the compaction are marked with causes;
    every request went to `allowed`."""
    dom = Dom(dom_text)
    assert dom.find("body", data_ready="1"), "the page did not finish: " + dom_text[-2000:]
    bars = dom.find("g", cls="bar")
    assert len(bars) == len(records) >= 6, (len(bars), len(records))
    for (attrs, _), record in zip(bars, records):
        cached = record["cached_tokens_reported"]
        if cached is None:
            cached = record["cached_tokens_predicted"]
        cached = min(cached, record["input_tokens"])
        assert attrs["data-request-id"] == record["request_id"]
        assert float(attrs["data-cached"]) == cached
        assert float(attrs["data-uncached"]) == record["input_tokens"] - cached
        assert float(attrs["data-output"]) == record["output_tokens"]
        assert float(attrs["data-predicted"]) == record["cached_tokens_predicted"]
    causes = [text for _, text in dom.find("span", cls="cause")]
    assert "doc version change (v1 -> v2)" in causes, causes
    assert "compaction" in causes, causes
    breaks = dom.find("li", cls="break")
    assert all(int(a["data-invalidated"]) >= 0 for a, _ in breaks)
    compactions = dom.find("details", cls="compaction")
    assert compactions and "last-n" in compactions[0][1] and "masked" in compactions[0][1]
    assert dom.find("path", cls="break-mark") and dom.find("path", cls="compaction-mark")
    assert dom.find("code", id="prefix-hash")[0][1].strip()
    assert "cache_salt scope" in dom.find("p", id="cache-salt")[0][1]
    assert len(dom.find("tr", data_request_id=records[-1]["request_id"])) == 1
    foreign = [u for u in urls if not any(u.startswith(a) for a in allowed)]
    assert not foreign, f"requests to other hosts: {foreign}"


def test_console_pages_in_chromium(console, tmp_path):
    sidecar, base = console
    status, page = get(base, "/ui", None)
    assert status == 200 and "strata console" in page and '{"mode":"sidecar"}' in page
    assert '"a1"' not in page and '"b1"' not in page  # the page holds no data
    assert "chart.js" in page.lower() or "Chart" in page  # inlined, not fetched
    records = records_oldest_first(base, ALPHA, "alpha", "a1")

    dom, urls = browse(f"{base}/ui#token={METRICS}&/agents", tmp_path, "agents", screenshot=True)
    rows = {(a["data-tenant"], a["data-id"]) for a, _ in Dom(dom).find("tr", cls="agent")}
    assert rows == {("alpha", "a1"), ("alpha", "a2"), ("alpha", "a3"), ("alpha", "p1"),
                    ("beta", "b1")}, dom[-3000:]
    assert all(u.startswith(base) for u in urls), urls

    dom, _ = browse(f"{base}/ui#token={ALPHA}&/agents?sort=tokens&order=asc", tmp_path, "alpha")
    rows = [(a["data-tenant"], a["data-id"]) for a, _ in Dom(dom).find("tr", cls="agent")]
    assert sorted(rows) == [("alpha", "a1"), ("alpha", "a2"), ("alpha", "a3"), ("alpha", "p1")]
    tokens = [int(a["data-tokens"]) for a, _ in Dom(dom).find("tr", cls="agent")]
    assert tokens == sorted(tokens), tokens  # sorted by tokens now, ascending

    dom, urls = browse(f"{base}/ui#token={ALPHA}&/agent/alpha/a1", tmp_path, "agent", screenshot=True)
    check_agent_page(dom, records, urls, [base])
    assert f"{base}/ui/api/agents/alpha/a1" in urls, urls  # the log does show the page's requests

    oldest = records[0]["request_id"]
    dom, _ = browse(f"{base}/ui#token={ALPHA}&/agent/alpha/a1?request={oldest}", tmp_path, "link")
    assert [a["data-request-id"] for a, _ in Dom(dom).find("tr", cls="selected")] == [oldest]

    dom, _ = browse(f"{base}/ui#token={ALPHA}&/agent/alpha/p1", tmp_path, "proxy")
    causes = [text for _, text in Dom(dom).find("span", cls="cause")]
    assert any(c.startswith("client history replaced from message 0: ") for c in causes), causes

    dom, _ = browse(f"{base}/ui#token={ALPHA}&/agent/beta/b1", tmp_path, "foreign")
    error = Dom(dom).find("p", id="error")
    assert error and "no agent" in error[0][1] and "b1" not in [a.get("data-id") for a, _ in Dom(dom).find("tr")]

    # The same page from the store, as one file: nothing but itself is loaded.
    sidecar.close()
    out = tmp_path / "a1.html"
    result = subprocess.run([str(CLI), "inspect", "--db", str(sidecar.store), "--agent", "alpha/a1",
                             "--html", str(out)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    usage = subprocess.run([str(CLI), "inspect", "--db", str(sidecar.store), "--html", str(out)],
                           capture_output=True, text=True, timeout=120)
    assert usage.returncode != 0 and "--html needs --agent ID" in usage.stderr, usage.stderr
    text = out.read_text()
    assert "<script src" not in text and "<link" not in text
    dom, urls = browse(out.as_uri(), tmp_path, "file", screenshot=True)
    check_agent_page(dom, records, urls, [out.as_uri()])


ROUTES = ["", "/records", "/records?request_id=x", "/events", "/growth", "/layout", "/timeline"]


def test_a_tenant_sees_only_its_agents_through_every_route(console):
    _, base = console
    for token in (None, "wrong-token"):
        for path in ["/ui/api/agents", "/ui/api/pools", "/ui/api/agents/alpha/a1"]:
            status, body = get(base, path, token)
            assert status == 401 and "wrong-token" not in body, (path, body)
    status, body = get(base, "/ui/api/agents", ALPHA)
    assert status == 200
    assert {a["id"] for a in json.loads(body)["agents"]} == {"a1", "a2", "a3", "p1"}
    status, body = get(base, "/ui/api/agents", BETA)
    assert status == 200 and [a["id"] for a in json.loads(body)["agents"]] == ["b1"]
    status, body = get(base, "/ui/api/agents?limit=2&sort=id&order=asc", METRICS)
    listed = json.loads(body)
    assert listed["total"] == 5 and [a["id"] for a in listed["agents"]] == ["a1", "a2"]
    # Alpha asking for beta's agent, under either tenant's name, through every route: answered
    # as an agent that does not exist.
    for route in ROUTES:
        for token, tenant, agent, missing in ((ALPHA, "beta", "b1", "zz"), (ALPHA, "alpha", "b1", "zz"),
                                              (BETA, "alpha", "a1", "zz")):
            status, body = get(base, f"/ui/api/agents/{tenant}/{agent}{route}", token)
            status_missing, body_missing = get(base, f"/ui/api/agents/{tenant}/{missing}{route}", token)
            assert status == status_missing == 404, (route, tenant, agent, body)
            assert body.replace(agent, missing) == body_missing, (body, body_missing)
            assert "a1" not in body or agent == "a1"
        status, body = get(base, f"/ui/api/agents/beta/b1{route}", METRICS)
        assert status == (404 if "request_id" in route else 200), (route, body)
    for bad in ("/ui/api/agents/alpha/..%2Fbeta%2Fb1", "/ui/api/agents/alpha/a1/../../beta/b1",
                "/ui/api/agents/beta%2Fb1/x"):
        status, body = get(base, bad, ALPHA)
        assert status in (400, 404) and "Hello from beta" not in body, (bad, body)
    status, body = get(base, "/ui/api/pools", ALPHA)
    assert status == 403 and "metrics token" in body
    status, body = get(base, "/ui/api/pools", METRICS)
    assert status == 200 and json.loads(body) == {"configured": False}
    status, body = get(base, "/ui/api/agents?sort=nope", METRICS)
    assert status == 400 and "sort" in body


def test_pools_page(tmp_path, start_sim, start_sidecar):
    import test_sidecar_pools as pools
    sim = start_sim(pools.TRAJECTORY)
    config = write_config(tmp_path, {"http_listen": "127.0.0.1:0", "backend": "vllm",
                                     "pools": pools.pools_config(sim.base_url)})
    sidecar = start_sidecar(["--config", str(config)])
    pools.run_short_and_long(sidecar)
    base = "http://" + pools.http_address(sidecar)
    status, body = get(base, "/ui/api/pools", None)  # no tenants: everyone is the operator
    assert status == 200, body
    now = {p["name"]: p for p in json.loads(body)["now"]["pools"]}
    assert now["short"]["admitted"] == 1 and now["long"]["admitted"] == 1, now
    dom, urls = browse(f"{base}/ui#/pools", tmp_path, "pools", screenshot=True)
    rows = {a["data-pool"]: a for a, _ in Dom(dom).find("tr") if "data-pool" in a}
    assert set(rows) == {"short", "long"}, dom[-2000:]
    cells = {(a.get("data-key"), text) for a, text in Dom(dom).find("td")}
    assert ("admitted", "1") in cells and ("refused", "0") in cells
    assert all(u.startswith(base) for u in urls), urls

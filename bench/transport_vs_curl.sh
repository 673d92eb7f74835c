#!/usr/bin/env bash
# Transport benchmark: strata's HTTP transport and curl driving the same strata-sim with the
# same request body, at concurrency 1, 16 and 64. Prints figures for docs/benchmarks.md.
#
#   bench/transport_vs_curl.sh BUILD_DIR [REQUESTS_PER_CURL_RUN]
# BUILD_DIR must hold strata-sim and bench_transport (configure with -DSTRATA_BUILD_BENCH=ON).
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [REQUESTS]}
requests=${2:-2000}
sim=$build/sdk/apps/strata-sim/strata-sim
bench=$build/bench/bench_transport
tmp=$(mktemp -d)
sim_pid=
cleanup() { [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

"$sim" --port 0 >"$tmp/sim.out" 2>&1 &
sim_pid=$!
for _ in $(seq 100); do grep -q http= "$tmp/sim.out" 2>/dev/null && break; sleep 0.05; done
port=$(sed -n 's/.*http=127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/sim.out")
base=http://127.0.0.1:$port/v1
echo "strata-sim on $base (zero prefill/decode time: measures client and protocol overhead)"

echo "== strata (bench_transport) =="
"$bench" --endpoint="$base" --body_out="$tmp/body.json" --benchmark_min_time=1 \
  --benchmark_counters_tabular=true 2>&1 | grep -v '^\*\*\*'

echo "== curl $(curl --version | head -1 | cut -d' ' -f2), one process, parallel transfers (-Z), $requests requests =="
for mode in sse json; do
  body=$tmp/body.json
  [ "$mode" = json ] && body=$tmp/body.json.plain
  config=$tmp/curl-$mode.cfg
  : >"$config"
  for i in $(seq "$requests"); do
    [ "$i" -gt 1 ] && echo next >>"$config"
    printf 'url = "%s/chat/completions"\ndata-binary = "@%s"\nheader = "Content-Type: application/json"\noutput = "/dev/null"\nsilent\n' \
      "$base" "$body" >>"$config"
  done
  for c in 1 16 64; do
    start=$(date +%s.%N)
    curl -s -Z --parallel-max "$c" -K "$config" 2>/dev/null
    end=$(date +%s.%N)
    awk -v n="$requests" -v s="$start" -v e="$end" -v c="$c" -v m="$mode" \
      'BEGIN { printf "curl -Z %-4s concurrency %2d: %8.0f requests/s (%.1f us/request wall)\n", m, c, n/(e-s), (e-s)/n*1e6 }'
  done
done

echo "== curl, one process per request (xargs -P), 400 requests, sse =="
for c in 1 16 64; do
  start=$(date +%s.%N)
  seq 400 | xargs -P "$c" -I{} curl -s -o /dev/null -H 'Content-Type: application/json' \
    --data-binary "@$tmp/body.json" "$base/chat/completions"
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" -v c="$c" \
    'BEGIN { printf "curl processes concurrency %2d: %8.0f requests/s\n", c, 400/(e-s) }'
done
echo "body: $(wc -c <"$tmp/body.json") bytes"

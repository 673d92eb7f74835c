#!/usr/bin/env bash
# Renders a `strata bench --html` report in headless Chromium and checks that its four charts were
# drawn (the page sets data-charts-rendered after Chart.js created them) and the table was filled.
# Exit 77 (ctest skip) when Chromium is not installed.
set -euo pipefail
cli=$1 sim=$2
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$browser" ]]; then
  echo "SKIP: chromium is not installed (scripts/setup installs it)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cli" bench --sim "$sim" --no-progress --lengths 4k,8k --concurrency 1 --requests 1 \
  --sim-args "--prefill-us 0.01 --decode-us 100 --output-tokens 8 --block-size 512" \
  --html "$dir/report.html" --json "$dir/report.json" >/dev/null
"$browser" --headless --no-sandbox --disable-gpu --disable-background-networking --no-first-run \
  --user-data-dir="$dir/profile" --virtual-time-budget=5000 --dump-dom "file://$dir/report.html" \
  >"$dir/dom.html" 2>"$dir/chromium.log" || { cat "$dir/chromium.log"; exit 1; }
grep -q 'data-charts-rendered="4"' "$dir/dom.html" || {
  echo "FAIL: the charts were not rendered"; grep -o '<body[^>]*>' "$dir/dom.html"; exit 1; }
[[ $(grep -o '<canvas' "$dir/dom.html" | wc -l) -eq 4 ]] || { echo "FAIL: expected 4 canvases"; exit 1; }
grep -q '<td>4K</td>' "$dir/dom.html" || { echo "FAIL: the cells table is empty"; exit 1; }
echo "report rendered: 4 charts, $(grep -o '<tr>' "$dir/dom.html" | wc -l) table rows"

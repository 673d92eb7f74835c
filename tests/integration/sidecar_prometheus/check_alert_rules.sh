#!/usr/bin/env bash
# The example alert rules (examples/prometheus/strata-sidecar-alerts.yml) load in Prometheus
# (`promtool check rules`) and fire exactly on the series they are written for (`promtool test
# rules` with sidecar_alerts_test.yml); docs/sidecar.md shows that file verbatim under "Alert
# rules", and its scrape configuration under "Metrics" is a valid Prometheus configuration.
# Skips (77) when promtool, shipped with Debian's prometheus package, is not installed.
set -euo pipefail
source_dir=$1
here="$source_dir/tests/integration/sidecar_prometheus"
rules="$source_dir/examples/prometheus/strata-sidecar-alerts.yml"
doc="$source_dir/docs/sidecar.md"
if ! command -v promtool >/dev/null 2>&1; then
  echo "SKIPPED: promtool is not on PATH (Debian package \"prometheus\", installed by scripts/setup)"
  exit 77
fi
promtool check rules "$rules"
# promtool resolves rule_files relative to the test file.
promtool test rules "$here/sidecar_alerts_test.yml"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The first ```yaml block after the heading "## $1" of docs/sidecar.md.
yaml_block() {
  awk -v heading="## $1" '$0 == heading {in_section = 1; next}
    in_section && /^```yaml$/ {in_block = 1; next}
    in_block && /^```$/ {exit}
    in_block {print}' "$doc"
}
yaml_block "Alert rules" > "$work/doc-rules.yml"
if ! diff -u "$rules" "$work/doc-rules.yml"; then
  echo "docs/sidecar.md \"Alert rules\" differs from $rules: copy the file into the doc" >&2
  exit 1
fi
echo "a-token" > "$work/token"
{
  printf 'global:\n  scrape_interval: 15s\n'
  yaml_block "Metrics" | sed "s|credentials_file: [^ ]*|credentials_file: $work/token|"
} > "$work/prometheus.yml"
grep -q "job_name: strata-sidecar" "$work/prometheus.yml"
promtool check config "$work/prometheus.yml"

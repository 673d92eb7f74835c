#!/usr/bin/env bash
# The example alert rules (examples/prometheus/strata-sidecar-alerts.yml) load in Prometheus
# (`promtool check rules`) and fire exactly on the series they are written for (`promtool test
# rules` with sidecar_alerts_test.yml). Skips (77) when promtool, shipped with Debian's prometheus
# package, is not installed.
set -euo pipefail
source_dir=$1
here="$source_dir/tests/integration/sidecar_prometheus"
if ! command -v promtool >/dev/null 2>&1; then
  echo "SKIPPED: promtool is not on PATH (Debian package \"prometheus\", installed by scripts/setup)"
  exit 77
fi
promtool check rules "$source_dir/examples/prometheus/strata-sidecar-alerts.yml"
# promtool resolves rule_files relative to the test file.
promtool test rules "$here/sidecar_alerts_test.yml"

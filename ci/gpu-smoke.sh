#!/usr/bin/env bash
# Nightly GPU smoke for a cluster: run the quick grid of the given suites and keep the run directory.
# Fails (exit 1) when any case raised or gave a wrong answer, 2 on a setup problem.
#   ci/gpu-smoke.sh CLUSTER_LABEL [SUITES] [RESULTS_DIR]
# Gating against earlier runs is ci/nightly.sh (gpubench compare on a window of the runs before tonight's).
set -euo pipefail
cluster=${1:?cluster label}
suites=${2:-elementwise}
out=${3:-results}
exec gpubench run --suite "$suites" --quick --cluster "$cluster" --out "$out"

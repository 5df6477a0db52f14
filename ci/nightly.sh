#!/usr/bin/env bash
# Nightly regression gate for one cluster: run the suites, keep the run under RESULTS_DIR/CLUSTER/, compare it
# with the baseline, write a Markdown summary and a JUnit file, and exit with compare's code.
#   ci/nightly.sh CLUSTER [RESULTS_DIR]          (RESULTS_DIR default: results)
# Environment:
#   SUITES           suites to run (default: elementwise,gemm)
#   RUN_ARGS         more `gpubench run` arguments (default: --quick)
#   BASELINE_WINDOW  N: pool the N runs before this one as the baseline, instead of RESULTS_DIR/CLUSTER/baseline
#   THRESHOLDS       thresholds file (default: RESULTS_DIR/CLUSTER/thresholds.toml when it exists)
#   SUMMARY, JUNIT   output files (default: compare-summary.md, compare-junit.xml); the summary is appended to
#                    $GITHUB_STEP_SUMMARY too when that is set
# The baseline is RESULTS_DIR/CLUSTER/baseline: a symlink to, or a file naming, a run directory there. With
# none yet, this run becomes it. ci/README.md says how to promote another one.
# Exit: 0 nothing WORSE; 1 something WORSE, or a case failed; 2 bad setup or inputs compare cannot use;
# 130 interrupted.
set -euo pipefail
cluster=${1:?usage: ci/nightly.sh CLUSTER [RESULTS_DIR]}
out=${2:-results}
suites=${SUITES:-elementwise,gemm}
read -r -a run_args <<< "${RUN_ARGS---quick}"
summary=${SUMMARY:-compare-summary.md}
junit=${JUNIT:-compare-junit.xml}
dir="$out/$cluster"
thresholds=${THRESHOLDS:-}
if [[ -z "$thresholds" && -f "$dir/thresholds.toml" ]]; then
  thresholds="$dir/thresholds.toml"
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
run_rc=0
gpubench run --suite "$suites" "${run_args[@]}" --cluster "$cluster" --out "$out" | tee "$log" || run_rc=${PIPESTATUS[0]}
if [[ $run_rc -ne 0 && $run_rc -ne 1 ]]; then
  exit "$run_rc"  # 2: bad setup, nothing written; 130: interrupted
fi
run_dir=$(sed -n 's/^run directory: //p' "$log" | tail -n 1)
if [[ -z "$run_dir" || ! -d "$run_dir" ]]; then
  echo "nightly: gpubench run did not name its run directory" >&2
  exit 2
fi

compare=(gpubench compare)
if [[ -n "${BASELINE_WINDOW:-}" ]]; then
  # The directory of runs: compare takes the N latest complete runs other than this one.
  compare+=("$dir" "$run_dir" --baseline-window "$BASELINE_WINDOW")
elif [[ -e "$dir/baseline" ]]; then
  compare+=("$dir/baseline" "$run_dir")
else
  ln -s "$(basename "$run_dir")" "$dir/baseline"
  echo "nightly: no baseline yet for $cluster: $run_dir is now the baseline ($dir/baseline)"
  exit "$run_rc"
fi
if [[ -n "$thresholds" ]]; then
  compare+=(--thresholds "$thresholds")
fi
compare_rc=0
"${compare[@]}" --out "$summary" --out "$junit" || compare_rc=$?
if [[ -n "${GITHUB_STEP_SUMMARY:-}" && -f "$summary" ]]; then
  cat "$summary" >> "$GITHUB_STEP_SUMMARY"
fi
if [[ $compare_rc -ne 0 ]]; then
  exit "$compare_rc"
fi
exit "$run_rc"

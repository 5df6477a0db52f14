#!/usr/bin/env bash
# Nightly regression gate for one cluster: run the suites, keep the run under RESULTS_DIR/CLUSTER/, compare it
# with the runs of the nights before (a window of them), confirm any WORSE figure by measuring its cases again
# in a fresh process, write a Markdown summary, a JUnit file, the JSON verdicts and the page of the nights' history,
# and exit with compare's code.
#   ci/nightly.sh CLUSTER [RESULTS_DIR]          (RESULTS_DIR default: results)
# Environment:
#   SUITES           suites to run (default: elementwise,gemm)
#   RUN_ARGS         more `gpubench run` arguments (default: --quick; "--quick --processes 6" measures the figures
#                    the host sets in 6 processes, about 20 s more a night, which compare judges more sharply once
#                    10 nights are kept: docs/compare.md)
#   BASELINE_WINDOW  N (default 5): the baseline is the N latest runs of this system kept in RESULTS_DIR/CLUSTER/
#                    before tonight's, judged on how far their run medians spread; 0: one pinned run instead,
#                    RESULTS_DIR/CLUSTER/baseline (a symlink to, or a file naming, a run directory there)
#   THRESHOLDS       thresholds file (default: RESULTS_DIR/CLUSTER/thresholds.toml when it exists)
#   COMPARE_ARGS     more `gpubench compare` arguments, for both compares of a night (e.g. --no-host-pace)
#   CONFIRM          1 (default): a WORSE figure fails the night only if a rerun of its case agrees; 0: no rerun
#   SUMMARY, JUNIT, VERDICTS  output files (default: compare-summary.md, compare-junit.xml, compare.json); the
#                    summary is appended to $GITHUB_STEP_SUMMARY too when that is set
#   HISTORY          folder of the history page (default: history): HISTORY/index.html, every figure over the
#                    nights kept in RESULTS_DIR/CLUSTER/ with the gate's verdicts on it (compare --history draws
#                    it; gpubench report DIR on the first night and with a pinned baseline)
#   RUN_LOG          the runs' own output (default: nightly-run.log); this script prints a few lines of it
#   PYTHON           the interpreter gpubench is installed in (default: python3), for the rerun's plan
# The window fills as nights are kept: the first night starts it, and until it holds 3 runs a change is listed,
# never WORSE (one or two runs cannot tell a regression from a figure's run-to-run spread). With
# BASELINE_WINDOW=0 and no baseline link yet, this run becomes it. ci/README.md says how to start afresh after
# an intended change. Reruns are kept under RESULTS_DIR/CLUSTER/confirm/, out of the baseline window's way.
# Exit: 0 nothing WORSE; 1 something WORSE (confirmed), or a case failed; 2 bad setup or inputs compare cannot
# use; 130 interrupted.
set -euo pipefail
cluster=${1:?usage: ci/nightly.sh CLUSTER [RESULTS_DIR]}
out=${2:-results}
suites=${SUITES:-elementwise,gemm}
read -r -a run_args <<< "${RUN_ARGS---quick}"
summary=${SUMMARY:-compare-summary.md}
junit=${JUNIT:-compare-junit.xml}
verdicts=${VERDICTS:-compare.json}
history=${HISTORY:-history}
run_log=${RUN_LOG:-nightly-run.log}
python=${PYTHON:-python3}
dir="$out/$cluster"
thresholds=${THRESHOLDS:-}
if [[ -z "$thresholds" && -f "$dir/thresholds.toml" ]]; then
  thresholds="$dir/thresholds.toml"
fi
: > "$run_log"
window=${BASELINE_WINDOW:-5}
if [[ ! "$window" =~ ^[0-9]+$ ]]; then
  echo "nightly: BASELINE_WINDOW=$window: give a number of runs (5 by default), or 0 for the pinned baseline link" >&2
  exit 2
fi

# run_into OUT ARGS...: one `gpubench run` whose output goes to the log; sets run_rc and run_dir. A setup error
# or an interrupt ends the night with its code, after showing the end of the log.
run_into() {
  local root=$1 rc=0 start=$SECONDS
  shift
  gpubench run "$@" --cluster "$cluster" --out "$root" >> "$run_log" 2>&1 || rc=$?
  if [[ $rc -ne 0 && $rc -ne 1 ]]; then
    tail -n 5 "$run_log" >&2
    exit "$rc"  # 2: bad setup, nothing written; 130: interrupted
  fi
  run_rc=$rc
  run_dir=$(sed -n 's/^run directory: //p' "$run_log" | tail -n 1)
  if [[ -z "$run_dir" || ! -d "$run_dir" ]]; then
    echo "nightly: gpubench run did not name its run directory (see $run_log)" >&2
    exit 2
  fi
  local failed=""
  if [[ $rc -ne 0 ]]; then
    failed="; $(grep 'case(s) failed' "$run_log" | tail -n 1) ($run_log)"
  fi
  echo "nightly: ran $run_dir in $((SECONDS - start)) s$failed"
}

# history_page: the page of the directory's nights (gpubench report DIR), beside the summary, drawn whatever the
# night's verdict (a red night is when people look). A page that cannot be drawn is said, and the night's exit
# code stays the gate's. A pinned baseline is no window: the page draws no band then.
history_page() {
  if gpubench report "$dir" --out "$history" --baseline-window "$((window > 0 ? window : 1))" >> "$run_log" 2>&1
  then
    echo "nightly: history page $history/index.html"
  else
    echo "nightly: the history page could not be drawn (see $run_log)" >&2
  fi
}

run_into "$out" --suite "$suites" "${run_args[@]}"
night_rc=$run_rc
night_dir=$run_dir

compare=(gpubench compare)
if [[ "$window" -gt 0 ]]; then
  # The directory of runs: compare takes the N latest complete runs other than this one, and draws the history
  # page itself once the verdict is recorded (one interpreter, one read of the runs).
  compare+=("$dir" "$night_dir" --baseline-window "$window" --history "$history")
elif [[ -e "$dir/baseline" ]]; then
  compare+=("$dir/baseline" "$night_dir")
else
  ln -s "$(basename "$night_dir")" "$dir/baseline"
  echo "nightly: no baseline yet for $cluster: $night_dir is now the baseline ($dir/baseline)"
  history_page
  exit "$night_rc"
fi
if [[ -n "$thresholds" ]]; then
  compare+=(--thresholds "$thresholds")
fi
read -r -a compare_args <<< "${COMPARE_ARGS:-}"
compare+=(${compare_args[@]+"${compare_args[@]}"})

# One compare writes every output and records the night's verdict. Only a night with WORSE figures pays for a
# second: its cases measured again in a fresh process, and compare again with that rerun, whose outputs and
# record replace the first's (a compare costs 3-4 s, scipy's import half of it: most nights are green).
compare_out=$(mktemp)
compare_err=$(mktemp)
stamp=$(mktemp)  # older than anything compare writes: a history page newer than it is tonight's
trap 'rm -f "$compare_out" "$compare_err" "$stamp"' EXIT
compare_rc=0
"${compare[@]}" --out "$summary" --out "$junit" --out "$verdicts" > "$compare_out" 2> "$compare_err" \
  || compare_rc=$?
if [[ $compare_rc -eq 2 && "$window" -gt 0 ]]; then
  # The first night has no earlier run (or only runs that never finished): it starts the history, it is no
  # failure. Asked only when compare refused, so that other nights pay for no second interpreter.
  earlier=$("$python" -c 'import sys; from pathlib import Path; from gpubench.compare.load import run_candidates
print(sum(p.resolve() != Path(sys.argv[2]).resolve() for _, p, _ in run_candidates(Path(sys.argv[1]))))' "$dir" "$night_dir")
  if [[ "$earlier" == 0 ]]; then
    echo "nightly: no earlier run of $cluster yet: $night_dir starts the baseline window"
    history_page
    exit "$night_rc"
  fi
fi
cat "$compare_err" >&2
if [[ "${CONFIRM:-1}" != 0 && $compare_rc -eq 1 ]]; then
  # Which cases to measure again: the suites on the first line, an exact --filter on the second.
  mapfile -t plan < <("$python" -m gpubench.compare.confirm "$verdicts" "$night_dir")
  if [[ ${#plan[@]} -eq 2 ]]; then
    echo "nightly: WORSE figures; measuring their cases again in a fresh process to confirm them"
    run_into "$dir/confirm" --suite "${plan[0]}" "${run_args[@]}" --filter "${plan[1]}"
    compare_rc=0
    "${compare[@]}" --confirm "$run_dir" --out "$summary" --out "$junit" --out "$verdicts" > "$compare_out" \
      || compare_rc=$?
  fi
fi
cat "$compare_out"
if [[ $compare_rc -ne 0 && $compare_rc -ne 1 ]]; then
  exit "$compare_rc"
fi
if [[ -n "${GITHUB_STEP_SUMMARY:-}" && -f "$summary" ]]; then
  cat "$summary" >> "$GITHUB_STEP_SUMMARY"
fi
if [[ "$window" -eq 0 ]]; then
  history_page  # a pinned baseline: compare drew no page (see history_page)
elif [[ "$history/index.html" -nt "$stamp" ]]; then
  echo "nightly: history page $history/index.html"  # drawn by tonight's compare
else
  echo "nightly: the history page could not be drawn (see above)" >&2
fi
if [[ $compare_rc -ne 0 ]]; then
  exit "$compare_rc"
fi
exit "$night_rc"

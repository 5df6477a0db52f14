#!/usr/bin/env bash
# Replay a directory of nights in order through a plain `gpubench compare DIR RUN` (no rerun, no nightly):
#   bash tests/gpu/replay_nights.sh NIGHTS_DIR [OUT_DIR]
# NIGHTS_DIR: a directory of runs, such as results/<cluster>/ of ci/nightly.sh or tests/gpu/nightly_aa.sh. Each
# run is copied, oldest first, into a fresh directory without what compare recorded there (verdict.json,
# accepted.json: the replay remembers only what it decides itself) and judged against the runs before it. Prints
# one line per run: its exit code, counts and window; the WORSE figures under it. Runs on a CPU: nothing is
# measured. OUT_DIR (default: a temporary folder) keeps the replayed directory and each run's JSON verdicts.
set -u -o pipefail
src=${1:?NIGHTS_DIR}; out=${2:-$(mktemp -d)}
dir="$out/replay"
rm -rf "$dir"; mkdir -p "$dir"
n=0
for run in $(find "$src" -mindepth 1 -maxdepth 1 -type d -name '2*' | sort); do
  cp -r "$run" "$dir/"
  rm -f "$dir/$(basename "$run")/verdict.json" "$dir/$(basename "$run")/accepted.json"
  n=$((n + 1))
  [[ $n -eq 1 ]] && { echo "$(basename "$run") first: starts the directory"; continue; }
  rc=0
  gpubench compare "$dir" "$dir/$(basename "$run")" --format json > "$out/$(basename "$run").json" 2> "$out/err.txt" || rc=$?
  python3 - "$out/$(basename "$run").json" "$rc" "$(basename "$run")" <<'EOF' || cat "$out/err.txt"
import json, sys
doc = json.load(open(sys.argv[1]))
print(f"{sys.argv[3]} rc={sys.argv[2]} {doc['summary']} {doc.get('window') or ''}"
      + (f" — {'; '.join(doc['contention'])}" if doc.get("contention") else ""))
for r in doc["rows"]:
    if r["status"] == "compared" and r["verdict"] == "WORSE":
        print(f"   WORSE {r['suite']} {r['case']} {r['metric']} {100 * r['change']:+.1f}% {(r['note'] or '')[:120]}")
EOF
done

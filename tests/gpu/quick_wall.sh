#!/usr/bin/env bash
# Wall time of the quick set on one GPU for this checkout and another build, alternating (issue 36: figures set
# per process are measured in several processes; the quick set may take at most 20 % longer):
#   bash tests/gpu/quick_wall.sh OUT OTHER_TREE [ROUNDS]
# SUITES (default the quick set: elementwise,gemm,launch,copy) and CLUSTER (default h100) name what runs and its label.
# OTHER_TREE: a checkout of the build to compare with, installed into a folder of its own. Each run's output
# gets seconds since its start on every line (OUT/<build>-<round>.log); OUT/wall.txt holds build, round, wall
# seconds and exit code; OUT/quick-tables.tgz the run directories of this checkout.
set -u -o pipefail
out=${1:?OUT}; other=${2:?OTHER_TREE}; rounds=${3:-2}
source tests/gpu/setup.sh
python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/other-site "$other" 2>&1 | grep -v -i warning
mkdir -p "$out"
stamp() {
  python3 -c 'import sys, time
t0 = time.time()
for line in sys.stdin:
    sys.stdout.write(f"{time.time() - t0:7.2f} {line}"); sys.stdout.flush()'
}
for i in $(seq "$rounds"); do
  for build in other this; do
    site=""; [[ $build == other ]] && site=/tmp/other-site
    start=$(date +%s.%N)
    # -P: not the current folder (this checkout) first on the path, or the other build's first process runs this
    # checkout's code while its workers (started with -P) run the other's.
    PYTHONPATH=$site python3 -P -m gpubench run --suite "${SUITES:-elementwise,gemm,launch,copy}" --quick --cluster "${CLUSTER:-h100}" \
      --out "/tmp/quick-$build" 2>&1 | stamp > "$out/$build-$i.log"
    rc=${PIPESTATUS[0]}
    echo "$build $i $(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") rc=$rc" | tee -a "$out/wall.txt"
  done
done
(cd /tmp/quick-this && tar czf "$out/quick-tables.tgz" .)

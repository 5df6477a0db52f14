#!/bin/bash
# `gpubench run --suite comm` with no flags on a one-GPU machine (a world of one: graphs by default), --graph and
# --eager, and where each case's time goes (tests/gpu/comm_phases), for this tree and, where OLD_TREE names a
# copy of an older one, for that tree on comparable cases. Everything lands in $OUT/comm-default.tar.gz.
set -u
cd "$(dirname "$0")/../.."
source tests/gpu/setup.sh
PH=$PWD/tests/gpu/comm_phases
W=$(mktemp -d)
timed() {  # name, then the gpubench arguments
  local name=$1; shift
  local t0=$(date +%s.%N)
  PYTHONPATH=${TREE:+$TREE:}$PH GPUBENCH_PHASES=$W/$name python3 -m gpubench run --suite comm --out $W/$name-run \
    --cluster h100 "$@" > $W/$name.txt 2>&1
  local rc=$?
  echo "$name: rc $rc wall $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s: gpubench run --suite comm $*" | tee -a $W/walls.txt
  python3 $PH/summary.py $W/$name.0.json | tee -a $W/walls.txt
  grep -E "^comm:|run directory" $W/$name.txt
}
timed default
timed graph --nproc 1 --graph
timed eager --eager
timed every --collectives all_reduce,all_gather,reduce_scatter,alltoall,broadcast,reduce,sendrecv
if [ -n "${OLD_TREE:-}" ]; then
  TREE=$OLD_TREE timed old-eager --collectives all_gather --filter inplace=False
  TREE=$OLD_TREE timed old-graph --collectives all_gather --filter inplace=False --graph
fi
tail -n 30 $W/default.txt
tar -czf $OUT/comm-default.tar.gz -C $W --exclude '*.log' --exclude '*.stderr' .

#!/usr/bin/env bash
# Runs built fuzz targets over their corpora. scripts/fuzz.sh calls it after
# building; the bundle `fuzz.sh --bundle` makes carries it, so targets built
# here run on a machine with more cores and no compiler.
#   scripts/fuzz-run.sh BIN_DIR WORK_DIR [--seconds N] [--runs N] [--jobs N]
#                       [--seeds DIR]... target...
# Each target's corpus is WORK_DIR/corpus/<target> (created, and kept
# between runs), failures go to WORK_DIR/artifacts/<target>/, the run's log
# to WORK_DIR/logs/<target>.log. Every --seeds DIR/<target> that exists is
# read as extra seeds. With --jobs N > 1, the corpus and seeds are dealt
# into N shards and N independent processes fuzz one shard each (libFuzzer's
# fork mode would first run the whole corpus in one process, minutes for
# the pipeline target); --runs is then the total over all processes, their
# logs are WORK_DIR/logs/<target>.<i>.log, what they add goes back into the
# corpus, and the summed executions are printed.
set -euo pipefail
bin=$(cd "$1" && pwd); work=$2; shift 2
seconds=-1 runs=-1 jobs=1 targets=() seed_roots=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --seeds) seed_roots+=("$2"); shift 2 ;;
    ir|lower|plan) targets+=("$1"); shift ;;
    *) echo "fuzz-run.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(ir lower plan)
# Ten minutes a target unless a time or a number of runs is given.
[ "$seconds" -ge 0 ] || [ "$runs" -ge 0 ] || seconds=600
mkdir -p "$work" && work=$(cd "$work" && pwd)

export ASAN_OPTIONS=detect_leaks=1:detect_container_overflow=0:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export MLA_CACHE_DIR=$work/kernel-cache
# Deals the corpus and seeds of target $1 into $jobs shards and fuzzes each
# in its own process; $corpus, $artifacts, $log, $args and $seeds as set by
# the loop below.
run_shards() {
  local t=$1 shards=$work/shards/$t pids=() i=0 failed=0
  rm -rf "$shards"
  rm -f "$work/logs/$t".*.log
  for ((i = 0; i < jobs; i++)); do mkdir -p "$shards/$i"; done
  i=0
  while IFS= read -r -d '' f; do
    cp "$f" "$shards/$((i % jobs))/"; i=$((i + 1))
  done < <(find "$corpus" ${seeds[@]+"${seeds[@]}"} -type f -print0)
  # What the processes add is what is newer than this mark.
  local mark=$shards/started
  touch "$mark"
  local shard_args=("${args[@]}")
  if [ "$runs" -ge 0 ]; then
    shard_args=("${args[@]/#-runs=*/-runs=$(((runs + jobs - 1) / jobs))}")
  fi
  for ((i = 0; i < jobs; i++)); do
    ( cd "$work/logs" && exec "$bin/mla-fuzz-$t" "${shard_args[@]}" "$shards/$i" ) \
      > "$work/logs/$t.$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { failed=1; echo "fuzz: $t shard $i failed (logs/$t.$i.log)"; }
  done
  for ((i = 0; i < jobs; i++)); do
    find "$shards/$i" -type f -newer "$mark" -exec cp -n -t "$corpus" {} +
  done
  rm -rf "$shards"
  cat "$work/logs/$t".*.log > "$log"
  awk -v jobs="$jobs" '/stat::number_of_executed_units/ {n += $2; k++}
       /stat::peak_rss_mb/ {if ($2 > rss) rss = $2}
       END {printf "fuzz: %d executions in %d of %d processes, peak RSS %d MB\n", n, k, jobs, rss}' "$log"
  grep -E "SUMMARY|ERROR|fuzz defect" "$log" | head -12 || true
  return $failed
}

status=0
for t in "${targets[@]}"; do
  corpus=$work/corpus/$t artifacts=$work/artifacts/$t/ log=$work/logs/$t.log
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  args=(-timeout=60 -rss_limit_mb=6144 -malloc_limit_mb=4096 -print_final_stats=1
        -artifact_prefix="$artifacts" -max_len=16384)
  [ "$seconds" -ge 0 ] && args+=(-max_total_time="$seconds")
  [ "$runs" -ge 0 ] && args+=(-runs="$runs")
  seeds=()
  for root in ${seed_roots[@]+"${seed_roots[@]}"}; do
    [ -d "$root/$t" ] && seeds+=("$root/$t")
  done
  echo "fuzz: $t, $([ "$seconds" -ge 0 ] && echo "${seconds} s" || echo "no time limit"), $([ "$runs" -ge 0 ] && echo "$runs runs" || echo "no run limit"), $jobs process(es)"
  if [ "$jobs" -le 1 ]; then
    ( cd "$work/logs" && "$bin/mla-fuzz-$t" "${args[@]}" "$corpus" ${seeds[@]+"${seeds[@]}"} ) \
      > "$log" 2>&1 || status=1
    grep -E "stat::|Done|SUMMARY|ERROR|fuzz defect|#[0-9]+.*DONE" "$log" | tail -12 || true
    continue
  fi
  run_shards "$t" || status=1
done
exit $status

#!/usr/bin/env bash
# Builds the fuzz targets (test/fuzz) with clang's libFuzzer,
# AddressSanitizer (leaks included) and UndefinedBehaviorSanitizer, and runs
# each for a fixed time or number of inputs.
#   scripts/fuzz.sh [--seconds N | --runs N] [--jobs N] [target...]
# Targets: ir, lower, plan (default: all three). Each runs for --seconds
# (default 600) or until --runs inputs, in --jobs processes (default 1),
# over a corpus kept in build-fuzz/corpus/<target>, seeded with the lit
# tests' IR (split at "// -----"), test/fuzz/corpus/<target> and
# test/fuzz/regressions/<target>.
# An input that fails is written to build-fuzz/artifacts/<target>/; once
# fixed, it belongs in test/fuzz/regressions/<target>/, which CI replays.
# The last lines of each run (executions, speed, peak memory) go to
# build-fuzz/logs/<target>.log.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-fuzz
seconds=600 runs=-1 jobs=1 targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; seconds=0; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    ir|lower|plan) targets+=("$1"); shift ;;
    *) echo "fuzz.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(ir lower plan)

bash "$root/scripts/setup.sh"
need=()
for p in clang-22 libclang-rt-22-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${need[@]}"
fi

# The project's code is instrumented for coverage and the sanitizers; LLVM
# and MLIR come from the packages, uninstrumented.
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -gline-tables-only"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
  -DMLA_LINK_MODE=dylib -DMLA_BUILD_TESTS=OFF -DMLA_LIBFUZZER=ON \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" > /dev/null
cmake --build "$build" -j "$(nproc)" $(printf -- "--target mla-fuzz-%s " "${targets[@]}")

# Seeds: every lit test's IR, one file per split.
seed_ir() {
  local out=$1
  mkdir -p "$out"
  python3 - "$root/test/lit" "$out" <<'PY'
import pathlib, re, sys, hashlib
lit, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for f in sorted(lit.rglob("*.mlir")):
    for part in re.split(rb"^// -----.*$", f.read_bytes(), flags=re.M):
        if part.strip():
            name = hashlib.sha1(part).hexdigest()[:16]
            (out / f"seed-{name}").write_bytes(part)
PY
}

export ASAN_OPTIONS=detect_leaks=1:detect_container_overflow=0:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export MLA_CACHE_DIR=$build/kernel-cache
status=0
for t in "${targets[@]}"; do
  corpus=$build/corpus/$t artifacts=$build/artifacts/$t/ log=$build/logs/$t.log
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  [ "$t" = plan ] || seed_ir "$corpus"
  args=(-timeout=60 -rss_limit_mb=6144 -malloc_limit_mb=4096 -print_final_stats=1
        -artifact_prefix="$artifacts" -max_len=16384)
  [ "$seconds" -gt 0 ] && args+=(-max_total_time="$seconds")
  [ "$runs" -ge 0 ] && args+=(-runs="$runs")
  if [ "$jobs" -gt 1 ]; then
    args+=(-fork="$jobs" -ignore_crashes=0)
  fi
  echo "fuzz: $t for ${seconds}s / $runs runs in $jobs process(es)"
  seeds=()
  for d in "$root/test/fuzz/corpus/$t" "$root/test/fuzz/regressions/$t"; do
    [ -d "$d" ] && seeds+=("$d")
  done
  ( cd "$build/logs" && "$build/bin/mla-fuzz-$t" "${args[@]}" "$corpus" "${seeds[@]}" ) \
    > "$log" 2>&1 || status=1
  grep -E "stat::|Done|SUMMARY|ERROR|fuzz defect|#[0-9]+.*DONE" "$log" | tail -12
done
exit $status

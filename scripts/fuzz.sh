#!/usr/bin/env bash
# Builds the fuzz targets (test/fuzz) with clang's libFuzzer,
# AddressSanitizer (leaks included) and UndefinedBehaviorSanitizer, and runs
# each for a fixed time or number of inputs (scripts/fuzz-run.sh).
#   scripts/fuzz.sh [--seconds N] [--runs N] [--jobs N] [target...]
#   scripts/fuzz.sh --bundle [target...]
# Targets: ir, lower, plan (default: all three). Each runs for --seconds
# or until --runs inputs (default: 600 s), in --jobs processes (default 1),
# over a corpus kept in build-fuzz/corpus/<target>, seeded with the lit
# tests' IR (split at "// -----"), test/fuzz/corpus/<target> and
# test/fuzz/regressions/<target>.
# An input that fails is written to build-fuzz/artifacts/<target>/; once
# fixed, it belongs in test/fuzz/regressions/<target>/, which CI replays.
# Each run's log is build-fuzz/logs/<target>.log; its last lines
# (executions, speed, peak memory) are printed.
# --bundle links the targets with LLVM and MLIR's static archives instead
# and packs them, fuzz-run.sh, the corpora and the seeds into
# bundle/mla-fuzz.tar.xz, to run where there are more cores:
#   tar -xJf mla-fuzz.tar.xz && cd mla-fuzz &&
#   bash fuzz-run.sh bin work --seeds seeds/corpus --seeds seeds/regressions \
#     --runs 1000000 --jobs 60 lower
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-fuzz
bundle=0 link_mode=dylib targets=() run_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds|--runs|--jobs) run_args+=("$1" "$2"); shift 2 ;;
    --bundle) bundle=1; link_mode=static; shift ;;
    ir|lower|plan) targets+=("$1"); shift ;;
    *) echo "fuzz.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(ir lower plan)
if [ "$bundle" = 1 ] && [ ${#run_args[@]} -gt 0 ]; then
  echo "fuzz.sh: --bundle only builds and packs; give ${run_args[*]} to fuzz-run.sh where it runs" >&2
  exit 2
fi

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
  -DMLA_LINK_MODE="$link_mode" -DMLA_BUILD_TESTS=OFF -DMLA_LIBFUZZER=ON \
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

for t in "${targets[@]}"; do
  [ "$t" = plan ] || seed_ir "$build/corpus/$t"
done
if [ "$bundle" = 1 ]; then
  # The targets, this script's runner, the corpora grown so far and the
  # project's seeds, for a machine without compilers (its libc and
  # libstdc++ suffice: LLVM, MLIR and the sanitizer runtimes are linked in).
  stage=$(mktemp -d)
  mkdir -p "$stage/mla-fuzz/bin" "$stage/mla-fuzz/work/corpus" "$stage/mla-fuzz/seeds"
  for t in "${targets[@]}"; do
    strip --strip-debug -o "$stage/mla-fuzz/bin/mla-fuzz-$t" "$build/bin/mla-fuzz-$t"
    cp -r "$build/corpus/$t" "$stage/mla-fuzz/work/corpus/"
  done
  cp -r "$root/test/fuzz/corpus" "$root/test/fuzz/regressions" "$stage/mla-fuzz/seeds/"
  cp "$root/scripts/fuzz-run.sh" "$stage/mla-fuzz/"
  mkdir -p "$root/bundle"
  tar -C "$stage" -cf - mla-fuzz | xz -T0 -6 > "$root/bundle/mla-fuzz.tar.xz"
  rm -rf "$stage"
  ls -l "$root/bundle/mla-fuzz.tar.xz"
  exit 0
fi
exec bash "$root/scripts/fuzz-run.sh" "$build/bin" "$build" ${run_args[@]+"${run_args[@]}"} \
  --seeds "$root/test/fuzz/corpus" --seeds "$root/test/fuzz/regressions" "${targets[@]}"

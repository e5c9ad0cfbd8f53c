#!/usr/bin/env bash
# Runs on the GPU machine, from an unpacked bundle (scripts/make-gpu-bundle.sh):
#   tar -xJf mla-bundle.tar.xz -C /tmp && /tmp/mla/scripts/gpu-suite.sh [out-dir] [steps]
# Steps (default: tests python sanitizer run bench):
#   tests      every op and the MLA layer on the GPU against the float64
#              reference (fresh random inputs, NaN-poisoned outputs), the
#              driver tests, the CUDA-graph replay test and the C host
#              example
#   run        mla-run twice on a fresh kernel cache (cold, then from disk),
#              16 and 128 heads
#   python     the Python package's tests on CUDA tensors (the interpreter
#              with torch: $MLA_PYTHON, else python3)
#   sanitizer  compute-sanitizer memcheck over the GPU numerics suite
#   startup    layer creation, three rounds each: cold (fresh kernel cache,
#              the driver's JIT cache off) with modules compiled one after
#              another and at once, 16 and 128 heads; from the disk cache
#              with the driver's cache warm; from a cache that mla-cache
#              filled elsewhere ($MLA_PREFILLED_CACHE, if set); rounds:
#              $MLA_STARTUP_ROUNDS (3)
#   first-step the first and the warm mixed steps, with the driver loading
#              kernels lazily (its default) and eagerly
#   dcp        decode context parallelism: the merge and the DCP layer on
#              one GPU (numerics, memcheck, mla-run's simulated groups),
#              then with 2 GPUs two processes over NCCL (mla.dcp): the
#              check at DeepSeek's dims, 16 and 128 heads, decode steps of
#              1 and 2 new tokens (the whole step also captured into a
#              torch.cuda.graph) and
#              mixed steps (prefills reading their context chunks through
#              NCCL), and the decode step timed at 64 x 32k against one GPU
#              holding the whole contexts
#   bench      mla-bench with ceilings measured in the same run
# Logs go to out-dir (default: ./mla-gpu-logs); a summary is printed last.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$PWD/mla-gpu-logs}
steps=${2:-tests python sanitizer run bench}
mkdir -p "$out"
bin=$here/bin
summary=()
numerics_filter='Prefill*:Decode*:Merge*:GatherCache*:ConcatAndCache*:Projection*:ChunkedPrefill*:DTypes/*:LayerTest*:LayerErrors*'

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
  > "$out/device.txt" 2>&1 || true
cat "$out/device.txt"

for step in $steps; do
  case $step in
  tests)
    # MLA_TEST_SHARDS=N runs the numerics as N processes at once (gtest
    # shards): their compiles use the host's cores, their kernels share
    # the GPU.
    shards=${MLA_TEST_SHARDS:-1}
    for ((i = 0; i < shards; ++i)); do
      MLA_TEST_DEVICE=gpu GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i \
        "$bin/mla-unit-tests" --gtest_filter="$numerics_filter" \
        > "$out/gpu-numerics-$i.log" 2>&1 &
    done
    failed=0
    for ((i = 0; i < shards; ++i)); do wait -n || failed=$((failed + 1)); done
    summary+=("gpu numerics: $failed of $shards shards failed ($(cat "$out"/gpu-numerics-*.log | grep -E '^\[  (PASSED|FAILED)' | tr '\n' ' '))")
    "$bin/mla-unit-tests" --gtest_filter='Cuda*:PreloadedModules*' > "$out/cuda-driver.log" 2>&1
    summary+=("driver tests: exit $? ($(grep -E '^\[  (PASSED|FAILED)' "$out/cuda-driver.log" | tr '\n' ' '))")
    if [ -x "$bin/mla-host-example" ]; then
      cache=$(mktemp -d)
      MLA_CACHE_DIR=$cache "$bin/mla-host-example" > "$out/host-example.log" 2>&1
      summary+=("C host example: exit $? ($(grep -E 'CUDA graph' "$out/host-example.log") $(tail -1 "$out/host-example.log"))")
      rm -rf "$cache"
    fi
    ;;
  python)
    MLA_TEST_DEVICE=gpu MLA_LIBRARY=$here/lib/libmla.so \
      PYTHONPATH=$here/python${PYTHONPATH:+:$PYTHONPATH} \
      "${MLA_PYTHON:-python3}" -m pytest -v -p no:cacheprovider \
      "$here/python/tests" > "$out/python.log" 2>&1
    summary+=("python: exit $? ($(tail -1 "$out/python.log"))")
    ;;
  sanitizer)
    sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    MLA_TEST_DEVICE=gpu "$sanitizer" --tool memcheck --error-exitcode 97 \
      "$bin/mla-unit-tests" --gtest_filter="$numerics_filter" \
      > "$out/memcheck.log" 2>&1
    summary+=("memcheck: exit $? ($(grep -E 'ERROR SUMMARY' "$out/memcheck.log" | tail -1))")
    ;;
  run)
    cache=$(mktemp -d)
    for attempt in cold disk; do
      MLA_CACHE_DIR=$cache "$bin/mla-run" --device=gpu \
        > "$out/mla-run-16-$attempt.log" 2>&1
      summary+=("mla-run 16 heads ($attempt cache): exit $? ($(tail -1 "$out/mla-run-16-$attempt.log"))")
    done
    MLA_CACHE_DIR=$cache "$bin/mla-run" --device=gpu --heads=128 --steps=2 \
      --decode-contexts=4000,100,16000,1 > "$out/mla-run-128.log" 2>&1
    summary+=("mla-run 128 heads: exit $? ($(tail -1 "$out/mla-run-128.log"))")
    for log in "$out/mla-run-16-disk.log" "$out/mla-run-128.log"; do
      host=$(grep -o 'plan [0-9.]* us, forward [0-9.]* us, step [0-9.]* us (median)' "$log")
      summary+=("  host side of a decode step ($(basename "$log" .log)): ${host:-not timed}")
      graph=$(grep -o 'planDecodeStep [0-9.]* us, replay [0-9.]* us, step [0-9.]* us (median)' "$log")
      summary+=("  the same step as a CUDA graph: ${graph:-not captured}")
    done
    rm -rf "$cache"
    ;;
  startup)
    setup() { grep -o 'layer setup [0-9.]* ms (best code of every kernel after [0-9.]* ms)' "$1" | head -1; }
    for heads in 16 128; do
      for threads in 1 0; do
        for round in $(seq "${MLA_STARTUP_ROUNDS:-3}"); do
          cache=$(mktemp -d)
          log=$out/startup-h$heads-threads$threads-r$round.log
          env CUDA_CACHE_DISABLE=1 MLA_CACHE_DIR=$cache \
            $( [ $threads = 0 ] || echo MLA_COMPILE_THREADS=$threads ) \
            "$bin/mla-run" --device=gpu --heads=$heads --steps=1 \
            --host-repeats=0 > "$log" 2>&1
          summary+=("cold, $heads heads, compile threads ${threads/#0/all}, round $round: $(setup "$log")")
          rm -rf "$cache"
        done
      done
      cache=$(mktemp -d) driver=$(mktemp -d)
      for attempt in cold disk1 disk2 disk3; do
        log=$out/startup-h$heads-$attempt.log
        CUDA_CACHE_PATH=$driver MLA_CACHE_DIR=$cache "$bin/mla-run" \
          --device=gpu --heads=$heads --steps=1 --host-repeats=0 > "$log" 2>&1
        summary+=("$attempt, $heads heads, driver cache on: $(setup "$log")")
      done
      rm -rf "$cache" "$driver"
      if [ -n "${MLA_PREFILLED_CACHE:-}" ]; then
        cache=$(mktemp -d) driver=$(mktemp -d)
        cp -r "$MLA_PREFILLED_CACHE"/. "$cache"
        log=$out/startup-h$heads-prefilled.log
        CUDA_CACHE_PATH=$driver MLA_CACHE_DIR=$cache "$bin/mla-run" \
          --device=gpu --heads=$heads --steps=1 --host-repeats=0 > "$log" 2>&1
        summary+=("prefilled elsewhere, $heads heads: $(setup "$log"), $(grep -o '[0-9]* compiled, [0-9]* from disk' "$log")")
        rm -rf "$cache" "$driver"
      fi
    done
    ;;
  first-step)
    setup() { grep -o 'layer setup [0-9.]* ms (best code of every kernel after [0-9.]* ms)' "$1" | head -1; }
    for loading in LAZY EAGER; do
      cache=$(mktemp -d)
      for attempt in cold disk; do
        log=$out/startup-mixed-$loading-$attempt.log
        CUDA_MODULE_LOADING=$loading MLA_CACHE_DIR=$cache "$bin/mla-run" \
          --device=gpu --host-repeats=0 > "$log" 2>&1
        summary+=("mixed steps, modules loaded $loading, $attempt: $(setup "$log"), $(grep -A3 '^first mixed step' "$log" | grep prefill | tr -s ' ')")
      done
      rm -rf "$cache"
    done
    ;;
  dcp)
    dcp_filter='MergeN*:Merge.*:MetadataDcp*:LayerTest.Dcp*:LayerErrors.Dcp*'
    MLA_TEST_DEVICE=gpu "$bin/mla-unit-tests" --gtest_filter="$dcp_filter" \
      > "$out/dcp-numerics.log" 2>&1
    summary+=("dcp numerics: exit $? ($(grep -E '^\[  (PASSED|FAILED)' "$out/dcp-numerics.log" | tr '\n' ' '))")
    "$bin/mla-run" --device=gpu --dcp-world-size=2 --workspace=1024 > "$out/dcp-run-2.log" 2>&1
    summary+=("mla-run --dcp-world-size=2: exit $? ($(grep -E 'merged:|prefill rows' "$out/dcp-run-2.log" | tr -s ' ' | tr '\n' ';'))")
    # The float64 reference runs on the host: contexts stay a few thousand.
    "$bin/mla-run" --device=gpu --heads=128 --dcp-world-size=4 --dcp-interleave=16 \
      --decode-query-len=2 --decode-contexts=4000,100,1,0 --prefill-contexts=2000,0,70 \
      --prefill-new-tokens=100,17,3 --workspace=1024 > "$out/dcp-run-4.log" 2>&1
    summary+=("mla-run --heads=128 --dcp-world-size=4 --dcp-interleave=16 --decode-query-len=2: exit $? ($(grep -E 'merged:|prefill rows' "$out/dcp-run-4.log" | tr -s ' ' | tr '\n' ';'))")
    if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
      # NVLink multicast stays off (the machines' rule).
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      worker() {
        local log=$1; shift
        local port=$((20000 + RANDOM % 20000))
        for rank in 0 1; do
          MLA_LIBRARY=$here/lib/libmla.so PYTHONPATH=$here/python${PYTHONPATH:+:$PYTHONPATH} \
            "${MLA_PYTHON:-python3}" "$here/python/tests/dcp_worker.py" --rank $rank --world 2 \
            --init tcp://127.0.0.1:$port --backend nccl --block-size 64 "$@" >> "$log" 2>&1 &
        done
        wait
      }
      # The float64 reference up-projects every context on the host: the
      # 128-head check keeps its contexts short.
      for check in "16 4000,1500,64,0,1,8191,3000,777" "128 1200,64,0,1,700"; do
        set -- $check
        log=$out/dcp-nccl-check-$1.log
        worker "$log" --heads "$1" --dtype bf16 --graph --contexts "$2"
        summary+=("2 GPUs over NCCL, $1 heads: $(grep -E '^rank' "$log" | tr '\n' ';')")
      done
      # Decodes of 2 new tokens (speculative decoding), captured too.
      log=$out/dcp-nccl-check-sq2.log
      worker "$log" --heads 16 --dtype bf16 --graph --query-len 2 --contexts 4000,1500,64,0,1,8191
      summary+=("2 GPUs over NCCL, 2 new tokens a decode, 16 heads: $(grep -E '^rank' "$log" | tr '\n' ';')")
      # Mixed steps: the prefills' context in several chunks over NCCL.
      for check in "16 3000,1,0 3000:200,0:64,700:33 2048" "128 900,0 600:40,0:16,130:2 512"; do
        set -- $check
        log=$out/dcp-nccl-mixed-$1.log
        worker "$log" --heads "$1" --dtype bf16 --contexts "$2" --prefills "$3" --workspace "$4"
        summary+=("2 GPUs over NCCL, mixed step, $1 heads: $(grep -E '^rank' "$log" | tr '\n' ';')")
      done
      log=$out/dcp-nccl-bench.log
      worker "$log" --heads 16 --dtype bf16 --bench 64x32768 --repeats 20
      summary+=("2 GPUs over NCCL, 64 x 32k, 16 heads: $(grep -E '^rank' "$log" | tr '\n' ';')")
    fi
    sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    MLA_TEST_DEVICE=gpu "$sanitizer" --tool memcheck --error-exitcode 97 \
      "$bin/mla-unit-tests" --gtest_filter="$dcp_filter" > "$out/dcp-memcheck.log" 2>&1
    summary+=("dcp memcheck: exit $? ($(grep -E 'ERROR SUMMARY' "$out/dcp-memcheck.log" | tail -1))")
    ;;
  bench)
    [ -x "$bin/mla-bench" ] || { summary+=("bench: not in this bundle"); continue; }
    "$bin/mla-bench" ${MLA_BENCH_ARGS:-} > "$out/bench.log" 2>&1
    summary+=("bench: exit $?")
    ;;
  esac
done

printf '%s\n' "${summary[@]}"

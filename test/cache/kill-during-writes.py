#!/usr/bin/env python3
"""A writer of the kernel cache killed with SIGKILL at any point of a write,
alone or beside other writers, never leaves an entry that is served corrupt.

  kill-during-writes.py MLA_CACHE CRASH_SHIM [--rounds N]

Writers are `mla-cache fill` runs (the CPU modules of a small layer).
1. Every crash point: for each write (half its bytes written), fsync and
   rename the fill makes in the cache, a fill into a fresh cache killed
   there, then a `fill --force` into a full cache (replacing every entry),
   killed there.
   After each kill, `mla-cache verify` (which checks every entry as a lookup
   would) finds no corrupt entry, and a plain fill then completes the cache,
   serving only valid entries (verify clean again).
2. Several writers: four fills at once into one cache, each killed at a
   random moment, for --rounds rounds; after each round, verify finds no
   corrupt entry; at the end a fill completes the cache and verify is clean.
Exits non-zero with the reason on the first failure.
"""
import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

FILL = ["fill", "--chips", "cpu", "--heads", "2", "--kv-lora-rank", "64",
        "--qk-nope-head-dim", "16", "--qk-rope-head-dim", "16", "--v-head-dim", "16"]
MODULES = 5
INCOMPLETE = [0]


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def run_fill(tool, cache, env_extra=None, shim=None, force=False):
    env = dict(os.environ)
    env.update(env_extra or {})
    if shim:
        env["LD_PRELOAD"] = shim
        env["MLA_CRASH_DIR"] = cache
    return subprocess.run([tool] + FILL + ["--cache-dir", cache] + (["--force"] if force else []),
                          env=env, capture_output=True, text=True)


def verify(tool, cache, when):
    """No entry is corrupt; returns the number of valid entries. Counts the
    interrupted writes seen (entries without a manifest) in INCOMPLETE."""
    out = subprocess.run([tool, "verify", "--cache-dir", cache],
                         capture_output=True, text=True)
    summary = re.search(r"(\d+) entries, .*; (\d+) stale, (\d+) corrupt, (\d+) incomplete",
                        out.stdout)
    if not summary:
        fail(f"{when}: verify printed no summary:\n{out.stdout}{out.stderr}")
    if out.returncode != 0 or summary.group(3) != "0":
        fail(f"{when}: verify found corrupt entries:\n{out.stdout}{out.stderr}")
    INCOMPLETE[0] += int(summary.group(4))
    return int(summary.group(1)) - int(summary.group(4))


def complete(tool, cache, when):
    """A plain fill completes the cache from whatever the crash left."""
    out = run_fill(tool, cache)
    if out.returncode != 0 or f"{MODULES} modules" not in out.stdout:
        fail(f"{when}: the fill after the crash failed:\n{out.stdout}{out.stderr}")
    if verify(tool, cache, when + ", after the refill") != MODULES:
        fail(f"{when}: the refilled cache does not hold {MODULES} entries")


def count_calls(tool, shim, scratch):
    cache = os.path.join(scratch, "count")
    out = run_fill(tool, cache, {"MLA_CRASH_AT": "count"}, shim)
    found = re.search(r"write (\d+) fsync (\d+) rename (\d+)", out.stderr)
    if out.returncode != 0 or not found:
        fail(f"counting the fill's file operations failed:\n{out.stdout}{out.stderr}")
    return {"write": int(found.group(1)), "fsync": int(found.group(2)),
            "rename": int(found.group(3))}, cache


def every_crash_point(tool, shim, scratch):
    counts, full = count_calls(tool, shim, scratch)
    if min(counts.values()) < MODULES:
        fail(f"the shim saw too few file operations: {counts}")
    crashes = 0
    for kind, n in counts.items():
        for i in range(1, n + 1):
            for start in ("empty", "full"):
                cache = os.path.join(scratch, f"{kind}-{i}-{start}")
                env = {"MLA_CRASH_AT": f"{kind}:{i}"}
                if start == "full":
                    shutil.copytree(full, cache)
                out = run_fill(tool, cache, env, shim, force=start == "full")
                when = f"killed at {kind} {i} of {n} into a{'n' if start == 'empty' else ''} {start} cache"
                if out.returncode != -signal.SIGKILL:
                    fail(f"{when}: the fill was not killed (exit {out.returncode}):\n{out.stderr}")
                verify(tool, cache, when)
                complete(tool, cache, when)
                shutil.rmtree(cache)
                crashes += 1
    print(f"every crash point: {crashes} kills ({counts}), no corrupt entry; "
          f"{INCOMPLETE[0]} interrupted writes left, each rebuilt")
    if INCOMPLETE[0] == 0:
        fail("no kill left an interrupted write: the crash points missed the writes")


def concurrent_writers(tool, scratch, rounds, rng):
    cache = os.path.join(scratch, "shared")
    kills = 0
    for r in range(rounds):
        # Every other round rewrites the entries that exist.
        force = ["--force"] if r % 2 else []
        procs = [subprocess.Popen([tool] + FILL + ["--cache-dir", cache] + force,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for _ in range(4)]
        deadlines = [time.monotonic() + rng.uniform(0.05, 1.5) for _ in procs]
        for p, deadline in sorted(zip(procs, deadlines), key=lambda x: x[1]):
            time.sleep(max(0.0, deadline - time.monotonic()))
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                kills += 1
        for p in procs:
            p.wait()
        verify(tool, cache, f"round {r} of concurrent writers")
    complete(tool, cache, "after the concurrent writers")
    print(f"concurrent writers: {rounds} rounds of 4, {kills} killed, no corrupt entry")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mla_cache")
    parser.add_argument("crash_shim")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print(f"seed {seed}")
    with tempfile.TemporaryDirectory(prefix="mla-cache-kill-") as scratch:
        every_crash_point(args.mla_cache, args.crash_shim, scratch)
        concurrent_writers(args.mla_cache, scratch, args.rounds, random.Random(seed))


if __name__ == "__main__":
    main()

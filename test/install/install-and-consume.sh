#!/usr/bin/env bash
# Installs the build into a fresh prefix and builds test/install/consumer
# against it out of tree, three ways: CMake's find_package(mla), pkg-config,
# and a plain `cc -lmla`; each program runs (on the CPU) from the installed
# library alone. Also checks the installed layout and the library's SONAME.
#   install-and-consume.sh <build-dir> <scratch-dir>
set -euo pipefail
build=$1
scratch=$2
here=$(cd "$(dirname "$0")" && pwd)
prefix=$scratch/prefix
rm -rf "$scratch"
mkdir -p "$scratch"

cmake --install "$build" --prefix "$prefix" >"$scratch/install.log"

for f in include/mla/mla.h lib/libmla.so lib/cmake/mla/mlaConfig.cmake \
         lib/cmake/mla/mlaConfigVersion.cmake lib/cmake/mla/mlaTargets.cmake \
         lib/pkgconfig/mla.pc lib/python3/dist-packages/mla/__init__.py \
         bin/mla-opt bin/mla-run bin/mla-cache; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
# Only the C interface is installed: no static archive of the build.
if ls "$prefix"/lib/*.a >/dev/null 2>&1; then
  echo "FAIL: static archives installed:"; ls "$prefix"/lib/*.a; exit 1
fi
soname=$(objdump -p "$prefix/lib/libmla.so" | awk '/SONAME/ {print $2}')
major=$(awk '/#define MLA_VERSION_MAJOR/ {print $3}' "$prefix/include/mla/mla.h")
[ "$soname" = "libmla.so.$major" ] ||
  { echo "FAIL: SONAME '$soname', expected libmla.so.$major"; exit 1; }

# The installed tree is all the consumers see: no build tree, no sources.
export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

echo "== find_package(mla)"
cmake -S "$here/consumer" -B "$scratch/cmake-build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" >"$scratch/cmake-configure.log"
cmake --build "$scratch/cmake-build" >"$scratch/cmake-build.log"
# The imported target's RUNPATH is CMake's own; run without LD_LIBRARY_PATH.
env -u LD_LIBRARY_PATH "$scratch/cmake-build/consumer" "$scratch/cache"

echo "== pkg-config"
read -r -a flags <<<"$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs mla)"
cc -std=c99 -Wall -Werror "$here/consumer/consumer.c" "${flags[@]}" -lm \
  -o "$scratch/consumer-pkg-config"
"$scratch/consumer-pkg-config" "$scratch/cache"

echo "== the installed Python package finds the installed library"
python=$(command -v /usr/bin/python3 || command -v python3)
(cd "$scratch" && env -u MLA_LIBRARY -u LD_LIBRARY_PATH \
  PYTHONPATH="$prefix/lib/python3/dist-packages" "$python" -c "
import mla, sys
found = mla.version().library_path
assert found.startswith(sys.argv[1]), found
with mla.Runtime(device='cpu', disable_disk_cache=True, log=False) as runtime:
    print('mla', mla.__version__, 'from', found, 'on', runtime.description)
" "$prefix/lib/")

echo "== cc -lmla"
cc -std=c99 -Wall -Werror "$here/consumer/consumer.c" -I"$prefix/include" \
  -L"$prefix/lib" -lmla -lm -o "$scratch/consumer-cc"
"$scratch/consumer-cc" "$scratch/cache"
echo "PASS"

// Times the CUDA driver's JIT compile of PTX files, outside the product:
// each file loaded alone (twice, in order), then all of them at once, one
// thread each, as PreloadedModules loads a compile's kernel modules.
//
// Built and run on the GPU machine (the toolkit's headers and the driver
// are there), with the driver's JIT cache off:
//   g++ -O2 -o /tmp/driver-jit-times scripts/driver-jit-times.cpp \
//       -I/usr/local/cuda/include -L/usr/local/cuda/lib64/stubs -lcuda -lpthread
//   CUDA_CACHE_DISABLE=1 /tmp/driver-jit-times a.ptx b.ptx ...
// The PTX files come from `mla-opt ... --mla-print-ptx=output=all.ptx`,
// cut at its "// mla-print-ptx: module @NAME" lines.
#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

static double nowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

static bool ok(CUresult result, const char *call) {
  if (result == CUDA_SUCCESS)
    return true;
  std::fprintf(stderr, "%s failed: %d\n", call, int(result));
  return false;
}

int main(int argc, char **argv) {
  CUdevice device;
  CUcontext context;
  if (!ok(cuInit(0), "cuInit") || !ok(cuDeviceGet(&device, 0), "cuDeviceGet") ||
      !ok(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain") ||
      !ok(cuCtxSetCurrent(context), "cuCtxSetCurrent"))
    return 1;
  std::vector<std::string> ptx;
  for (int i = 1; i < argc; ++i) {
    std::ifstream file(argv[i]);
    std::stringstream text;
    text << file.rdbuf();
    ptx.push_back(text.str());
  }
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < ptx.size(); ++i) {
      double start = nowMs();
      CUmodule module;
      if (!ok(cuModuleLoadData(&module, ptx[i].c_str()), "cuModuleLoadData"))
        return 1;
      std::printf("alone, round %d: %s %.1f ms\n", round, argv[i + 1],
                  nowMs() - start);
      cuModuleUnload(module);
    }
  double start = nowMs();
  std::vector<double> begun(ptx.size()), ended(ptx.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ptx.size(); ++i)
    threads.emplace_back([&, i] {
      cuCtxSetCurrent(context);
      begun[i] = nowMs() - start;
      CUmodule module;
      if (ok(cuModuleLoadData(&module, ptx[i].c_str()), "cuModuleLoadData"))
        cuModuleUnload(module);
      ended[i] = nowMs() - start;
    });
  for (std::thread &thread : threads)
    thread.join();
  for (size_t i = 0; i < ptx.size(); ++i)
    std::printf("together: %s %.1f -> %.1f ms\n", argv[i + 1], begun[i],
                ended[i]);
  return 0;
}

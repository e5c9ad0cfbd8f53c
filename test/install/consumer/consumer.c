/*===- consumer.c - A program built against an installed libmla ----------===*
 *
 * Built out of tree against `cmake --install`'s layout, three ways (CMake's
 * find_package, pkg-config, a plain `cc -lmla`): checks that the library's
 * version is the header's, then compiles a merge of two attention states
 * from MLIR text on a CPU runtime and runs it on two rows whose states are
 * known (one empty), so that the JIT and the hidden symbols are exercised
 * from the installed library.
 *
 *   consumer <kernel-cache-dir>
 *
 *===----------------------------------------------------------------------===*/

#include "mla/mla.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *kMerge =
    "func.func @merge(%po: memref<2x1x4xf32>, %pl: memref<1x2xf32>,\n"
    "                 %so: memref<2x1x4xf32>, %sl: memref<1x2xf32>,\n"
    "                 %o: memref<2x1x4xf32>, %ol: memref<1x2xf32>) {\n"
    "  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<2x1x4xf32>,"
    " memref<1x2xf32>, memref<2x1x4xf32>, memref<1x2xf32>)\n"
    "      outs(%o, %ol : memref<2x1x4xf32>, memref<1x2xf32>)\n"
    "  return\n"
    "}\n";

static int check(mla_status_t status, const char *what) {
  if (status == MLA_OK)
    return 0;
  fprintf(stderr, "consumer: %s: %s: %s\n", what, mla_status_string(status),
          mla_last_error());
  return 1;
}

int main(int argc, char **argv) {
  mla_version_info_t version;
  if (check(mla_version(&version), "mla_version"))
    return 1;
  if (version.major != MLA_VERSION_MAJOR || version.minor < MLA_VERSION_MINOR) {
    fprintf(stderr, "consumer: library %s, header %d.%d.%d\n", version.version,
            MLA_VERSION_MAJOR, MLA_VERSION_MINOR, MLA_VERSION_PATCH);
    return 1;
  }
  printf("libmla %s: %s; chips %s\n", version.version, version.build_identity,
         version.gpu_chips);

  mla_runtime_options_t options;
  mla_runtime_options_default(&options);
  options.device = MLA_DEVICE_CPU;
  options.cache_dir = argc > 1 ? argv[1] : NULL;
  mla_runtime_t *runtime = NULL;
  mla_kernel_t *kernel = NULL;
  int failed = check(mla_runtime_create(&options, &runtime), "runtime") ||
               check(mla_kernel_compile_source(runtime, kMerge, "merge",
                                               &kernel),
                     "compile");

  /* Row 0 merges states of equal LSE (the mean); row 1 an empty prefix
   * (LSE -inf) with a suffix (the suffix). */
  float po[8] = {1, 2, 3, 4, 9, 9, 9, 9}, so[8] = {3, 4, 5, 6, 1, 2, 3, 4};
  float pl[2] = {0.5f, -INFINITY}, sl[2] = {0.5f, 2.0f};
  float out[8], ol[2];
  const int64_t outShape[3] = {2, 1, 4}, lseShape[2] = {1, 2};
  mla_tensor_t args[6];
  float *data[6] = {po, pl, so, sl, out, ol};
  for (int i = 0; !failed && i < 6; ++i)
    failed = check(mla_tensor_contiguous(data[i], MLA_DTYPE_F32, i % 2 ? 2 : 3,
                                         i % 2 ? lseShape : outShape, &args[i]),
                   "tensor");
  if (!failed)
    failed = check(mla_kernel_run(kernel, args, 6, NULL), "run");
  if (!failed) {
    for (int j = 0; j < 4; ++j) {
      float mean = (po[j] + so[j]) / 2;
      if (fabsf(out[j] - mean) > 1e-5f || fabsf(out[4 + j] - so[4 + j]) > 1e-5f) {
        fprintf(stderr, "consumer: merged value %d wrong: %g %g\n", j, out[j],
                out[4 + j]);
        failed = 1;
      }
    }
    float lse0 = 0.5f + logf(2.0f);
    if (fabsf(ol[0] - lse0) > 1e-5f || fabsf(ol[1] - 2.0f) > 1e-5f) {
      fprintf(stderr, "consumer: merged LSE wrong: %g %g\n", ol[0], ol[1]);
      failed = 1;
    }
  }
  mla_kernel_destroy(kernel);
  mla_runtime_destroy(runtime);
  if (!failed)
    printf("consumer: merge from the installed library PASS\n");
  return failed;
}

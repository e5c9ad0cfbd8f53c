//===- CApiTest.cpp - The C interface (include/mla/mla.h) -----------------===//
//
// Through the C functions only, on a runtime forced to the CPU with a
// temporary kernel cache directory: argument, dtype, shape, metadata and
// backend errors (status and message), the prefill backend's selection
// apart from the decode's, a single op compiled from MLIR text
// and run against float64 arithmetic, the layer's forward compared byte for
// byte with the same forward through the C++ API, the kernel cache counters
// (a disk hit in a second runtime on the same directory, a corrupt entry,
// force-recompile, memory only), device memory and the runtime's refusal to
// go before its objects.
//
//===----------------------------------------------------------------------===//

#include "mla/mla.h"

#include "mla/Runtime/MlaLayer.h"
#include "mla/Runtime/Runtime.h"
#include "mla/Support/Float16.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Expects `status` to be `want` and the last error to contain every
/// fragment.
void expectFailure(mla_status_t status, mla_status_t want,
                   std::initializer_list<const char *> fragments) {
  std::string message = mla_last_error();
  EXPECT_EQ(status, want) << "got " << mla_status_string(status) << ": "
                          << message;
  for (const char *fragment : fragments)
    EXPECT_NE(message.find(fragment), std::string::npos)
        << "'" << fragment << "' not in: " << message;
}

#define EXPECT_OK(call)                                                        \
  do {                                                                         \
    mla_status_t status_ = (call);                                             \
    EXPECT_EQ(status_, MLA_OK) << #call << ": " << mla_status_string(status_)  \
                               << ": " << mla_last_error();                    \
  } while (false)

#define ASSERT_OK(call)                                                        \
  do {                                                                         \
    mla_status_t status_ = (call);                                             \
    ASSERT_EQ(status_, MLA_OK) << #call << ": " << mla_status_string(status_)  \
                               << ": " << mla_last_error();                    \
  } while (false)

/// Owning wrappers: declared runtime first, so it is destroyed last.
struct CRuntime {
  mla_runtime_t *p = nullptr;
  ~CRuntime() {
    if (p) {
      EXPECT_EQ(mla_runtime_destroy(p), MLA_OK) << mla_last_error();
    }
  }
};
struct CLayer {
  mla_layer_t *p = nullptr;
  ~CLayer() { EXPECT_EQ(mla_layer_destroy(p), MLA_OK) << mla_last_error(); }
};
struct CPlan {
  mla_plan_t *p = nullptr;
  ~CPlan() { EXPECT_EQ(mla_plan_destroy(p), MLA_OK) << mla_last_error(); }
};
struct CKernel {
  mla_kernel_t *p = nullptr;
  ~CKernel() { EXPECT_EQ(mla_kernel_destroy(p), MLA_OK) << mla_last_error(); }
};
/// Device memory of a C runtime (host memory: the runtime is on the CPU).
struct Buffer {
  mla_runtime_t *runtime = nullptr;
  void *p = nullptr;
  size_t bytes = 0;
  Buffer() = default;
  Buffer(const Buffer &) = delete;
  ~Buffer() {
    if (runtime) {
      EXPECT_EQ(mla_runtime_free(runtime, p), MLA_OK) << mla_last_error();
    }
  }
};

constexpr double kInf = std::numeric_limits<double>::infinity();

/// A merge of two attention states over 4 heads of 32 values, f32.
const char *kMergeSource = R"mlir(
func.func @kernel(%po: memref<?x4x32xf32>, %pl: memref<4x?xf32>,
                  %so: memref<?x4x32xf32>, %sl: memref<4x?xf32>,
                  %o: memref<?x4x32xf32>, %ol: memref<4x?xf32>) {
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<?x4x32xf32>, memref<4x?xf32>, memref<?x4x32xf32>, memref<4x?xf32>)
      outs(%o, %ol : memref<?x4x32xf32>, memref<4x?xf32>)
  return
}
)mlir";

class CApiTest : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> path;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("mla-capi", path));
    dir = std::string(path);
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  /// CPU runtime options with the test's cache directory.
  mla_runtime_options_t cpuOptions() const {
    mla_runtime_options_t options;
    EXPECT_OK(mla_runtime_options_default(&options));
    options.device = MLA_DEVICE_CPU;
    options.cache_dir = dir.c_str();
    return options;
  }

  void makeRuntime(CRuntime &runtime) const {
    mla_runtime_options_t options = cpuOptions();
    ASSERT_OK(mla_runtime_create(&options, &runtime.p));
  }

  /// A device buffer holding `bytes` copied from `host` (if given).
  static void makeBuffer(mla_runtime_t *runtime, Buffer &buffer,
                         const void *host, size_t bytes) {
    ASSERT_OK(mla_runtime_allocate(runtime, bytes, &buffer.p));
    buffer.runtime = runtime;
    buffer.bytes = bytes;
    if (host) {
      ASSERT_OK(mla_runtime_upload(runtime, buffer.p, host, bytes, nullptr));
    }
  }

  std::string dir;
};

//===----------------------------------------------------------------------===//
// Status, errors, NULL arguments
//===----------------------------------------------------------------------===//

TEST_F(CApiTest, StatusStringsAndLastError) {
  EXPECT_STREQ(mla_status_string(MLA_OK), "MLA_OK");
  EXPECT_STREQ(mla_status_string(MLA_ERROR_INVALID_METADATA),
               "MLA_ERROR_INVALID_METADATA");
  EXPECT_STREQ(mla_status_string(MLA_ERROR_BACKEND_REJECTED),
               "MLA_ERROR_BACKEND_REJECTED");
  EXPECT_STREQ(mla_status_string(static_cast<mla_status_t>(1234)),
               "unknown status");

  size_t bytes = 0;
  expectFailure(mla_dtype_size(MLA_DTYPE_BF16, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"mla_dtype_size", "'bytes'"});
  // Status strings leave the message alone; a success clears it.
  mla_status_string(MLA_OK);
  EXPECT_NE(std::string(mla_last_error()), "");
  EXPECT_OK(mla_dtype_size(MLA_DTYPE_BF16, &bytes));
  EXPECT_EQ(bytes, 2u);
  EXPECT_STREQ(mla_last_error(), "");
  const char *name = nullptr;
  EXPECT_OK(mla_dtype_name(MLA_DTYPE_I64, &name));
  EXPECT_STREQ(name, "i64");
}

TEST_F(CApiTest, VersionNamesTheHeaderTheBuildAndTheChips) {
  mla_version_info_t info;
  ASSERT_OK(mla_version(&info));
  EXPECT_EQ(info.major, MLA_VERSION_MAJOR);
  EXPECT_EQ(info.minor, MLA_VERSION_MINOR);
  EXPECT_EQ(info.patch, MLA_VERSION_PATCH);
  EXPECT_EQ(std::string(info.version),
            std::to_string(MLA_VERSION_MAJOR) + "." +
                std::to_string(MLA_VERSION_MINOR) + "." +
                std::to_string(MLA_VERSION_PATCH));
  std::string identity = info.build_identity;
  EXPECT_EQ(identity.rfind(std::string("mla-compiler ") + info.version, 0), 0u)
      << identity;
  EXPECT_NE(identity.find("LLVM 22"), std::string::npos) << identity;
  EXPECT_STREQ(info.gpu_chips, "sm_80,sm_86,sm_89,sm_90,sm_90a");
  // "<triple>-<cpu>-<features hash>", as CPU kernel cache entries name it.
  EXPECT_NE(std::string(info.host_target).find("-linux-"), std::string::npos)
      << info.host_target;
  expectFailure(mla_version(nullptr), MLA_ERROR_INVALID_ARGUMENT,
                {"mla_version", "'info'"});
}

TEST_F(CApiTest, LastErrorIsPerThread) {
  expectFailure(mla_runtime_create(nullptr, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'runtime'"});
  std::string other = "unset";
  std::thread([&] { other = mla_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_NE(std::string(mla_last_error()), "");
}

TEST_F(CApiTest, NullArgumentsAreNamed) {
  CRuntime runtime;
  makeRuntime(runtime);
  mla_runtime_t *rt = runtime.p;
  mla_device_kind_t kind;
  const char *text = nullptr;
  mla_cache_stats_t stats;
  mla_layer_config_t config;
  ASSERT_OK(mla_layer_config_default(&config));
  mla_layer_weights_t weights{};
  mla_backend_selection_t selection;
  void *pointer = nullptr;
  char host[16] = {};

  expectFailure(mla_runtime_device_kind(nullptr, &kind),
                MLA_ERROR_INVALID_ARGUMENT,
                {"mla_runtime_device_kind", "argument 'runtime' is NULL"});
  expectFailure(mla_runtime_device_kind(rt, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'kind'"});
  expectFailure(mla_runtime_device_description(rt, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'description'"});
  expectFailure(mla_runtime_cache_stats(nullptr, &stats),
                MLA_ERROR_INVALID_ARGUMENT, {"'runtime'"});
  expectFailure(mla_runtime_cache_stats(rt, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'stats'"});
  expectFailure(mla_runtime_select_backend(rt, nullptr, &selection),
                MLA_ERROR_INVALID_ARGUMENT, {"'config'"});
  expectFailure(mla_runtime_select_backend(rt, &config, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'selection'"});
  expectFailure(mla_layer_create(nullptr, &config, &weights, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"mla_layer_create", "'runtime'"});
  expectFailure(mla_layer_create(rt, &config, nullptr, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'weights'"});
  expectFailure(mla_layer_plan(nullptr, nullptr, 1, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"mla_layer_plan", "'layer'"});
  expectFailure(mla_layer_forward(nullptr, nullptr, nullptr, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"mla_layer_forward", "'layer'"});
  mla_decode_graph_shape_t shape{};
  expectFailure(mla_layer_plan_decode_step(nullptr, nullptr, &shape, nullptr),
                MLA_ERROR_INVALID_ARGUMENT,
                {"mla_layer_plan_decode_step", "'layer'"});
  expectFailure(
      mla_layer_capture_decode_step(nullptr, &shape, nullptr, nullptr),
      MLA_ERROR_INVALID_ARGUMENT, {"mla_layer_capture_decode_step", "'layer'"});
  expectFailure(mla_layer_replay(nullptr, nullptr, nullptr, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"mla_layer_replay", "'layer'"});
  expectFailure(mla_decode_graph_get_shape(nullptr, &shape),
                MLA_ERROR_INVALID_ARGUMENT, {"'graph'"});
  expectFailure(mla_layer_selection(nullptr, &selection),
                MLA_ERROR_INVALID_ARGUMENT, {"'layer'"});
  expectFailure(mla_plan_get_info(nullptr, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'plan'"});
  expectFailure(mla_plan_describe(nullptr, &text), MLA_ERROR_INVALID_ARGUMENT,
                {"'plan'"});
  mla_kernel_t *kernel = nullptr;
  expectFailure(mla_kernel_compile_source(rt, nullptr, "kernel", &kernel),
                MLA_ERROR_INVALID_ARGUMENT,
                {"mla_kernel_compile_source", "'source'"});
  expectFailure(mla_kernel_compile_source(rt, kMergeSource, nullptr, &kernel),
                MLA_ERROR_INVALID_ARGUMENT, {"'entry'"});
  expectFailure(mla_kernel_compile_source(rt, kMergeSource, "", &kernel),
                MLA_ERROR_INVALID_ARGUMENT, {"'entry' is empty"});
  expectFailure(mla_kernel_run(nullptr, nullptr, 0, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"mla_kernel_run", "'kernel'"});
  expectFailure(mla_kernel_get_info(nullptr, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'kernel'"});
  expectFailure(mla_runtime_allocate(rt, 16, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'pointer'"});
  expectFailure(mla_runtime_upload(rt, nullptr, host, 16, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"mla_runtime_upload", "'device'"});
  expectFailure(mla_runtime_download(rt, nullptr, host, 16, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'host'"});
  expectFailure(mla_runtime_synchronize(nullptr, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'runtime'"});
  expectFailure(mla_tensor_contiguous(nullptr, MLA_DTYPE_F32, 0, nullptr,
                                      nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'tensor'"});
  expectFailure(mla_runtime_options_default(nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'options'"});
  expectFailure(mla_layer_config_default(nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'config'"});

  // Zero bytes need no pointers; destroying or freeing NULL is a no-op.
  EXPECT_OK(mla_runtime_upload(rt, nullptr, nullptr, 0, nullptr));
  EXPECT_OK(mla_runtime_allocate(rt, 0, &pointer));
  EXPECT_EQ(pointer, nullptr);
  EXPECT_OK(mla_runtime_free(rt, nullptr));
  EXPECT_OK(mla_runtime_destroy(nullptr));
  EXPECT_OK(mla_layer_destroy(nullptr));
  EXPECT_OK(mla_plan_destroy(nullptr));
  EXPECT_OK(mla_kernel_destroy(nullptr));
  EXPECT_OK(mla_decode_graph_destroy(nullptr));
  expectFailure(mla_decode_graph_stage(nullptr, nullptr, nullptr, nullptr),
                MLA_ERROR_INVALID_ARGUMENT,
                {"mla_decode_graph_stage", "'layer'"});
  expectFailure(mla_decode_graph_enqueue(nullptr, nullptr, nullptr),
                MLA_ERROR_INVALID_ARGUMENT,
                {"mla_decode_graph_enqueue", "'layer'"});
}

//===----------------------------------------------------------------------===//
// Runtime, device, options
//===----------------------------------------------------------------------===//

void collectLog(const char *line, void *user) {
  static_cast<std::vector<std::string> *>(user)->push_back(line);
}

TEST_F(CApiTest, RuntimeOnTheCpu) {
  std::vector<std::string> log;
  mla_runtime_options_t options = cpuOptions();
  options.log = collectLog;
  options.log_user = &log;
  CRuntime runtime;
  ASSERT_OK(mla_runtime_create(&options, &runtime.p));

  mla_device_kind_t kind;
  const char *description = nullptr, *cacheDir = nullptr;
  int64_t parallelism = 0;
  ASSERT_OK(mla_runtime_device_kind(runtime.p, &kind));
  ASSERT_OK(mla_runtime_device_description(runtime.p, &description));
  ASSERT_OK(mla_runtime_parallelism(runtime.p, &parallelism));
  ASSERT_OK(mla_runtime_cache_dir(runtime.p, &cacheDir));
  EXPECT_EQ(kind, MLA_DEVICE_KIND_CPU);
  EXPECT_NE(std::string(description).find("host CPU"), std::string::npos)
      << description;
  EXPECT_GE(parallelism, 1);
  EXPECT_EQ(std::string(cacheDir), dir);
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.back().find(dir), std::string::npos) << log.back();

  // Memory only.
  options.disable_disk_cache = 1;
  CRuntime memoryOnly;
  ASSERT_OK(mla_runtime_create(&options, &memoryOnly.p));
  ASSERT_OK(mla_runtime_cache_dir(memoryOnly.p, &cacheDir));
  EXPECT_STREQ(cacheDir, "");
}

TEST_F(CApiTest, BadRuntimeOptions) {
  mla_runtime_options_t options = cpuOptions();
  options.device = static_cast<mla_device_preference_t>(7);
  mla_runtime_t *runtime = nullptr;
  expectFailure(mla_runtime_create(&options, &runtime),
                MLA_ERROR_INVALID_ARGUMENT, {"options->device"});
  options = cpuOptions();
  options.gpu_ordinal = -1;
  expectFailure(mla_runtime_create(&options, &runtime),
                MLA_ERROR_INVALID_ARGUMENT, {"gpu_ordinal"});
  EXPECT_EQ(runtime, nullptr);
}

TEST_F(CApiTest, GpuPreferenceWithoutAGpuIsNoDevice) {
  mla_runtime_options_t options = cpuOptions();
  options.device = MLA_DEVICE_GPU;
  CRuntime runtime;
  mla_status_t status = mla_runtime_create(&options, &runtime.p);
  if (status == MLA_OK) {
    mla_device_kind_t kind;
    ASSERT_OK(mla_runtime_device_kind(runtime.p, &kind));
    EXPECT_EQ(kind, MLA_DEVICE_KIND_CUDA);
    return;
  }
  expectFailure(status, MLA_ERROR_NO_DEVICE, {"mla_runtime_create", "GPU"});
}

//===----------------------------------------------------------------------===//
// Tensors and memory
//===----------------------------------------------------------------------===//

TEST_F(CApiTest, Tensors) {
  float data[24];
  const int64_t shape[3] = {2, 3, 4};
  mla_tensor_t t;
  ASSERT_OK(mla_tensor_contiguous(data, MLA_DTYPE_F32, 3, shape, &t));
  EXPECT_EQ(t.data, data);
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.strides[0], 12);
  EXPECT_EQ(t.strides[1], 4);
  EXPECT_EQ(t.strides[2], 1);
  size_t bytes = 0;
  ASSERT_OK(mla_tensor_span_bytes(&t, &bytes));
  EXPECT_EQ(bytes, sizeof(data));
  t.strides[0] = 20; // padded rows
  ASSERT_OK(mla_tensor_span_bytes(&t, &bytes));
  EXPECT_EQ(bytes, (20 + 11 + 1) * sizeof(float));

  expectFailure(mla_tensor_contiguous(data, static_cast<mla_dtype_t>(42), 3,
                                      shape, &t),
                MLA_ERROR_INVALID_ARGUMENT, {"invalid dtype", "42"});
  expectFailure(mla_tensor_contiguous(data, MLA_DTYPE_F32, 9, shape, &t),
                MLA_ERROR_INVALID_ARGUMENT, {"rank 9"});
  const int64_t negative[2] = {2, -3};
  expectFailure(mla_tensor_contiguous(data, MLA_DTYPE_F32, 2, negative, &t),
                MLA_ERROR_INVALID_ARGUMENT, {"shape[1]"});
  expectFailure(mla_tensor_contiguous(data, MLA_DTYPE_F32, 2, nullptr, &t),
                MLA_ERROR_INVALID_ARGUMENT, {"'shape'"});
  expectFailure(mla_dtype_size(static_cast<mla_dtype_t>(-1), &bytes),
                MLA_ERROR_INVALID_ARGUMENT, {"invalid dtype"});
}

TEST_F(CApiTest, DeviceMemory) {
  CRuntime runtime;
  makeRuntime(runtime);
  std::vector<int32_t> values(1000);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = int32_t(i * 7 - 300);
  void *device = nullptr;
  ASSERT_OK(mla_runtime_allocate(runtime.p, values.size() * 4, &device));
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(device) % 256, 0u);
  ASSERT_OK(mla_runtime_upload(runtime.p, device, values.data(),
                               values.size() * 4, nullptr));
  std::vector<int32_t> back(values.size());
  ASSERT_OK(mla_runtime_download(runtime.p, back.data(), device,
                                 back.size() * 4, nullptr));
  EXPECT_EQ(back, values);
  EXPECT_OK(mla_runtime_synchronize(runtime.p, nullptr));

  // The runtime does not go while memory it gave out is alive.
  expectFailure(mla_runtime_destroy(runtime.p), MLA_ERROR_INVALID_ARGUMENT,
                {"1 allocation(s)", "nothing was released"});
  expectFailure(mla_runtime_free(runtime.p, back.data()),
                MLA_ERROR_INVALID_ARGUMENT, {"not allocated by this runtime"});
  EXPECT_OK(mla_runtime_free(runtime.p, device));
  expectFailure(mla_runtime_free(runtime.p, device),
                MLA_ERROR_INVALID_ARGUMENT, {"freed already"});
}

//===----------------------------------------------------------------------===//
// Backend selection
//===----------------------------------------------------------------------===//

TEST_F(CApiTest, BackendSelection) {
  CRuntime runtime;
  makeRuntime(runtime);
  mla_layer_config_t config;
  ASSERT_OK(mla_layer_config_default(&config));
  EXPECT_EQ(config.num_heads, 128);
  EXPECT_EQ(config.kv_lora_rank, 512);
  EXPECT_EQ(config.qk_nope_head_dim, 128);
  EXPECT_EQ(config.qk_rope_head_dim, 64);
  EXPECT_EQ(config.v_head_dim, 128);
  EXPECT_EQ(config.activation_dtype, MLA_DTYPE_BF16);
  EXPECT_EQ(config.block_size, 64);
  EXPECT_EQ(config.backend, nullptr);

  mla_backend_selection_t selection;
  if (!std::getenv("MLA_ATTENTION_BACKEND")) {
    ASSERT_OK(mla_runtime_select_backend(runtime.p, &config, &selection));
    EXPECT_STREQ(selection.backend, "CPU_JIT");
    EXPECT_EQ(selection.source, MLA_BACKEND_SOURCE_PRIORITY);
    EXPECT_EQ(selection.num_skipped, 0);
    EXPECT_STREQ(selection.skipped, "");
    EXPECT_STREQ(selection.summary, "CPU_JIT");
  }

  config.backend = "CPU_JIT";
  ASSERT_OK(mla_runtime_select_backend(runtime.p, &config, &selection));
  EXPECT_STREQ(selection.backend, "CPU_JIT");
  EXPECT_EQ(selection.source, MLA_BACKEND_SOURCE_REQUESTED);
  EXPECT_NE(std::string(selection.description).find("JIT"), std::string::npos)
      << selection.description;
  // The CPU runs everything on the calling thread: nothing to capture.
  EXPECT_EQ(selection.cuda_graphs, MLA_CUDA_GRAPHS_NEVER);

  // An unknown name lists the valid ones.
  config.backend = "FLASH_NOPE";
  expectFailure(mla_runtime_select_backend(runtime.p, &config, &selection),
                MLA_ERROR_BACKEND_REJECTED,
                {"FLASH_NOPE", "CPU_JIT", "GENERIC_GPU", "TC_SM90A"});
  // A GPU backend refuses the CPU, with its reason.
  config.backend = "GENERIC_GPU";
  expectFailure(mla_runtime_select_backend(runtime.p, &config, &selection),
                MLA_ERROR_BACKEND_REJECTED, {"GENERIC_GPU", "CPU"});
  // A malformed configuration is an argument error, not a refusal.
  config.backend = nullptr;
  config.num_heads = 0;
  expectFailure(mla_runtime_select_backend(runtime.p, &config, &selection),
                MLA_ERROR_INVALID_ARGUMENT, {"config->num_heads", "positive"});
}

/// Sets or unsets MLA_PREFILL_BACKEND for one scope, restoring it after.
class ScopedPrefillEnv {
public:
  explicit ScopedPrefillEnv(const char *value) {
    if (const char *old = std::getenv("MLA_PREFILL_BACKEND"))
      previous = old;
    set(value);
  }
  ~ScopedPrefillEnv() { set(previous.empty() ? nullptr : previous.c_str()); }

private:
  static void set(const char *value) {
    if (value)
      setenv("MLA_PREFILL_BACKEND", value, 1);
    else
      unsetenv("MLA_PREFILL_BACKEND");
  }
  std::string previous;
};

// Fields are appended, so that callers built against an older struct
// still find every earlier field where it was: prefill_backend after
// backend, then the DCP fields, last.
static_assert(offsetof(mla_layer_config_t, prefill_backend) ==
                  offsetof(mla_layer_config_t, backend) + sizeof(const char *),
              "prefill_backend follows backend");
static_assert(offsetof(mla_layer_config_t, dcp_world_size) ==
                  offsetof(mla_layer_config_t, prefill_backend) +
                      sizeof(const char *),
              "the DCP fields follow prefill_backend");
static_assert(offsetof(mla_layer_config_t, dcp_interleave) + sizeof(int64_t) ==
                  sizeof(mla_layer_config_t),
              "dcp_interleave is the config's last field");

TEST_F(CApiTest, PrefillBackendSelection) {
  CRuntime runtime;
  makeRuntime(runtime);
  ScopedPrefillEnv noEnv(nullptr);
  mla_layer_config_t config;
  ASSERT_OK(mla_layer_config_default(&config));
  EXPECT_EQ(config.prefill_backend, nullptr);

  mla_backend_selection_t selection;
  ASSERT_OK(
      mla_runtime_select_prefill_backend(runtime.p, &config, &selection));
  EXPECT_STREQ(selection.backend, "PREFILL_CPU_JIT");
  EXPECT_EQ(selection.source, MLA_BACKEND_SOURCE_PRIORITY);
  EXPECT_EQ(selection.num_skipped, 0);
  EXPECT_STREQ(selection.skipped, "");
  EXPECT_STREQ(selection.summary, "PREFILL_CPU_JIT");
  EXPECT_EQ(selection.cuda_graphs, MLA_CUDA_GRAPHS_NEVER);

  config.prefill_backend = "PREFILL_CPU_JIT";
  ASSERT_OK(
      mla_runtime_select_prefill_backend(runtime.p, &config, &selection));
  EXPECT_EQ(selection.source, MLA_BACKEND_SOURCE_REQUESTED);
  EXPECT_STREQ(selection.summary, "PREFILL_CPU_JIT (requested)");
  EXPECT_NE(std::string(selection.description).find("JIT"), std::string::npos)
      << selection.description;

  // Unknown names list the valid ones; a decode backend's name is unknown
  // here, a prefill backend's to the decode's selection.
  for (const char *unknown : {"FLASH_ATTN", "CPU_JIT"}) {
    config.prefill_backend = unknown;
    expectFailure(
        mla_runtime_select_prefill_backend(runtime.p, &config, &selection),
        MLA_ERROR_BACKEND_REJECTED,
        {"mla_runtime_select_prefill_backend", "unknown prefill backend",
         unknown, "PREFILL_CPU_JIT", "PREFILL_TC_SM80", "PREFILL_TC_SM90A",
         "PREFILL_GENERIC_GPU"});
  }
  config.prefill_backend = nullptr;
  config.backend = "PREFILL_CPU_JIT";
  expectFailure(mla_runtime_select_backend(runtime.p, &config, &selection),
                MLA_ERROR_BACKEND_REJECTED,
                {"unknown attention backend 'PREFILL_CPU_JIT'"});

  // A GPU prefill backend refuses the CPU, with its reason; the decode's
  // selection does not look at it.
  config.backend = nullptr;
  config.prefill_backend = "PREFILL_TC_SM80";
  expectFailure(
      mla_runtime_select_prefill_backend(runtime.p, &config, &selection),
      MLA_ERROR_BACKEND_REJECTED,
      {"prefill backend PREFILL_TC_SM80 (requested) cannot run",
       "device CPU not supported (requires CUDA)"});
  ASSERT_OK(mla_runtime_select_backend(runtime.p, &config, &selection));
  EXPECT_STREQ(selection.backend, "CPU_JIT");

  // MLA_PREFILL_BACKEND when the config names none; the config's name
  // beats it.
  {
    ScopedPrefillEnv env("PREFILL_GENERIC_GPU");
    config.prefill_backend = nullptr;
    expectFailure(
        mla_runtime_select_prefill_backend(runtime.p, &config, &selection),
        MLA_ERROR_BACKEND_REJECTED,
        {"PREFILL_GENERIC_GPU (named by MLA_PREFILL_BACKEND) cannot run"});
    config.prefill_backend = "PREFILL_CPU_JIT";
    ASSERT_OK(
        mla_runtime_select_prefill_backend(runtime.p, &config, &selection));
    EXPECT_EQ(selection.source, MLA_BACKEND_SOURCE_REQUESTED);
  }
  {
    ScopedPrefillEnv env("PREFILL_CPU_JIT");
    config.prefill_backend = "";
    ASSERT_OK(
        mla_runtime_select_prefill_backend(runtime.p, &config, &selection));
    EXPECT_EQ(selection.source, MLA_BACKEND_SOURCE_ENVIRONMENT);
    EXPECT_STREQ(selection.summary,
                 "PREFILL_CPU_JIT (from MLA_PREFILL_BACKEND)");
  }

  // A malformed configuration is an argument error, not a refusal.
  config.num_heads = 0;
  expectFailure(
      mla_runtime_select_prefill_backend(runtime.p, &config, &selection),
      MLA_ERROR_INVALID_ARGUMENT, {"config->num_heads", "positive"});
  expectFailure(
      mla_runtime_select_prefill_backend(runtime.p, nullptr, &selection),
      MLA_ERROR_INVALID_ARGUMENT,
      {"mla_runtime_select_prefill_backend", "'config'"});
  expectFailure(mla_runtime_select_prefill_backend(nullptr, &config, &selection),
                MLA_ERROR_INVALID_ARGUMENT, {"'runtime'"});
  expectFailure(mla_runtime_select_prefill_backend(runtime.p, &config, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'selection'"});
  expectFailure(mla_layer_prefill_selection(nullptr, &selection),
                MLA_ERROR_INVALID_ARGUMENT,
                {"mla_layer_prefill_selection", "'layer'"});
}

//===----------------------------------------------------------------------===//
// Single kernels from source
//===----------------------------------------------------------------------===//

TEST_F(CApiTest, MergeFromSourceMatchesFloat64) {
  CRuntime runtime;
  makeRuntime(runtime);
  CKernel kernel;
  ASSERT_OK(mla_kernel_compile_source(runtime.p, kMergeSource, "kernel",
                                      &kernel.p));
  mla_kernel_info_t info;
  ASSERT_OK(mla_kernel_get_info(kernel.p, &info));
  EXPECT_EQ(info.num_args, 6);
  EXPECT_EQ(info.origin, MLA_KERNEL_COMPILED);
  EXPECT_NE(std::string(info.cache_entry).find("merge_attn_states"),
            std::string::npos)
      << info.cache_entry;
  mla_tensor_t spec;
  ASSERT_OK(mla_kernel_argument(kernel.p, 1, &spec));
  EXPECT_EQ(spec.dtype, MLA_DTYPE_F32);
  EXPECT_EQ(spec.rank, 2);
  EXPECT_EQ(spec.shape[0], 4);
  EXPECT_EQ(spec.shape[1], -1);
  expectFailure(mla_kernel_argument(kernel.p, 6, &spec),
                MLA_ERROR_INVALID_ARGUMENT, {"index 6"});

  const int64_t tokens = 7, heads = 4, dim = 32;
  std::mt19937 gen(1234);
  std::uniform_real_distribution<float> value(-2, 2), lseValue(-4, 4);
  std::vector<float> po(tokens * heads * dim), so(po.size()), out(po.size());
  std::vector<float> pl(heads * tokens), sl(pl.size()), ol(pl.size());
  for (float &x : po)
    x = value(gen);
  for (float &x : so)
    x = value(gen);
  for (size_t i = 0; i < pl.size(); ++i) {
    pl[i] = lseValue(gen);
    sl[i] = lseValue(gen);
  }
  // Empty states: a prefix, a suffix, both.
  pl[2] = -INFINITY;
  sl[5] = -INFINITY;
  pl[9] = sl[9] = -INFINITY;

  const int64_t outShape[3] = {tokens, heads, dim}, lseShape[2] = {heads, tokens};
  mla_tensor_t args[6];
  ASSERT_OK(mla_tensor_contiguous(po.data(), MLA_DTYPE_F32, 3, outShape, &args[0]));
  ASSERT_OK(mla_tensor_contiguous(pl.data(), MLA_DTYPE_F32, 2, lseShape, &args[1]));
  ASSERT_OK(mla_tensor_contiguous(so.data(), MLA_DTYPE_F32, 3, outShape, &args[2]));
  ASSERT_OK(mla_tensor_contiguous(sl.data(), MLA_DTYPE_F32, 2, lseShape, &args[3]));
  ASSERT_OK(mla_tensor_contiguous(out.data(), MLA_DTYPE_F32, 3, outShape, &args[4]));
  ASSERT_OK(mla_tensor_contiguous(ol.data(), MLA_DTYPE_F32, 2, lseShape, &args[5]));
  ASSERT_OK(mla_kernel_run(kernel.p, args, 6, nullptr));

  double worst = 0, worstLse = 0;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      double lp = pl[h * tokens + t], ls = sl[h * tokens + t];
      double m = std::max(lp, ls);
      double wp = m == -kInf ? 0 : std::exp(lp - m);
      double ws = m == -kInf ? 0 : std::exp(ls - m);
      double wantLse = m == -kInf ? -kInf : m + std::log(wp + ws);
      double gotLse = ol[h * tokens + t];
      if (wantLse == -kInf) {
        EXPECT_EQ(gotLse, -kInf) << "token " << t << " head " << h;
      } else {
        worstLse = std::max(worstLse, std::abs(gotLse - wantLse));
      }
      for (int64_t d = 0; d < dim; ++d) {
        size_t i = (t * heads + h) * dim + d;
        double want = m == -kInf ? 0 : (wp * po[i] + ws * so[i]) / (wp + ws);
        ASSERT_FALSE(std::isnan(out[i])) << "token " << t << " head " << h;
        worst = std::max(worst, std::abs(out[i] - want));
      }
    }
  EXPECT_LT(worst, 1e-5);
  EXPECT_LT(worstLse, 1e-5);

  // Tensors that do not fit the entry's signature are named by index.
  expectFailure(mla_kernel_run(kernel.p, args, 5, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"takes 6", "got 5"});
  mla_tensor_t wrong[6];
  std::memcpy(wrong, args, sizeof(args));
  wrong[3].dtype = MLA_DTYPE_F16;
  expectFailure(mla_kernel_run(kernel.p, wrong, 6, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"argument 3", "f32"});
  std::memcpy(wrong, args, sizeof(args));
  wrong[0].shape[1] = 8;
  expectFailure(mla_kernel_run(kernel.p, wrong, 6, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"argument 0", "dimension 1 must be 4"});
  std::memcpy(wrong, args, sizeof(args));
  wrong[4].data = nullptr;
  expectFailure(mla_kernel_run(kernel.p, wrong, 6, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"argument 4", "NULL data"});
  std::memcpy(wrong, args, sizeof(args));
  wrong[2].dtype = static_cast<mla_dtype_t>(99);
  expectFailure(mla_kernel_run(kernel.p, wrong, 6, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"argument 2", "invalid dtype"});
  std::memcpy(wrong, args, sizeof(args));
  wrong[1].rank = 3;
  wrong[1].shape[2] = 1;
  wrong[1].strides[2] = 1;
  expectFailure(mla_kernel_run(kernel.p, wrong, 6, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"argument 1", "rank 2"});
}

TEST_F(CApiTest, CompileErrors) {
  CRuntime runtime;
  makeRuntime(runtime);
  mla_kernel_t *kernel = nullptr;
  expectFailure(mla_kernel_compile_source(runtime.p, "func.func @kernel(",
                                          "kernel", &kernel),
                MLA_ERROR_COMPILE,
                {"mla_kernel_compile_source", "does not parse", "expected"});
  // The verifier: the suffix's head dim differs from the prefix's.
  const char *mismatched = R"mlir(
func.func @kernel(%po: memref<?x4x32xf32>, %pl: memref<4x?xf32>,
                  %so: memref<?x4x16xf32>, %sl: memref<4x?xf32>,
                  %o: memref<?x4x32xf32>) {
  mla.merge_attn_states ins(%po, %pl, %so, %sl : memref<?x4x32xf32>, memref<4x?xf32>, memref<?x4x16xf32>, memref<4x?xf32>)
      outs(%o : memref<?x4x32xf32>)
  return
}
)mlir";
  expectFailure(
      mla_kernel_compile_source(runtime.p, mismatched, "kernel", &kernel),
      MLA_ERROR_COMPILE, {"mla_kernel_compile_source", "suffix_output"});
  expectFailure(mla_kernel_compile_source(runtime.p, kMergeSource,
                                          "no_such_entry", &kernel),
                MLA_ERROR_COMPILE, {"no_such_entry"});
  EXPECT_EQ(kernel, nullptr);
}

//===----------------------------------------------------------------------===//
// The kernel cache
//===----------------------------------------------------------------------===//

TEST_F(CApiTest, CacheStatsAcrossRuntimes) {
  mla_cache_stats_t stats;
  {
    CRuntime first;
    makeRuntime(first);
    ASSERT_OK(mla_runtime_cache_stats(first.p, &stats));
    EXPECT_EQ(stats.compiles + stats.misses + stats.disk_hits +
                  stats.memory_hits,
              0u);
    CKernel kernel;
    ASSERT_OK(mla_kernel_compile_source(first.p, kMergeSource, "kernel",
                                        &kernel.p));
    ASSERT_OK(mla_runtime_cache_stats(first.p, &stats));
    EXPECT_EQ(stats.misses, 1u);
    EXPECT_EQ(stats.compiles, 1u);
    EXPECT_EQ(stats.disk_hits, 0u);
    EXPECT_EQ(stats.store_failures, 0u);

    // The same source again in the same runtime: no second compile.
    CKernel again;
    ASSERT_OK(mla_kernel_compile_source(first.p, kMergeSource, "kernel",
                                        &again.p));
    ASSERT_OK(mla_runtime_cache_stats(first.p, &stats));
    EXPECT_EQ(stats.compiles, 1u);
    EXPECT_EQ(stats.disk_hits, 0u);
    EXPECT_EQ(stats.memory_hits, 1u);

    // Kernels must go before their runtime.
    expectFailure(mla_runtime_destroy(first.p), MLA_ERROR_INVALID_ARGUMENT,
                  {"2 kernel(s)"});
  }

  // A new runtime on the same directory: a disk hit, nothing compiled.
  {
    CRuntime second;
    makeRuntime(second);
    CKernel kernel;
    ASSERT_OK(mla_kernel_compile_source(second.p, kMergeSource, "kernel",
                                        &kernel.p));
    ASSERT_OK(mla_runtime_cache_stats(second.p, &stats));
    EXPECT_EQ(stats.disk_hits, 1u);
    EXPECT_EQ(stats.compiles, 0u);
    EXPECT_EQ(stats.misses, 0u);
    mla_kernel_info_t info;
    ASSERT_OK(mla_kernel_get_info(kernel.p, &info));
    EXPECT_EQ(info.origin, MLA_KERNEL_DISK_CACHE);
  }

  // Force-recompile compiles (and stores) again.
  {
    mla_runtime_options_t options = cpuOptions();
    options.force_recompile = 1;
    CRuntime forced;
    ASSERT_OK(mla_runtime_create(&options, &forced.p));
    CKernel kernel;
    ASSERT_OK(mla_kernel_compile_source(forced.p, kMergeSource, "kernel",
                                        &kernel.p));
    ASSERT_OK(mla_runtime_cache_stats(forced.p, &stats));
    EXPECT_EQ(stats.compiles, 1u);
    EXPECT_EQ(stats.disk_hits, 0u);
  }

  // A corrupt payload is reported, removed and rebuilt.
  {
    std::error_code ec;
    int corrupted = 0;
    for (llvm::sys::fs::recursive_directory_iterator it(dir, ec), end;
         it != end && !ec; it.increment(ec))
      if (llvm::sys::path::filename(it->path()) == "payload") {
        std::ofstream(it->path(), std::ios::binary | std::ios::trunc)
            << "not an object file";
        ++corrupted;
      }
    ASSERT_EQ(corrupted, 1);
    CRuntime third;
    makeRuntime(third);
    CKernel kernel;
    ASSERT_OK(mla_kernel_compile_source(third.p, kMergeSource, "kernel",
                                        &kernel.p));
    ASSERT_OK(mla_runtime_cache_stats(third.p, &stats));
    EXPECT_EQ(stats.corrupt_entries, 1u);
    EXPECT_EQ(stats.compiles, 1u);
    EXPECT_EQ(stats.disk_hits, 0u);
  }

  // Memory only: compiled, nothing read from the directory.
  {
    mla_runtime_options_t options = cpuOptions();
    options.disable_disk_cache = 1;
    CRuntime memoryOnly;
    ASSERT_OK(mla_runtime_create(&options, &memoryOnly.p));
    CKernel kernel;
    ASSERT_OK(mla_kernel_compile_source(memoryOnly.p, kMergeSource, "kernel",
                                        &kernel.p));
    ASSERT_OK(mla_runtime_cache_stats(memoryOnly.p, &stats));
    EXPECT_EQ(stats.compiles, 1u);
    EXPECT_EQ(stats.disk_hits, 0u);
  }
}

//===----------------------------------------------------------------------===//
// The MLA layer
//===----------------------------------------------------------------------===//

/// A small layer (every dim a multiple of 32) and one mixed batch: two
/// decodes, then a prefill of 5 new tokens over 20 cached ones, on 16-token
/// pages with a 16-row workspace (two context chunks).
struct SmallStep {
  static constexpr int64_t kHeads = 4, kLkv = 128, kNope = 64, kRope = 32,
                           kV = 64, kPage = 16, kPages = 8, kMaxBlocks = 2;
  std::vector<int32_t> queryLens = {1, 1, 5};
  std::vector<int32_t> seqLens = {20, 9, 25};
  std::vector<int32_t> blockTable = {3, 1, 6, 0, 0, 5};

  mla_layer_config_t config() const {
    mla_layer_config_t c;
    mla_layer_config_default(&c);
    c.num_heads = kHeads;
    c.kv_lora_rank = kLkv;
    c.qk_nope_head_dim = kNope;
    c.qk_rope_head_dim = kRope;
    c.v_head_dim = kV;
    c.block_size = kPage;
    c.workspace_tokens = 16;
    c.needs_decode_lse = 1;
    return c;
  }

  mla::runtime::CommonAttentionMetadata metadata() const {
    return mla::runtime::makeCommonAttentionMetadata(
        queryLens, seqLens, blockTable, kMaxBlocks, kPage);
  }

  static mla_batch_metadata_t
  view(const mla::runtime::CommonAttentionMetadata &m) {
    mla_batch_metadata_t b{};
    b.query_start_loc = m.queryStartLoc.data();
    b.seq_lens = m.seqLens.data();
    b.block_table = m.blockTable.data();
    b.max_blocks = m.maxBlocks;
    b.slot_mapping = m.slotMapping.data();
    b.num_slots = static_cast<int64_t>(m.slotMapping.size());
    b.num_reqs = m.numReqs;
    b.num_actual_tokens = m.numActualTokens;
    b.max_query_len = m.maxQueryLen;
    b.max_seq_len = m.maxSeqLen;
    return b;
  }

  /// Random bf16 host data.
  static std::vector<uint16_t> random(size_t count, float scale,
                                     std::mt19937 &gen) {
    std::uniform_real_distribution<float> dist(-scale, scale);
    std::vector<uint16_t> v(count);
    for (uint16_t &x : v)
      x = mla::floatToBF16(dist(gen));
    return v;
  }
};

/// The host data of one step: weights and inputs, the same for both APIs.
struct StepData {
  std::vector<uint16_t> kvBProj, wUkT, wUv, q, kvC, kPe, cache;
  int64_t tokens = 0;

  explicit StepData(int64_t tokens) : tokens(tokens) {
    using S = SmallStep;
    std::mt19937 gen(42);
    kvBProj = S::random(S::kLkv * S::kHeads * (S::kNope + S::kV), 0.1f, gen);
    wUkT = S::random(S::kHeads * S::kNope * S::kLkv, 0.1f, gen);
    wUv = S::random(S::kHeads * S::kLkv * S::kV, 0.1f, gen);
    q = S::random(tokens * S::kHeads * (S::kNope + S::kRope), 1.0f, gen);
    kvC = S::random(tokens * S::kLkv, 1.0f, gen);
    kPe = S::random(tokens * S::kRope, 1.0f, gen);
    cache = S::random(S::kPages * S::kPage * (S::kLkv + S::kRope), 1.0f, gen);
  }
};

class CApiLayerTest : public CApiTest {
protected:
  using S = SmallStep;

  /// Creates the C layer on `runtime` with `data`'s weights in `buffers`.
  void makeLayer(mla_runtime_t *runtime, const StepData &data,
                 Buffer (&buffers)[3], CLayer &layer) {
    mla_layer_weights_t w = weights(runtime, data, buffers);
    mla_layer_config_t config = step.config();
    ASSERT_OK(mla_layer_create(runtime, &config, &w, &layer.p));
  }

  mla_layer_weights_t weights(mla_runtime_t *runtime, const StepData &data,
                              Buffer (&buffers)[3]) {
    mla_layer_weights_t w{};
    const int64_t kv[3] = {S::kLkv, S::kHeads, S::kNope + S::kV};
    const int64_t uk[3] = {S::kHeads, S::kNope, S::kLkv};
    const int64_t uv[3] = {S::kHeads, S::kLkv, S::kV};
    makeBuffer(runtime, buffers[0], data.kvBProj.data(), data.kvBProj.size() * 2);
    makeBuffer(runtime, buffers[1], data.wUkT.data(), data.wUkT.size() * 2);
    makeBuffer(runtime, buffers[2], data.wUv.data(), data.wUv.size() * 2);
    EXPECT_OK(mla_tensor_contiguous(buffers[0].p, MLA_DTYPE_BF16, 3, kv,
                                    &w.kv_b_proj));
    EXPECT_OK(mla_tensor_contiguous(buffers[1].p, MLA_DTYPE_BF16, 3, uk,
                                    &w.w_uk_t));
    EXPECT_OK(mla_tensor_contiguous(buffers[2].p, MLA_DTYPE_BF16, 3, uv,
                                    &w.w_uv));
    return w;
  }

  SmallStep step;
};

TEST_F(CApiLayerTest, ForwardMatchesTheCppApiByteForByte) {
  auto m = step.metadata();
  const int64_t tokens = m.numActualTokens;
  StepData data(tokens);
  const int64_t numDecodes = 2;

  // Through the C API.
  CRuntime runtime;
  makeRuntime(runtime);
  Buffer weightBuffers[3];
  CLayer layer;
  makeLayer(runtime.p, data, weightBuffers, layer);
  ASSERT_TRUE(layer.p);
  mla_backend_selection_t selection;
  ASSERT_OK(mla_layer_selection(layer.p, &selection));
  EXPECT_STREQ(selection.backend, "CPU_JIT");

  mla_batch_metadata_t batch = SmallStep::view(m);
  CPlan plan;
  ASSERT_OK(mla_layer_plan(layer.p, &batch, S::kPages, &plan.p));
  mla_plan_info_t info;
  ASSERT_OK(mla_plan_get_info(plan.p, &info));
  EXPECT_EQ(info.num_decodes, 2);
  EXPECT_EQ(info.num_prefills, 1);
  EXPECT_EQ(info.num_decode_tokens, 2);
  EXPECT_EQ(info.num_prefill_tokens, 5);
  EXPECT_EQ(info.num_actual_tokens, 7);
  EXPECT_EQ(info.decode_query_len, 1);
  EXPECT_EQ(info.num_context_chunks, 2);
  EXPECT_EQ(info.num_cache_blocks, S::kPages);
  const char *line = nullptr;
  ASSERT_OK(mla_plan_describe(plan.p, &line));
  EXPECT_NE(std::string(line).find("2 decodes"), std::string::npos) << line;
  EXPECT_NE(std::string(line).find("1 prefills"), std::string::npos) << line;

  Buffer q, kvC, kPe, cache, out, lse;
  makeBuffer(runtime.p, q, data.q.data(), data.q.size() * 2);
  makeBuffer(runtime.p, kvC, data.kvC.data(), data.kvC.size() * 2);
  makeBuffer(runtime.p, kPe, data.kPe.data(), data.kPe.size() * 2);
  makeBuffer(runtime.p, cache, data.cache.data(), data.cache.size() * 2);
  makeBuffer(runtime.p, out, nullptr, tokens * S::kHeads * S::kV * 2);
  makeBuffer(runtime.p, lse, nullptr, numDecodes * S::kHeads * 4);
  mla_forward_args_t args{};
  const int64_t qShape[3] = {tokens, S::kHeads, S::kNope + S::kRope};
  const int64_t kvcShape[2] = {tokens, S::kLkv}, kpeShape[2] = {tokens, S::kRope};
  const int64_t cacheShape[3] = {S::kPages, S::kPage, S::kLkv + S::kRope};
  const int64_t outShape[3] = {tokens, S::kHeads, S::kV};
  const int64_t lseShape[3] = {numDecodes, S::kHeads, 1};
  ASSERT_OK(mla_tensor_contiguous(q.p, MLA_DTYPE_BF16, 3, qShape, &args.q));
  ASSERT_OK(mla_tensor_contiguous(kvC.p, MLA_DTYPE_BF16, 2, kvcShape, &args.kv_c));
  ASSERT_OK(mla_tensor_contiguous(kPe.p, MLA_DTYPE_BF16, 2, kpeShape, &args.k_pe));
  ASSERT_OK(mla_tensor_contiguous(cache.p, MLA_DTYPE_BF16, 3, cacheShape,
                                  &args.kv_cache));
  ASSERT_OK(mla_tensor_contiguous(out.p, MLA_DTYPE_BF16, 3, outShape,
                                  &args.output));
  ASSERT_OK(mla_tensor_contiguous(lse.p, MLA_DTYPE_F32, 3, lseShape,
                                  &args.decode_lse));
  ASSERT_OK(mla_layer_forward(layer.p, plan.p, &args, nullptr));
  std::vector<uint16_t> cOut(tokens * S::kHeads * S::kV), cCache(data.cache.size());
  std::vector<float> cLse(numDecodes * S::kHeads);
  ASSERT_OK(mla_runtime_download(runtime.p, cOut.data(), out.p, out.bytes, nullptr));
  ASSERT_OK(mla_runtime_download(runtime.p, cCache.data(), cache.p, cache.bytes,
                                 nullptr));
  ASSERT_OK(mla_runtime_download(runtime.p, cLse.data(), lse.p, lse.bytes, nullptr));

  // Through the C++ API, on host memory (a CPU runtime), same inputs.
  using namespace mla::runtime;
  RuntimeOptions options;
  options.device = DevicePreference::Cpu;
  options.cache.directory = dir;
  options.cache.diskEnabled = true;
  options.cache.forceRecompile = false;
  auto cppRuntime = mla::runtime::Runtime::create(options);
  ASSERT_TRUE(bool(cppRuntime)) << llvm::toString(cppRuntime.takeError());
  StepData cpp(tokens);
  MlaLayerConfig config;
  config.dims = {S::kHeads, S::kLkv, S::kNope, S::kRope, S::kV};
  config.blockSize = S::kPage;
  config.workspaceTokens = 16;
  config.needsDecodeLse = true;
  using mla::BufferView;
  using mla::DType;
  MlaLayerWeights weights{
      BufferView::contiguous(cpp.kvBProj.data(), DType::BF16,
                             {S::kLkv, S::kHeads, S::kNope + S::kV}),
      BufferView::contiguous(cpp.wUkT.data(), DType::BF16,
                             {S::kHeads, S::kNope, S::kLkv}),
      BufferView::contiguous(cpp.wUv.data(), DType::BF16,
                             {S::kHeads, S::kLkv, S::kV})};
  auto cppLayer = MlaLayer::create(**cppRuntime, config, weights);
  ASSERT_TRUE(bool(cppLayer)) << llvm::toString(cppLayer.takeError());
  auto cppPlan = (*cppLayer)->plan(m, S::kPages);
  ASSERT_TRUE(bool(cppPlan)) << llvm::toString(cppPlan.takeError());
  EXPECT_EQ(cppPlan->str(), std::string(line));
  std::vector<uint16_t> cppOut(cOut.size());
  std::vector<float> cppLse(cLse.size());
  MlaForwardArgs cppArgs{
      BufferView::contiguous(cpp.q.data(), DType::BF16,
                             {tokens, S::kHeads, S::kNope + S::kRope}),
      BufferView::contiguous(cpp.kvC.data(), DType::BF16, {tokens, S::kLkv}),
      BufferView::contiguous(cpp.kPe.data(), DType::BF16, {tokens, S::kRope}),
      BufferView::contiguous(cpp.cache.data(), DType::BF16,
                             {S::kPages, S::kPage, S::kLkv + S::kRope}),
      BufferView::contiguous(cppOut.data(), DType::BF16,
                             {tokens, S::kHeads, S::kV}),
      BufferView::contiguous(cppLse.data(), DType::F32,
                             {numDecodes, S::kHeads, 1})};
  llvm::Error error = (*cppLayer)->forward(*cppPlan, cppArgs);
  ASSERT_FALSE(bool(error)) << llvm::toString(std::move(error));

  EXPECT_EQ(std::memcmp(cOut.data(), cppOut.data(), cOut.size() * 2), 0)
      << "outputs differ";
  EXPECT_EQ(std::memcmp(cCache.data(), cpp.cache.data(), cCache.size() * 2), 0)
      << "updated caches differ";
  EXPECT_EQ(std::memcmp(cLse.data(), cppLse.data(), cLse.size() * 4), 0)
      << "decode LSEs differ";
  // The comparison means something: outputs are finite and not all zero,
  // the new tokens were written, the LSEs are finite.
  size_t nonZero = 0;
  for (uint16_t x : cOut) {
    ASSERT_TRUE(std::isfinite(mla::bf16ToFloat(x)));
    nonZero += mla::bf16ToFloat(x) != 0;
  }
  EXPECT_GT(nonZero, cOut.size() / 2);
  EXPECT_NE(std::memcmp(cCache.data(), data.cache.data(), cCache.size() * 2), 0);
  for (float x : cLse)
    EXPECT_TRUE(std::isfinite(x));
}

TEST_F(CApiLayerTest, DecodeStepPlannedAtAShapeCapturedOnlyOnAGpu) {
  StepData data(4);
  CRuntime runtime;
  makeRuntime(runtime);
  Buffer buffers[3];
  CLayer layer;
  makeLayer(runtime.p, data, buffers, layer);

  // Two decodes padded to four.
  std::vector<int32_t> table = {3, 1, 6, 0};
  auto m = mla::runtime::makeCommonAttentionMetadata({1, 1}, {20, 9}, table,
                                                     S::kMaxBlocks, S::kPage);
  mla_batch_metadata_t batch = S::view(m);
  mla_decode_graph_shape_t shape = {4, 1, S::kMaxBlocks, S::kPages, 0};
  CPlan plan;
  ASSERT_OK(mla_layer_plan_decode_step(layer.p, &batch, &shape, &plan.p));
  mla_plan_info_t info;
  ASSERT_OK(mla_plan_get_info(plan.p, &info));
  EXPECT_EQ(info.num_decodes, 4);
  EXPECT_EQ(info.num_actual_tokens, 4);
  EXPECT_EQ(info.num_prefills, 0);

  mla_plan_t *refused = nullptr;
  auto mixed = step.metadata();
  mla_batch_metadata_t mixedBatch = S::view(mixed);
  expectFailure(
      mla_layer_plan_decode_step(layer.p, &mixedBatch, &shape, &refused),
      MLA_ERROR_INVALID_METADATA,
      {"mla_layer_plan_decode_step", "holds prefills"});
  mla_decode_graph_shape_t bad = shape;
  bad.max_decodes = 0;
  expectFailure(mla_layer_plan_decode_step(layer.p, &batch, &bad, &refused),
                MLA_ERROR_INVALID_ARGUMENT, {"must be positive"});
  EXPECT_EQ(refused, nullptr);

  // Capture needs a GPU; this runtime is on the CPU.
  Buffer io[6];
  const int64_t rows = 4;
  const int64_t qShape[3] = {rows, S::kHeads, S::kNope + S::kRope},
                kvShape[2] = {rows, S::kLkv}, peShape[2] = {rows, S::kRope},
                cacheShape[3] = {S::kPages, S::kPage, S::kLkv + S::kRope},
                outShape[3] = {rows, S::kHeads, S::kV},
                lseShape[3] = {rows, S::kHeads, 1};
  makeBuffer(runtime.p, io[0], nullptr,
             rows * S::kHeads * (S::kNope + S::kRope) * 2);
  makeBuffer(runtime.p, io[1], nullptr, rows * S::kLkv * 2);
  makeBuffer(runtime.p, io[2], nullptr, rows * S::kRope * 2);
  makeBuffer(runtime.p, io[3], data.cache.data(), data.cache.size() * 2);
  makeBuffer(runtime.p, io[4], nullptr, rows * S::kHeads * S::kV * 2);
  makeBuffer(runtime.p, io[5], nullptr, rows * S::kHeads * 4);
  mla_forward_args_t args{};
  ASSERT_OK(mla_tensor_contiguous(io[0].p, MLA_DTYPE_BF16, 3, qShape, &args.q));
  ASSERT_OK(
      mla_tensor_contiguous(io[1].p, MLA_DTYPE_BF16, 2, kvShape, &args.kv_c));
  ASSERT_OK(
      mla_tensor_contiguous(io[2].p, MLA_DTYPE_BF16, 2, peShape, &args.k_pe));
  ASSERT_OK(mla_tensor_contiguous(io[3].p, MLA_DTYPE_BF16, 3, cacheShape,
                                  &args.kv_cache));
  ASSERT_OK(mla_tensor_contiguous(io[4].p, MLA_DTYPE_BF16, 3, outShape,
                                  &args.output));
  ASSERT_OK(mla_tensor_contiguous(io[5].p, MLA_DTYPE_F32, 3, lseShape,
                                  &args.decode_lse));
  mla_decode_graph_t *graph = nullptr;
  expectFailure(mla_layer_capture_decode_step(layer.p, &shape, &args, &graph),
                MLA_ERROR_RUNTIME,
                {"mla_layer_capture_decode_step", "needs a GPU runtime"});
  EXPECT_EQ(graph, nullptr);
  // The padded plan runs through forward like any other.
  EXPECT_OK(mla_layer_forward(layer.p, plan.p, &args, nullptr));
}

TEST_F(CApiLayerTest, PrefillBackendOfALayer) {
  StepData data(7);
  CRuntime runtime;
  makeRuntime(runtime);
  ScopedPrefillEnv noEnv(nullptr);
  Buffer buffers[3];
  mla_layer_weights_t w = weights(runtime.p, data, buffers);
  mla_layer_config_t config = step.config();
  mla_layer_t *refused = nullptr;

  // Refused before anything compiles: a selection error, not a compile one.
  config.prefill_backend = "PREFILL_TC_SM90A";
  expectFailure(mla_layer_create(runtime.p, &config, &w, &refused),
                MLA_ERROR_BACKEND_REJECTED,
                {"mla_layer_create", "prefill backend PREFILL_TC_SM90A",
                 "device CPU not supported"});
  EXPECT_EQ(refused, nullptr);

  config.prefill_backend = "PREFILL_CPU_JIT";
  CLayer layer;
  ASSERT_OK(mla_layer_create(runtime.p, &config, &w, &layer.p));
  mla_backend_selection_t prefill, decode;
  ASSERT_OK(mla_layer_prefill_selection(layer.p, &prefill));
  ASSERT_OK(mla_layer_selection(layer.p, &decode));
  EXPECT_STREQ(prefill.backend, "PREFILL_CPU_JIT");
  EXPECT_EQ(prefill.source, MLA_BACKEND_SOURCE_REQUESTED);
  EXPECT_STREQ(prefill.summary, "PREFILL_CPU_JIT (requested)");
  EXPECT_STREQ(decode.backend, "CPU_JIT");
  EXPECT_EQ(decode.source, std::getenv("MLA_ATTENTION_BACKEND")
                               ? MLA_BACKEND_SOURCE_ENVIRONMENT
                               : MLA_BACKEND_SOURCE_PRIORITY);
  expectFailure(mla_layer_prefill_selection(layer.p, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'selection'"});
}

TEST_F(CApiLayerTest, LayerArgumentErrors) {
  StepData data(7);
  CRuntime runtime;
  makeRuntime(runtime);
  Buffer buffers[3];
  mla_layer_weights_t w = weights(runtime.p, data, buffers);
  mla_layer_config_t config = step.config();
  mla_layer_t *layer = nullptr;

  mla_layer_config_t bad = config;
  bad.activation_dtype = MLA_DTYPE_I32;
  expectFailure(mla_layer_create(runtime.p, &bad, &w, &layer),
                MLA_ERROR_INVALID_ARGUMENT, {"activation_dtype", "i32"});
  bad = config;
  bad.cache_dtype = static_cast<mla_dtype_t>(17);
  expectFailure(mla_layer_create(runtime.p, &bad, &w, &layer),
                MLA_ERROR_INVALID_ARGUMENT, {"cache_dtype", "invalid dtype"});
  bad = config;
  bad.decode_threshold = 0;
  expectFailure(mla_layer_create(runtime.p, &bad, &w, &layer),
                MLA_ERROR_INVALID_ARGUMENT, {"decode_threshold"});
  bad = config;
  bad.softmax_scale = -1;
  expectFailure(mla_layer_create(runtime.p, &bad, &w, &layer),
                MLA_ERROR_INVALID_ARGUMENT, {"softmax_scale"});

  mla_layer_weights_t wrong = w;
  wrong.w_uk_t.shape[2] = S::kLkv + 1;
  expectFailure(mla_layer_create(runtime.p, &config, &wrong, &layer),
                MLA_ERROR_INVALID_ARGUMENT, {"'w_uk_t'", "dimension 2"});
  wrong = w;
  wrong.kv_b_proj.dtype = MLA_DTYPE_F16;
  expectFailure(mla_layer_create(runtime.p, &config, &wrong, &layer),
                MLA_ERROR_INVALID_ARGUMENT, {"'kv_b_proj'", "wrong element type"});
  wrong = w;
  wrong.w_uv.rank = 2;
  expectFailure(mla_layer_create(runtime.p, &config, &wrong, &layer),
                MLA_ERROR_INVALID_ARGUMENT, {"'w_uv'", "wrong rank"});
  wrong = w;
  wrong.w_uv.strides[0] = 1;
  expectFailure(mla_layer_create(runtime.p, &config, &wrong, &layer),
                MLA_ERROR_INVALID_ARGUMENT, {"'w_uv'", "stride"});

  bad = config;
  bad.backend = "NOT_A_BACKEND";
  expectFailure(mla_layer_create(runtime.p, &bad, &w, &layer),
                MLA_ERROR_BACKEND_REJECTED,
                {"NOT_A_BACKEND", "valid names", "CPU_JIT"});
  // A GPU backend refuses a CPU runtime, with its reasons.
  bad = config;
  bad.backend = "GENERIC_GPU";
  expectFailure(mla_layer_create(runtime.p, &bad, &w, &layer),
                MLA_ERROR_BACKEND_REJECTED, {"GENERIC_GPU", "cannot run"});
  EXPECT_EQ(layer, nullptr);

  // Forward arguments.
  CLayer good;
  ASSERT_OK(mla_layer_create(runtime.p, &config, &w, &good.p));
  auto m = step.metadata();
  mla_batch_metadata_t batch = SmallStep::view(m);
  CPlan plan;
  ASSERT_OK(mla_layer_plan(good.p, &batch, S::kPages, &plan.p));
  const int64_t tokens = m.numActualTokens;
  std::vector<uint16_t> q(data.q), kvC(data.kvC), kPe(data.kPe),
      cache(data.cache), out(tokens * S::kHeads * S::kV);
  mla_forward_args_t args{};
  const int64_t qShape[3] = {tokens, S::kHeads, S::kNope + S::kRope};
  const int64_t kvcShape[2] = {tokens, S::kLkv}, kpeShape[2] = {tokens, S::kRope};
  const int64_t cacheShape[3] = {S::kPages, S::kPage, S::kLkv + S::kRope};
  const int64_t outShape[3] = {tokens, S::kHeads, S::kV};
  ASSERT_OK(mla_tensor_contiguous(q.data(), MLA_DTYPE_BF16, 3, qShape, &args.q));
  ASSERT_OK(mla_tensor_contiguous(kvC.data(), MLA_DTYPE_BF16, 2, kvcShape, &args.kv_c));
  ASSERT_OK(mla_tensor_contiguous(kPe.data(), MLA_DTYPE_BF16, 2, kpeShape, &args.k_pe));
  ASSERT_OK(mla_tensor_contiguous(cache.data(), MLA_DTYPE_BF16, 3, cacheShape,
                                  &args.kv_cache));
  ASSERT_OK(mla_tensor_contiguous(out.data(), MLA_DTYPE_BF16, 3, outShape,
                                  &args.output));

  mla_forward_args_t broken = args;
  broken.q.shape[2] = S::kNope;
  expectFailure(mla_layer_forward(good.p, plan.p, &broken, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'q'", "dimension 2"});
  broken = args;
  broken.output.shape[0] = tokens - 1;
  expectFailure(mla_layer_forward(good.p, plan.p, &broken, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'output'", "fewer rows"});
  broken = args;
  broken.kv_cache.shape[0] = S::kPages + 1;
  expectFailure(mla_layer_forward(good.p, plan.p, &broken, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'kv_cache'"});
  broken = args;
  broken.k_pe.dtype = MLA_DTYPE_F32;
  expectFailure(mla_layer_forward(good.p, plan.p, &broken, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'k_pe'", "wrong element type"});
  broken = args;
  broken.kv_c.data = nullptr;
  expectFailure(mla_layer_forward(good.p, plan.p, &broken, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'kv_c'", "NULL data"});
  std::vector<float> lse(4 * S::kHeads);
  const int64_t lseShape[3] = {4, S::kHeads, 1};
  broken = args;
  ASSERT_OK(mla_tensor_contiguous(lse.data(), MLA_DTYPE_F32, 3, lseShape,
                                  &broken.decode_lse));
  expectFailure(mla_layer_forward(good.p, plan.p, &broken, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"'decode_lse'", "dimension 0"});

  // A plan serves every layer of the same configuration (a model's layers
  // plan a step once), and no layer of another.
  CLayer same, other;
  ASSERT_OK(mla_layer_create(runtime.p, &config, &w, &same.p));
  EXPECT_OK(mla_layer_forward(same.p, plan.p, &args, nullptr));
  mla_layer_config_t otherConfig = config;
  otherConfig.workspace_tokens = config.workspace_tokens + 64;
  ASSERT_OK(mla_layer_create(runtime.p, &otherConfig, &w, &other.p));
  expectFailure(mla_layer_forward(other.p, plan.p, &args, nullptr),
                MLA_ERROR_INVALID_ARGUMENT, {"another configuration"});
  // The valid arguments run (no decode LSE asked for).
  EXPECT_OK(mla_layer_forward(good.p, plan.p, &args, nullptr));

  // The runtime does not go before its layers.
  expectFailure(mla_runtime_destroy(runtime.p), MLA_ERROR_INVALID_ARGUMENT,
                {"3 layer(s)"});
}

TEST_F(CApiLayerTest, InvalidMetadata) {
  StepData data(7);
  CRuntime runtime;
  makeRuntime(runtime);
  Buffer buffers[3];
  CLayer layer;
  makeLayer(runtime.p, data, buffers, layer);
  ASSERT_TRUE(layer.p);
  mla_plan_t *plan = nullptr;

  auto m = step.metadata();
  // seq_len < query_len.
  auto shortSeq = m;
  shortSeq.seqLens[2] = 3;
  mla_batch_metadata_t batch = SmallStep::view(shortSeq);
  expectFailure(mla_layer_plan(layer.p, &batch, S::kPages, &plan),
                MLA_ERROR_INVALID_METADATA,
                {"mla_layer_plan", "seq_lens[2] = 3", "query length 5"});
  // A page outside the cache.
  auto farPage = m;
  farPage.blockTable[4] = S::kPages;
  batch = SmallStep::view(farPage);
  expectFailure(mla_layer_plan(layer.p, &batch, S::kPages, &plan),
                MLA_ERROR_INVALID_METADATA, {"block_table[2][0]"});
  // A slot that disagrees with the block table.
  auto badSlot = m;
  badSlot.slotMapping[3] += 1;
  batch = SmallStep::view(badSlot);
  expectFailure(mla_layer_plan(layer.p, &batch, S::kPages, &plan),
                MLA_ERROR_INVALID_METADATA, {"slot_mapping[3]"});
  // A prefill before a decode: not ordered decodes first.
  auto reordered =
      mla::runtime::makeCommonAttentionMetadata({5, 1, 1}, {25, 20, 9},
                                                {0, 5, 3, 1, 6, 0}, 2, S::kPage);
  batch = SmallStep::view(reordered);
  expectFailure(mla_layer_plan(layer.p, &batch, S::kPages, &plan),
                MLA_ERROR_INVALID_METADATA, {"mla_layer_plan"});
  // Counts.
  batch = SmallStep::view(m);
  batch.num_reqs = -1;
  expectFailure(mla_layer_plan(layer.p, &batch, S::kPages, &plan),
                MLA_ERROR_INVALID_METADATA, {"num_reqs", "non-negative"});
  batch = SmallStep::view(m);
  expectFailure(mla_layer_plan(layer.p, &batch, -4, &plan),
                MLA_ERROR_INVALID_METADATA, {"num_cache_blocks"});
  batch = SmallStep::view(m);
  batch.max_query_len = 4;
  expectFailure(mla_layer_plan(layer.p, &batch, S::kPages, &plan),
                MLA_ERROR_INVALID_METADATA, {"max_query_len"});
  batch = SmallStep::view(m);
  batch.num_slots = 3;
  expectFailure(mla_layer_plan(layer.p, &batch, S::kPages, &plan),
                MLA_ERROR_INVALID_METADATA, {"slot_mapping"});
  // NULL arrays the counts say are there.
  batch = SmallStep::view(m);
  batch.seq_lens = nullptr;
  expectFailure(mla_layer_plan(layer.p, &batch, S::kPages, &plan),
                MLA_ERROR_INVALID_ARGUMENT, {"seq_lens"});
  batch = SmallStep::view(m);
  batch.block_table = nullptr;
  expectFailure(mla_layer_plan(layer.p, &batch, S::kPages, &plan),
                MLA_ERROR_INVALID_ARGUMENT, {"block_table"});
  batch = SmallStep::view(m);
  batch.query_start_loc = nullptr;
  expectFailure(mla_layer_plan(layer.p, &batch, S::kPages, &plan),
                MLA_ERROR_INVALID_ARGUMENT, {"query_start_loc"});
  EXPECT_EQ(plan, nullptr);

  // An empty batch plans to nothing.
  const int32_t zero = 0;
  mla_batch_metadata_t empty{};
  empty.query_start_loc = &zero;
  CPlan emptyPlan;
  ASSERT_OK(mla_layer_plan(layer.p, &empty, S::kPages, &emptyPlan.p));
  mla_plan_info_t info;
  ASSERT_OK(mla_plan_get_info(emptyPlan.p, &info));
  EXPECT_EQ(info.num_actual_tokens, 0);
  EXPECT_EQ(info.num_decodes + info.num_prefills, 0);
}

} // namespace

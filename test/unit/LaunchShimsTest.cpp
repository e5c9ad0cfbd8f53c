//===- LaunchShimsTest.cpp - Shared-memory opt-ins of the launch shims ----===//
//
// SharedMemoryOptIns (runtime/gpu/LaunchShims.h) decides when a launch
// above 44 KiB of shared memory asks the driver; the driver call is a
// callback here, so the rule is checked without a GPU.
//
//===----------------------------------------------------------------------===//

#include "LaunchShims.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

using mla::gpu::SharedMemoryOptIns;

namespace {

mla::cuda::CUfunction function(uintptr_t id) {
  return reinterpret_cast<mla::cuda::CUfunction>(id);
}

TEST(SharedMemoryOptIns, AsksOncePerFunctionAtTheLargestSize) {
  SharedMemoryOptIns optIns;
  std::vector<int> asked;
  auto optIn = [&](int limit) {
    asked.push_back(limit);
    return true;
  };
  EXPECT_TRUE(optIns.ensure(function(1), 96 * 1024, optIn));
  EXPECT_TRUE(optIns.ensure(function(1), 96 * 1024, optIn));
  // Smaller is covered; larger asks again, for the larger size.
  EXPECT_TRUE(optIns.ensure(function(1), 60 * 1024, optIn));
  EXPECT_TRUE(optIns.ensure(function(1), 200 * 1024, optIn));
  EXPECT_TRUE(optIns.ensure(function(1), 96 * 1024, optIn));
  // Another function has its own record.
  EXPECT_TRUE(optIns.ensure(function(2), 60 * 1024, optIn));
  EXPECT_EQ(asked, (std::vector<int>{96 * 1024, 200 * 1024, 60 * 1024}));
}

TEST(SharedMemoryOptIns, AFailedOptInIsNotRemembered) {
  SharedMemoryOptIns optIns;
  int calls = 0;
  EXPECT_FALSE(optIns.ensure(function(1), 100 * 1024, [&](int) {
    ++calls;
    return false;
  }));
  EXPECT_TRUE(optIns.ensure(function(1), 100 * 1024, [&](int) {
    ++calls;
    return true;
  }));
  EXPECT_EQ(calls, 2);
}

TEST(SharedMemoryOptIns, ConcurrentLaunchesAskOnce) {
  SharedMemoryOptIns optIns;
  std::atomic<int> calls{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i)
        EXPECT_TRUE(optIns.ensure(function(7), 120 * 1024, [&](int) {
          ++calls;
          return true;
        }));
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(calls.load(), 1);
}

} // namespace

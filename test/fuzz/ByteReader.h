//===- ByteReader.h - Structured values from a fuzzer's bytes ---*- C++ -*-===//
//
// Reads integers from the front of the input, little-endian, as many bytes
// as the range needs; once the input is used up every read is the range's
// low end, so every prefix of an input is an input too.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TEST_FUZZ_BYTEREADER_H
#define MLA_TEST_FUZZ_BYTEREADER_H

#include <cstddef>
#include <cstdint>
#include <limits>

namespace mla::fuzz {

class ByteReader {
public:
  ByteReader(const uint8_t *data, size_t size) : data(data), size(size) {}

  /// A value in [lo, hi] (inclusive).
  int64_t range(int64_t lo, int64_t hi) {
    uint64_t span = uint64_t(hi) - uint64_t(lo);
    uint64_t value = 0;
    for (uint64_t seen = 0; seen < span && offset < size; seen = (seen << 8) | 0xff)
      value = (value << 8) | data[offset++];
    if (span != std::numeric_limits<uint64_t>::max())
      value %= span + 1;
    return int64_t(uint64_t(lo) + value);
  }
  /// Any int64_t.
  int64_t any64() {
    return range(std::numeric_limits<int64_t>::min(),
                 std::numeric_limits<int64_t>::max());
  }
  /// Any int32_t.
  int32_t any32() {
    return int32_t(range(std::numeric_limits<int32_t>::min(),
                         std::numeric_limits<int32_t>::max()));
  }
  bool flag() { return range(0, 1) == 1; }
  bool empty() const { return offset >= size; }

private:
  const uint8_t *data;
  size_t size;
  size_t offset = 0;
};

} // namespace mla::fuzz

#endif // MLA_TEST_FUZZ_BYTEREADER_H

//===- ReplayMain.cpp - Run a fuzz target over files ----------------------===//
//
// The main of a fuzz target built without libFuzzer: each argument is a file
// or a directory (walked recursively, in name order), and every file is one
// input. A defect aborts, naming the input first; the exit code is 0 when
// every input ran.
//
//===----------------------------------------------------------------------===//

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv);
extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

void collectFiles(const std::string &path, std::vector<std::string> &files) {
  if (!llvm::sys::fs::is_directory(path)) {
    files.push_back(path);
    return;
  }
  std::error_code error;
  std::vector<std::string> found;
  for (llvm::sys::fs::recursive_directory_iterator it(path, error), end;
       it != end && !error; it.increment(error))
    if (llvm::sys::fs::is_regular_file(it->path()))
      found.push_back(it->path());
  std::sort(found.begin(), found.end());
  files.insert(files.end(), found.begin(), found.end());
}

} // namespace

int main(int argc, char **argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i)
    collectFiles(argv[i], files);
  if (files.empty()) {
    llvm::errs() << "usage: " << argv[0] << " FILE_OR_DIR...\n";
    return 2;
  }
  for (const std::string &file : files) {
    auto buffer = llvm::MemoryBuffer::getFile(file);
    if (!buffer) {
      llvm::errs() << file << ": " << buffer.getError().message() << "\n";
      return 1;
    }
    llvm::errs() << "input " << file << "\n";
    const auto *data =
        reinterpret_cast<const uint8_t *>((*buffer)->getBufferStart());
    LLVMFuzzerTestOneInput(data, (*buffer)->getBufferSize());
  }
  llvm::outs() << "ran " << files.size() << " inputs\n";
  return 0;
}

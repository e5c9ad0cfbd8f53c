//===- AtomicFiles.cpp - The kernel cache's reads and writes --------------===//

#include "AtomicFiles.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cerrno>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace mla::runtime::detail {

namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;
using llvm::StringRef;
using llvm::Twine;

/// Marks temporary files, so a writer can clear what a crashed one left.
static constexpr StringRef kTempMarker = ".tmp-";

static std::error_code lastError() {
  return std::error_code(errno, std::generic_category());
}

bool isNotFound(std::error_code ec) {
  return ec == std::errc::no_such_file_or_directory;
}

/// Writes `data` to `fd` and flushes it to the device: a rename must never
/// publish a file whose blocks are not yet on disk.
static std::error_code writeAllAndSync(int fd, StringRef data) {
  while (!data.empty()) {
    ssize_t written = ::write(fd, data.data(), data.size());
    if (written < 0) {
      if (errno == EINTR)
        continue;
      return lastError();
    }
    data = data.drop_front(static_cast<size_t>(written));
  }
  if (::fsync(fd) != 0)
    return lastError();
  return {};
}

void syncDirectory(const Twine &dir) {
  llvm::SmallString<256> storage;
  int fd = ::open(dir.toNullTerminatedStringRef(storage).data(),
                  O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return;
  (void)::fsync(fd);
  ::close(fd);
}

llvm::Error writeFileAtomically(StringRef dir, StringRef name,
                                StringRef content) {
  llvm::SmallString<256> finalPath(dir);
  path::append(finalPath, name);
  llvm::SmallString<256> tempPath;
  int fd = -1;
  if (std::error_code ec = fs::createUniqueFile(
          finalPath + kTempMarker + "%%%%%%%%%%%%", fd, tempPath))
    return llvm::createFileError(finalPath, ec);
  std::error_code ec = writeAllAndSync(fd, content);
  if (::close(fd) != 0 && !ec)
    ec = lastError();
  if (!ec)
    ec = fs::rename(tempPath, finalPath);
  if (ec) {
    (void)fs::remove(tempPath);
    return llvm::createFileError(finalPath, ec);
  }
  return llvm::Error::success();
}

llvm::Expected<std::optional<std::string>> readFile(const Twine &file) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(file, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false,
                                  /*IsVolatile=*/true);
  if (!buffer) {
    if (isNotFound(buffer.getError()))
      return std::nullopt;
    return llvm::createFileError(file, buffer.getError());
  }
  return (*buffer)->getBuffer().str();
}

void removeTempFiles(StringRef dir) {
  std::error_code ec;
  std::vector<std::string> stale;
  for (fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    if (path::filename(it->path()).contains(kTempMarker))
      stale.push_back(it->path());
  for (const std::string &file : stale)
    (void)fs::remove(file);
}

} // namespace mla::runtime::detail

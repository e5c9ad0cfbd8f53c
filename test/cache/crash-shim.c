/*===- crash-shim.c - SIGKILL a process at a chosen file operation -------===//
 *
 * Preloaded (LD_PRELOAD) into a process that writes the kernel cache, this
 * library kills it with SIGKILL at one chosen call of write, fsync or rename
 * on a file under MLA_CRASH_DIR: the process dies between two steps of a
 * cache write exactly as a power cut or `kill -9` would leave it, with no
 * change to the code under test.
 *
 *   MLA_CRASH_DIR=/path  MLA_CRASH_AT=write:3   the 3rd write: half of its
 *                                               bytes land, then SIGKILL
 *   MLA_CRASH_AT=fsync:2 / rename:5             SIGKILL before the call
 *   MLA_CRASH_AT=count                          count the calls; print
 *                                               "write W fsync F rename R"
 *                                               to stderr at exit
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kWrite, kFsync, kRename, kKinds };
static const char *const kNames[kKinds] = {"write", "fsync", "rename"};
static long counts[kKinds];

/* Whether `path` lies under MLA_CRASH_DIR. */
static int underCrashDir(const char *path) {
  const char *dir = getenv("MLA_CRASH_DIR");
  return dir && path && strncmp(path, dir, strlen(dir)) == 0;
}

static int fdUnderCrashDir(int fd) {
  char link[64], target[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0)
    return 0;
  target[n] = '\0';
  return underCrashDir(target);
}

static void printCounts(void) {
  fprintf(stderr, "write %ld fsync %ld rename %ld\n", counts[kWrite],
          counts[kFsync], counts[kRename]);
}

/* Counts a call of `kind`; returns 1 when it is the one to crash at. */
static int isCrashPoint(int kind) {
  static int countOnly = -1;
  const char *at = getenv("MLA_CRASH_AT");
  if (countOnly < 0) {
    countOnly = at && strcmp(at, "count") == 0;
    if (countOnly)
      atexit(printCounts);
  }
  long n = ++counts[kind];
  if (!at || countOnly)
    return 0;
  size_t len = strlen(kNames[kind]);
  return strncmp(at, kNames[kind], len) == 0 && at[len] == ':' &&
         atol(at + len + 1) == n;
}

static void die(void) {
  kill(getpid(), SIGKILL);
  for (;;)
    pause();
}

ssize_t write(int fd, const void *buf, size_t count) {
  static ssize_t (*real)(int, const void *, size_t);
  if (!real)
    real = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
  if (fd > 2 && fdUnderCrashDir(fd) && isCrashPoint(kWrite)) {
    real(fd, buf, count / 2);
    die();
  }
  return real(fd, buf, count);
}

int fsync(int fd) {
  static int (*real)(int);
  if (!real)
    real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  if (fdUnderCrashDir(fd) && isCrashPoint(kFsync))
    die();
  return real(fd);
}

int rename(const char *from, const char *to) {
  static int (*real)(const char *, const char *);
  if (!real)
    real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
  if (underCrashDir(to) && isCrashPoint(kRename))
    die();
  return real(from, to);
}

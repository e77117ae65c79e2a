// kscope/core/detail/atomic_file.hpp — the one way kscope writes an output file: all of it
// or none of it.
//
// A report written with fopen/fwrite over the old one leaves, when the disk fills or the
// quota runs out half way, a truncated file where a good one was: the CI gate then reads
// garbage, or last night's baseline is gone. So the content goes to a temporary file in the
// target's directory (same file system, so the final rename is atomic), is flushed to disk,
// and replaces the target with rename(2) only when every byte was written and the file
// closed without error; on any failure the temporary is removed and the target is left as
// it was. The error says which path and why, with the system's words for errno:
// "cannot write /x/y.json: No space left on device".
//
// A target that exists and is not a regular file (/dev/stdout, /dev/null, a FIFO) cannot be
// replaced: it is written in place, with the same error checks. A symbolic link to a
// regular file keeps pointing at it: the file it names is replaced. A new file gets the
// permissions fopen would give (0666 less the umask); a replaced one keeps its mode.
//
//   std::string why;
//   if (!kscope::detail::write_file_atomically("run.json", doc, &why)) std::fprintf(stderr, "%s\n", why.c_str());
#pragma once

#include "../config.hpp"
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <system_error>

#if defined(__unix__) || defined(__APPLE__)
#  include <fcntl.h>
#  include <sys/stat.h>
#  include <unistd.h>
#  define KSCOPE_DETAIL_POSIX_FILES 1
#else
#  define KSCOPE_DETAIL_POSIX_FILES 0
#endif

namespace kscope {
namespace detail {

// "cannot write PATH: <strerror(error)>" (std::generic_category: thread-safe, unlike strerror).
[[nodiscard]] KSCOPE_DECL std::string file_write_error(std::string_view path, int error, std::string_view step = {});

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string file_write_error(std::string_view path, int error, std::string_view step) {
  std::string message = "cannot write " + std::string(path) + ": ";
  if (!step.empty()) message += std::string(step) + ": ";
  message += std::generic_category().message(error);
  return message;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_POSIX_FILES

// Writes all of `content` to an open descriptor, through short writes and signals. 0 on
// success, else the errno of the write that failed. Also what tests use on /dev/full.
//   int fd = ::open("/dev/full", O_WRONLY); int e = kscope::detail::write_all(fd, "x");  // ENOSPC
[[nodiscard]] KSCOPE_DECL int write_all(int fd, std::string_view content) noexcept;

// Writes in place (a device, FIFO or other target that cannot be replaced).
KSCOPE_DECL bool write_file_in_place(const std::string& path, std::string_view content, std::string* error) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL int write_all(int fd, std::string_view content) noexcept {
  std::size_t done = 0;
  while (done < content.size()) {
    const ::ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;  // a regular file that takes nothing: never loop forever
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

KSCOPE_DECL bool write_file_in_place(const std::string& path, std::string_view content, std::string* error) noexcept {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  int failure = fd < 0 ? errno : write_all(fd, content);
  if (fd >= 0 && ::close(fd) != 0 && failure == 0) failure = errno;
  if (failure != 0 && error) {
    try { *error = file_write_error(path, failure); } catch (...) {}
  }
  return failure == 0;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#endif

// Replaces `path` with `content`, completely or not at all (see the top of this header).
// False, with *error = "cannot write PATH: why", on any failure; never throws.
[[nodiscard]] KSCOPE_DECL bool write_file_atomically(const std::string& path, std::string_view content,
                                                std::string* error = nullptr) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool write_file_atomically(const std::string& path, std::string_view content,
                                                std::string* error) noexcept {
  const auto fail = [&](int failure, std::string_view step = {}) {
    if (error) {
      try { *error = file_write_error(path, failure, step); } catch (...) {}
    }
    return false;
  };
  if (path.empty()) return fail(ENOENT);
  try {
#if KSCOPE_DETAIL_POSIX_FILES
    std::string target = path;
    mode_t mode = 0666;  // open() applies the umask, as fopen does
    bool keep_mode = false;
    struct stat existing {};
    if (::stat(path.c_str(), &existing) == 0) {
      if (!S_ISREG(existing.st_mode)) return write_file_in_place(path, content, error);
      mode = existing.st_mode & 07777;
      keep_mode = true;
      // Through a symbolic link: replace the file it names, so the link stays.
      if (char* resolved = ::realpath(path.c_str(), nullptr)) {
        target = resolved;
        std::free(resolved);
      }
    }
    // A name in the same directory that no other writer uses: pid and a counter, and
    // O_EXCL, retried when a stale one from a crashed run is in the way.
    static std::atomic<unsigned> counter{0};
    std::string temporary;
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
      temporary = target + ".kscope-tmp." + std::to_string(static_cast<long long>(::getpid())) + "." +
                  std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
      fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
      if (fd < 0 && errno != EEXIST) return fail(errno);
    }
    if (fd < 0) return fail(EEXIST, "no free temporary file name");
    int failure = write_all(fd, content);
    // The mode open() gave was cut by the umask; a replaced file keeps its own.
    if (failure == 0 && keep_mode && ::fchmod(fd, mode) != 0) failure = errno;
    // Flushed before the rename: a crash then leaves the old file or the new, never an empty one.
    if (failure == 0 && ::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) failure = errno;
    if (::close(fd) != 0 && failure == 0) failure = errno;
    if (failure == 0 && ::rename(temporary.c_str(), target.c_str()) != 0) failure = errno;
    if (failure != 0) {
      ::unlink(temporary.c_str());
      return fail(failure);
    }
    return true;
#else
    // Without POSIX: the same order with the C library (rename cannot replace on some
    // systems, so the old file is removed just before).
    const std::string temporary = path + ".kscope-tmp";
    std::FILE* f = std::fopen(temporary.c_str(), "wb");
    if (f == nullptr) return fail(errno);
    int failure = std::fwrite(content.data(), 1, content.size(), f) == content.size() ? 0 : (errno ? errno : EIO);
    if (std::fclose(f) != 0 && failure == 0) failure = errno ? errno : EIO;
    if (failure == 0) {
      std::remove(path.c_str());
      if (std::rename(temporary.c_str(), path.c_str()) != 0) failure = errno ? errno : EIO;
    }
    if (failure != 0) {
      std::remove(temporary.c_str());
      return fail(failure);
    }
    return true;
#endif
  } catch (...) {
    return fail(ENOMEM);
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope

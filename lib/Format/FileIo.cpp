//===- FileIo.cpp - Reading inputs and writing outputs safely -------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/FileIo.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace dtfm::format;

namespace {

std::string folderOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string kindOf(mode_t mode) {
  return S_ISLNK(mode)    ? "a symbolic link"
         : S_ISDIR(mode)  ? "a directory"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISSOCK(mode) ? "a socket"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISCHR(mode)  ? "a character device"
                          : "not a regular file";
}

/// Writes all of `bytes` to `fd`, through short writes and interrupts.
bool writeAll(int fd, const std::string &bytes) {
  const char *at = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, at, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = EIO;
      return false;
    }
    at += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

/// Clears O_NONBLOCK, set only so that opening a FIFO never waits.
bool blocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0;
}

std::string cannotWrite(const std::string &path, int why) {
  if (why == ENXIO)
    return "cannot write '" + path + "' (no process reads the FIFO)";
  if (why == ELOOP)
    return "'" + path +
           "' is a symbolic link: dtfm does not replace it (name a regular "
           "file)";
  return "cannot write '" + path + "' (" + std::strerror(why) + ")";
}

/// A name beside `path` that nothing has: ".<name>.tmp-<64 random bits>".
std::string temporaryBeside(const std::string &path) {
  std::string folder = folderOf(path);
  size_t slash = path.rfind('/');
  std::string name =
      slash == std::string::npos ? path : path.substr(slash + 1);
  uint64_t random = 0;
  if (::getrandom(&random, sizeof random, 0) != sizeof random)
    random ^= static_cast<uint64_t>(::getpid()) << 32 ^
              static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&random));
  char suffix[24];
  std::snprintf(suffix, sizeof suffix, ".tmp-%016llx",
                static_cast<unsigned long long>(random));
  // NAME_MAX is 255: a long name is cut rather than made unwritable.
  return (slash == std::string::npos ? std::string() : folder + "/") + "." +
         name.substr(0, 200) + suffix;
}

} // namespace

bool dtfm::format::isFileSafeDeviceName(const std::string &name) {
  if (name.empty() || name.size() > 128 || name[0] == '.')
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
           c == '-' || c == '.';
  });
}

std::string dtfm::format::outputPathProblem(const std::string &path) {
  if (path.empty())
    return "an output file needs a name";
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
      return "";
    if (!S_ISREG(st.st_mode))
      return "'" + path + "' is " + kindOf(st.st_mode) +
             ": dtfm does not replace it (name a regular file)";
  } else if (errno != ENOENT && errno != ENOTDIR) {
    return "cannot write '" + path + "' (" + std::strerror(errno) + ")";
  }
  // A regular file or a new one is replaced by a rename in its folder.
  std::string folder = folderOf(path);
  struct stat dir {};
  if (::stat(folder.c_str(), &dir) != 0)
    return "cannot write '" + path + "': its folder '" + folder +
           "' does not exist";
  if (!S_ISDIR(dir.st_mode))
    return "cannot write '" + path + "': '" + folder + "' is not a folder";
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    return "cannot write '" + path + "': its folder '" + folder +
           "' is not writable";
  return "";
}

bool dtfm::format::syncDirectory(const std::string &dir, std::string &error) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    error = "cannot flush the folder '" + dir + "' to disk (" +
            std::strerror(errno) + ")";
    if (fd >= 0)
      ::close(fd);
    return false;
  }
  ::close(fd);
  return true;
}

bool dtfm::format::writeFileAtomically(const std::string &path,
                                       const std::string &bytes,
                                       std::string &error, bool durable) {
  if (std::string problem = outputPathProblem(path); !problem.empty()) {
    error = problem;
    return false;
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    // A device or FIFO the user named (/dev/null, a pipe) is written
    // through; a FIFO nobody reads is an error, not a hang.
    int fd =
        ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 || !blocking(fd) || !writeAll(fd, bytes)) {
      error = cannotWrite(path, errno);
      if (fd >= 0)
        ::close(fd);
      return false;
    }
    if (::close(fd) != 0) {
      error = cannotWrite(path, errno);
      return false;
    }
    return true;
  }
  std::string temporary;
  int fd = -1;
  // O_EXCL with O_NOFOLLOW: the temporary is a file this call created,
  // never one (or a link) someone put there.
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    temporary = temporaryBeside(path);
    fd = ::open(temporary.c_str(),
                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0) {
    error = cannotWrite(path, errno);
    return false;
  }
  auto failed = [&](int why) {
    ::unlink(temporary.c_str());
    error = cannotWrite(path, why);
    return false;
  };
  if (!writeAll(fd, bytes) || (durable && ::fsync(fd) != 0)) {
    int why = errno;
    ::close(fd);
    return failed(why);
  }
  if (::close(fd) != 0)
    return failed(errno);
  if (::rename(temporary.c_str(), path.c_str()) != 0)
    return failed(errno);
  if (durable && !syncDirectory(folderOf(path), error))
    return false;
  return true;
}

int dtfm::format::openRegularFile(const std::string &path,
                                  std::string &error) {
  // Non-blocking so that opening a FIFO returns at once (to be refused).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    error = path + ": cannot open (" + std::strerror(errno) + ")";
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !blocking(fd)) {
    error = path + ": " +
            (S_ISREG(st.st_mode) ? "cannot read (" +
                                       std::string(std::strerror(errno)) + ")"
                                 : "is " + kindOf(st.st_mode) +
                                       ", not a regular file");
    ::close(fd);
    return -1;
  }
  return fd;
}

bool dtfm::format::readWholeFile(const std::string &path, std::string &bytes,
                                 std::string &error, uint64_t maxBytes) {
  int fd = openRegularFile(path, error);
  if (fd < 0)
    return false;
  auto tooLarge = [&] {
    ::close(fd);
    error = path + ": larger than the " + std::to_string(maxBytes) +
            " bytes such a file may have";
    return false;
  };
  struct stat st {};
  if (::fstat(fd, &st) == 0 && maxBytes > 0 &&
      static_cast<uint64_t>(st.st_size) > maxBytes)
    return tooLarge();
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int why = errno;
      ::close(fd);
      error = path + ": cannot read (" + std::strerror(why) + ")";
      return false;
    }
    if (n == 0)
      break;
    out.append(buffer, static_cast<size_t>(n));
    // A file that grows while it is read is bounded all the same.
    if (maxBytes > 0 && out.size() > maxBytes)
      return tooLarge();
  }
  ::close(fd);
  bytes = std::move(out);
  return true;
}

std::FILE *dtfm::format::openLogFile(const std::string &path, bool append,
                                     std::string &error) {
  if (std::string problem = outputPathProblem(path); !problem.empty()) {
    error = problem;
    return nullptr;
  }
  int fd = ::open(path.c_str(),
                  O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
                      (append ? O_APPEND : 0),
                  0666);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !blocking(fd) ||
      (!append && S_ISREG(st.st_mode) && ::ftruncate(fd, 0) != 0)) {
    error = cannotWrite(path, errno);
    if (fd >= 0)
      ::close(fd);
    return nullptr;
  }
  if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)) {
    ::close(fd);
    error = "'" + path + "' is " + kindOf(st.st_mode) +
            ": dtfm does not write a log there (name a regular file)";
    return nullptr;
  }
  std::FILE *file = ::fdopen(fd, append ? "a" : "w");
  if (!file) {
    error = cannotWrite(path, errno);
    ::close(fd);
  }
  return file;
}

bool dtfm::format::sameFile(const std::string &a, const std::string &b) {
  struct stat sa {}, sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

std::string dtfm::format::outputThatIsAnInput(
    const std::vector<std::pair<std::string, std::string>> &outputs,
    const std::vector<std::pair<std::string, std::string>> &inputs) {
  for (const auto &[outFlag, out] : outputs) {
    if (out.empty())
      continue;
    for (const auto &[inFlag, in] : inputs) {
      if (in.empty() || (out != in && !sameFile(out, in)))
        continue;
      // A device (/dev/null) both read and written is no loss.
      struct stat st {};
      if (::stat(out.c_str(), &st) == 0 && S_ISCHR(st.st_mode))
        continue;
      return outFlag + " '" + out + "' is " + inFlag + " '" + in +
             "', an input of this run: writing it would destroy it (name "
             "another file)";
    }
  }
  return "";
}

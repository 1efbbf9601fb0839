//===- FileIo.h - Reading inputs and writing outputs safely -----*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// The one place where dtfm opens the files a user, a peer or a checkpoint
// names. Inputs are read only when they are regular files: a FIFO, a
// directory or a device named as an input is refused without blocking on
// it. Outputs replace only a regular file (or nothing), through a fresh
// temporary name created exclusively beside them (a symbolic link planted
// at any name is never followed) and a rename, so a reader sees the old
// file or the whole new one; durable writes are fsynced, and their folder
// after the rename, before the caller goes on.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_FORMAT_FILEIO_H
#define DTFM_FORMAT_FILEIO_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace dtfm::format {

/// A device name that may become a file name (checkpoints, joins, agents'
/// requests): letters, digits, '_', '-' and '.', at most 128 characters,
/// not starting with '.'. Every reader of a cluster, a plan or a join
/// request refuses other names with kFileSafeDeviceNameRule.
bool isFileSafeDeviceName(const std::string &name);
inline constexpr const char *kFileSafeDeviceNameRule =
    "is not letters, digits, '_', '-' and '.' (at most 128, not starting "
    "with '.'): device names become file names";

/// Why `path` cannot be an output file ("" when it can): only a regular
/// file, a character device or a FIFO (written through), or nothing yet in
/// an existing, writable folder. A symbolic link, a directory, a socket or
/// a block device is refused rather than replaced.
std::string outputPathProblem(const std::string &path);

/// Writes `bytes` to `path` through a fresh temporary file beside it and a
/// rename (a character device or a FIFO with a reader directly); on failure
/// removes the temporary and says so in `error`. Refuses what
/// outputPathProblem refuses. `durable`: the file is fsynced before the
/// rename and its folder after it (a crash never leaves a name that points
/// at lost data).
bool writeFileAtomically(const std::string &path, const std::string &bytes,
                         std::string &error, bool durable = false);

/// Flushes `dir`'s entries (names created, renamed or removed in it) to
/// disk; false with a one-line `error`.
bool syncDirectory(const std::string &dir, std::string &error);

/// Opens `path` for reading when it is a regular file; -1 with a one-line
/// `error` naming it otherwise (a FIFO is refused without waiting for a
/// writer). The descriptor is close-on-exec.
int openRegularFile(const std::string &path, std::string &error);

/// The whole contents of a regular file; false with `error` when it cannot
/// be read, is not a regular file or is larger than `maxBytes` (0: any).
bool readWholeFile(const std::string &path, std::string &bytes,
                   std::string &error, uint64_t maxBytes = 0);

/// Opens a log `path` for writing (appending when `append`, else emptied)
/// without following a symbolic link; a character device or a FIFO with a
/// reader is written through. nullptr with a one-line `error`.
std::FILE *openLogFile(const std::string &path, bool append,
                       std::string &error);

/// Whether the two paths name one file (the same device and inode), both
/// existing; a path that does not exist names no file.
bool sameFile(const std::string &a, const std::string &b);

/// The first output of `outputs` that is also one of `inputs` (by name or
/// by file), as "'OUT' is also the input 'IN'" naming the flags given in
/// the pairs' first members; "" when none. Empty paths are skipped.
std::string outputThatIsAnInput(
    const std::vector<std::pair<std::string, std::string>> &outputs,
    const std::vector<std::pair<std::string, std::string>> &inputs);

} // namespace dtfm::format

#endif // DTFM_FORMAT_FILEIO_H

//===- ExternalData.cpp - ONNX tensors stored beside the model ------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "ExternalData.h"

#include "onnx/onnx_pb.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <limits>
#include <map>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

using namespace mlir::dtfm;
namespace fs = std::filesystem;

namespace {

/// Bytes per element of the types a tensor file may hold (0: none, as for
/// strings, whose size the dims do not give).
int64_t elementBytes(int type) {
  switch (type) {
  case onnx::TensorProto::BOOL:
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
    return 1;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16:
    return 2;
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::UINT32:
    return 4;
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::UINT64:
  case onnx::TensorProto::COMPLEX64:
    return 8;
  case onnx::TensorProto::COMPLEX128:
    return 16;
  default:
    return 0;
  }
}

/// A decimal count: digits only (no sign, no spaces), at most int64's.
bool parseCount(const std::string &text, int64_t &value) {
  if (text.empty() || text.size() > 18)
    return false;
  value = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
    value = value * 10 + (c - '0');
  }
  return true;
}

std::string shown(const std::string &s) {
  std::string out = "'";
  for (char c : s)
    out += (c >= 32 && c < 127) ? c : '?';
  return out + "'";
}

class Resolver {
public:
  Resolver(const fs::path &folder, int64_t inlineBytes)
      : folder(folder), inlineBytes(inlineBytes) {}

  bool graph(onnx::GraphProto &g, std::string &error) {
    for (onnx::TensorProto &t : *g.mutable_initializer())
      if (!tensor(t, "initializer '" + t.name() + "'", error))
        return false;
    for (onnx::NodeProto &node : *g.mutable_node())
      for (onnx::AttributeProto &a : *node.mutable_attribute()) {
        std::string where = "node '" + node.name() + "' (" + node.op_type() +
                            "): attribute " + a.name();
        if (a.has_t() && !tensor(*a.mutable_t(), where, error))
          return false;
        for (onnx::TensorProto &t : *a.mutable_tensors())
          if (!tensor(t, where, error))
            return false;
        if (a.has_g() && !graph(*a.mutable_g(), error))
          return false;
        for (onnx::GraphProto &sub : *a.mutable_graphs())
          if (!graph(sub, error))
            return false;
      }
    return true;
  }

private:
  bool tensor(onnx::TensorProto &t, const std::string &where,
              std::string &error) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) {
      if (t.external_data_size() > 0) {
        error = where + ": has external data entries but is not external";
        return false;
      }
      return true;
    }
    auto bad = [&](const std::string &what) {
      error = where + ": external data " + what;
      return false;
    };
    std::string location;
    int64_t offset = 0, length = -1;
    bool hasLocation = false;
    for (const onnx::StringStringEntryProto &e : t.external_data()) {
      if (e.key() == "location") {
        location = e.value();
        hasLocation = true;
      } else if (e.key() == "offset") {
        if (!parseCount(e.value(), offset))
          return bad("offset " + shown(e.value()) + " is not a decimal count");
      } else if (e.key() == "length") {
        if (!parseCount(e.value(), length))
          return bad("length " + shown(e.value()) + " is not a decimal count");
      } else if (e.key() != "checksum") {
        return bad("has an unknown key " + shown(e.key()));
      }
    }
    if (!hasLocation || location.empty())
      return bad("names no location");
    if (t.has_raw_data() || t.float_data_size() || t.int32_data_size() ||
        t.int64_data_size() || t.double_data_size() || t.uint64_data_size() ||
        t.string_data_size())
      return bad("is also given inside the model");
    fs::path relative(location);
    if (location.find('\0') != std::string::npos || relative.is_absolute())
      return bad("location " + shown(location) +
                 " must be a path relative to the model's folder");
    for (const fs::path &part : relative)
      if (part == "..")
        return bad("location " + shown(location) +
                   " leaves the model's "
                   "folder ('..')");
    // Opened once, here: what is checked is the file that is read later
    // (through /proc/self/fd), never a path that could be swapped between.
    const OpenedFile *opened = openOnce(location, relative, bad);
    if (!opened)
      return false;
    int64_t size = opened->size;
    // The dims were bounded at load (ImportOnnx.cpp): no overflow here.
    int64_t width = elementBytes(t.data_type());
    if (width == 0)
      return bad("holds a tensor of type " + std::to_string(t.data_type()) +
                 ", which has no fixed size");
    int64_t want = width;
    for (int64_t d : t.dims())
      want *= d;
    if (offset > size)
      return bad("offset " + std::to_string(offset) + " is past the end of " +
                 shown(location) + " (" + std::to_string(size) + " bytes)");
    if (length < 0)
      length = size - offset;
    if (length != want)
      return bad("length " + std::to_string(length) + " is not the " +
                 std::to_string(want) + " bytes the dims need");
    if (length > size - offset)
      return bad("of " + std::to_string(length) + " bytes at offset " +
                 std::to_string(offset) + " runs past the end of " +
                 shown(location) + " (" + std::to_string(size) + " bytes)");
    // Each tensor has bytes of its own: regions that overlap would let a
    // small file stand for any number of tensors.
    if (length > 0) {
      auto &regions = files[opened->real].regions;
      auto next = regions.lower_bound(offset);
      if (next != regions.end() && next->first < offset + length)
        return bad("of " + std::to_string(length) + " bytes at offset " +
                   std::to_string(offset) + " overlaps that of " +
                   next->second.second + " in " + shown(location));
      if (next != regions.begin() && std::prev(next)->second.first > offset)
        return bad("of " + std::to_string(length) + " bytes at offset " +
                   std::to_string(offset) + " overlaps that of " +
                   std::prev(next)->second.second + " in " + shown(location));
      regions.emplace(offset, std::make_pair(offset + length, where));
    }
    t.clear_external_data();
    auto add = [&](const std::string &key, const std::string &value) {
      onnx::StringStringEntryProto *e = t.add_external_data();
      e->set_key(key);
      e->set_value(value);
    };
    add("location", "/proc/self/fd/" + std::to_string(opened->fd));
    add("offset", std::to_string(offset));
    add("length", std::to_string(length));
    bool integral = t.data_type() == onnx::TensorProto::INT64 ||
                    t.data_type() == onnx::TensorProto::INT32 ||
                    t.data_type() == onnx::TensorProto::BOOL;
    if (integral && length <= inlineBytes) {
      std::string bytes;
      if (!readExternalData(t, bytes, error)) {
        error = where + " " + error;
        return false;
      }
      t.clear_external_data();
      t.set_data_location(onnx::TensorProto::DEFAULT);
      t.set_raw_data(std::move(bytes));
    }
    return true;
  }

  /// A file tensors name: its descriptor (held for the process's life: the
  /// weights are read from it later), size, and the regions tensors took
  /// (offset -> end and the tensor).
  struct OpenedFile {
    int fd = -1;
    int64_t size = 0;
    std::string real;
    std::map<int64_t, std::pair<int64_t, std::string>> regions;
  };

  /// Opens the file at `relative` in the folder, checks what was opened
  /// (inside the folder once links are followed, a regular file); the one
  /// opened before when it is the same file. Null after `bad` otherwise.
  template <typename Bad>
  const OpenedFile *openOnce(const std::string &location,
                             const fs::path &relative,
                         Bad &bad) {
    std::string path = (folder / relative).string();
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      bad("file " + shown(location) + " cannot be opened (" +
          std::strerror(errno) + ")");
      return nullptr;
    }
    char real[PATH_MAX + 1];
    std::string link = "/proc/self/fd/" + std::to_string(fd);
    ssize_t n = ::readlink(link.c_str(), real, PATH_MAX);
    struct stat st {};
    auto refuse = [&](const std::string &what) -> const OpenedFile * {
      ::close(fd);
      bad(what);
      return nullptr;
    };
    if (n <= 0 || ::fstat(fd, &st) != 0)
      return refuse("file " + shown(location) + " cannot be opened (" +
                    std::strerror(errno) + ")");
    fs::path file(std::string(real, static_cast<size_t>(n)));
    // Symbolic links are followed: the file itself must be in the folder.
    auto [end, at] =
        std::mismatch(folder.begin(), folder.end(), file.begin(), file.end());
    if (end != folder.end())
      return refuse("location " + shown(location) +
                    " leads out of the model's folder");
    if (!S_ISREG(st.st_mode))
      return refuse("location " + shown(location) + " is not a regular file");
    auto [it, fresh] = files.try_emplace(file.string());
    if (!fresh) {
      ::close(fd); // the same file: read from the first descriptor
      return &it->second;
    }
    it->second.fd = fd;
    it->second.size = static_cast<int64_t>(st.st_size);
    it->second.real = file.string();
    return &it->second;
  }

  fs::path folder;
  int64_t inlineBytes;
  std::map<std::string, OpenedFile> files;
};

} // namespace

bool mlir::dtfm::resolveExternalData(onnx::ModelProto &model,
                                     const std::string &modelDir,
                                     int64_t inlineBytes, std::string &error) {
  std::error_code ec;
  fs::path folder = fs::canonical(modelDir.empty() ? "." : modelDir, ec);
  if (ec) {
    error = "the model's folder cannot be resolved (" + ec.message() + ")";
    return false;
  }
  return Resolver(folder, inlineBytes).graph(*model.mutable_graph(), error);
}

bool mlir::dtfm::readExternalData(const onnx::TensorProto &t,
                                  std::string &bytes, std::string &error) {
  std::string location;
  int64_t offset = -1, length = -1;
  for (const onnx::StringStringEntryProto &e : t.external_data()) {
    if (e.key() == "location")
      location = e.value();
    else if (e.key() == "offset" && !parseCount(e.value(), offset))
      offset = -1;
    else if (e.key() == "length" && !parseCount(e.value(), length))
      length = -1;
  }
  // Only resolveExternalData writes absolute locations (it refuses them in
  // a model): anything else was never checked.
  if (location.empty() || location[0] != '/' || offset < 0 || length < 0) {
    error = "has external data that was not resolved";
    return false;
  }
  // The descriptor resolveExternalData opened (/proc/self/fd/N): the file
  // it checked, whatever the path names now.
  int fd = ::open(location.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "has external data that cannot be read (" + shown(location) + ")";
    return false;
  }
  bytes.resize(static_cast<size_t>(length));
  int64_t done = 0;
  while (done < length) {
    ssize_t n = ::pread(fd, bytes.data() + done,
                        static_cast<size_t>(length - done), offset + done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    done += n;
  }
  ::close(fd);
  if (done != length) {
    error = "has external data that cannot be read (" + shown(location) +
            " ends early)";
    return false;
  }
  return true;
}

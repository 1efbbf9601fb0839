//===- FuzzSupport.cpp - What the fuzz targets share ----------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace dtfm::fuzz;

const std::string &dtfm::fuzz::scratchDir() {
  static const std::string dir = [] {
    char pattern[] = "/tmp/dtfm-fuzz.XXXXXX";
    if (!::mkdtemp(pattern)) {
      std::perror("dtfm fuzz: cannot make a scratch folder in /tmp");
      std::abort();
    }
    std::string made = pattern;
    static std::string removeAtExit = made;
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(removeAtExit, ignored);
    });
    return made;
  }();
  return dir;
}

std::string dtfm::fuzz::writeScratch(const std::string &name,
                                     const uint8_t *data, size_t size) {
  std::string path = scratchDir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(data),
            static_cast<std::streamsize>(size));
  out.close();
  if (!out) {
    std::fprintf(stderr, "dtfm fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

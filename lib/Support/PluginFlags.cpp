//===- PluginFlags.cpp - --load-dtfm-plugin for command-line tools --------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Support/PluginFlags.h"
#include "dtfm/Support/CustomOps.h"

#include <cstdio>
#include <cstring>

std::vector<std::string> dtfm::scanPluginFlags(int argc, char **argv) {
  std::vector<std::string> paths;
  const std::string name = kLoadPluginFlag;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") // everything after is positional
      break;
    size_t dashes = arg.rfind("--", 0) == 0 ? 2 : (arg.rfind("-", 0) == 0);
    if (dashes == 0 || arg.compare(dashes, name.size(), name) != 0)
      continue;
    std::string rest = arg.substr(dashes + name.size());
    if (rest.empty() && i + 1 < argc)
      paths.push_back(argv[++i]);
    else if (!rest.empty() && rest[0] == '=')
      paths.push_back(rest.substr(1));
  }
  return paths;
}

bool dtfm::loadPluginsFromCommandLine(const char *tool, int argc,
                                      char **argv) {
  for (const std::string &path : scanPluginFlags(argc, argv)) {
    std::string error;
    if (!loadCustomOpPlugin(path, CustomOpRegistry::global(), error)) {
      std::fprintf(stderr, "%s: error: %s\n", tool, error.c_str());
      return false;
    }
  }
  return true;
}

//===- PluginFlags.h - --load-dtfm-plugin for command-line tools -*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_SUPPORT_PLUGINFLAGS_H
#define DTFM_SUPPORT_PLUGINFLAGS_H

#include <string>
#include <vector>

namespace dtfm {

/// Name of the flag that loads a custom-op plugin.
inline constexpr char kLoadPluginFlag[] = "load-dtfm-plugin";

/// The paths given with --load-dtfm-plugin=PATH or --load-dtfm-plugin PATH
/// (one or two dashes). Plugins must be loaded before the tool parses any IR,
/// i.e. before LLVM's option parsing runs, hence this early scan.
std::vector<std::string> scanPluginFlags(int argc, char **argv);

/// Loads every plugin named on the command line into the global registry.
/// On failure prints "<tool>: error: <reason>" and returns false.
bool loadPluginsFromCommandLine(const char *tool, int argc, char **argv);

} // namespace dtfm

#endif // DTFM_SUPPORT_PLUGINFLAGS_H

//===- CustomOps.cpp - Registry of user-defined operators -----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Support/CustomOps.h"

#include <dlfcn.h>
#include <mutex>

using namespace dtfm;

namespace {
class CustomOpRegistryImpl final : public CustomOpRegistry {
public:
  bool add(CustomOpDef def) override {
    if (def.kind.empty() || !def.inferResults || !def.cost)
      return false;
    std::lock_guard<std::mutex> lock(mutex);
    return defs.emplace(def.kind, std::move(def)).second;
  }

  const CustomOpDef *lookup(const std::string &kind) const override {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = defs.find(kind);
    return it == defs.end() ? nullptr : &it->second;
  }

  std::vector<std::string> kinds() const override {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<std::string> names;
    for (const auto &entry : defs)
      names.push_back(entry.first);
    return names;
  }

private:
  mutable std::mutex mutex;
  // std::map keeps node addresses stable, so lookup() may hand out pointers.
  std::map<std::string, CustomOpDef> defs;
};
} // namespace

CustomOpRegistry &CustomOpRegistry::global() {
  static CustomOpRegistryImpl registry;
  return registry;
}

std::unique_ptr<CustomOpRegistry> CustomOpRegistry::create() {
  return std::make_unique<CustomOpRegistryImpl>();
}

bool dtfm::loadCustomOpPlugin(const std::string &path,
                              CustomOpRegistry &registry, std::string &error) {
  // RTLD_LOCAL keeps the plugin's own symbols out of the global namespace; the
  // handle is never closed because registered callbacks live in the library.
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *reason = dlerror();
    error = "cannot load plugin '" + path + "': " +
            (reason ? reason : "unknown dlopen error");
    return false;
  }
  void *symbol = dlsym(handle, kPluginEntryPoint);
  if (!symbol) {
    error = "plugin '" + path + "' does not export " +
            std::string(kPluginEntryPoint) +
            "(dtfm::CustomOpRegistry &)";
    return false;
  }
  std::vector<std::string> before = registry.kinds();
  reinterpret_cast<PluginEntryFn>(symbol)(registry);
  if (registry.kinds() == before) {
    error = "plugin '" + path + "' registered no new custom op kind";
    return false;
  }
  return true;
}

//===- CustomOpsTest.cpp - Custom-op registry and plugin flags ------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Support/CustomOps.h"
#include "dtfm/Support/PluginFlags.h"

#include <gtest/gtest.h>

using namespace dtfm;

namespace {

CustomOpDef identityDef(const std::string &kind) {
  CustomOpDef def;
  def.kind = kind;
  def.inferResults = [](const CustomOpCall &call,
                        std::vector<TensorDesc> &results, std::string &) {
    results = call.operands;
    return true;
  };
  def.cost = [](const CustomOpCall &call, const std::vector<TensorDesc> &) {
    CustomOpCost cost;
    cost.forwardFlops = call.operands.at(0).numElements();
    return cost;
  };
  return def;
}

TEST(CustomOpRegistry, AddLookupAndSortedKinds) {
  auto registry = CustomOpRegistry::create();
  EXPECT_TRUE(registry->add(identityDef("zeta")));
  EXPECT_TRUE(registry->add(identityDef("alpha")));
  ASSERT_NE(registry->lookup("alpha"), nullptr);
  EXPECT_EQ(registry->lookup("alpha")->kind, "alpha");
  EXPECT_EQ(registry->lookup("beta"), nullptr);
  EXPECT_EQ(registry->kinds(), (std::vector<std::string>{"alpha", "zeta"}));
}

TEST(CustomOpRegistry, RejectsDuplicatesAndIncompleteDefinitions) {
  auto registry = CustomOpRegistry::create();
  EXPECT_TRUE(registry->add(identityDef("x")));
  EXPECT_FALSE(registry->add(identityDef("x")));
  CustomOpDef noCost = identityDef("y");
  noCost.cost = nullptr;
  EXPECT_FALSE(registry->add(noCost));
  EXPECT_FALSE(registry->add(identityDef("")));
  EXPECT_EQ(registry->kinds().size(), 1u);
}

TEST(CustomOpRegistry, CallbacksSeeTheCall) {
  auto registry = CustomOpRegistry::create();
  registry->add(identityDef("id"));
  CustomOpCall call;
  call.kind = "id";
  call.operands.push_back({{2, 3, 4}, DType::F16});
  call.params["n"] = int64_t(7);
  EXPECT_EQ(call.getInt("n", 0), 7);
  EXPECT_EQ(call.getInt("missing", -1), -1);
  std::vector<TensorDesc> results;
  std::string error;
  ASSERT_TRUE(registry->lookup("id")->inferResults(call, results, error));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].bytes(), 2 * 3 * 4 * 2);
  EXPECT_EQ(registry->lookup("id")->cost(call, results).forwardFlops, 24);
}

TEST(CustomOpPlugin, MissingLibraryNamesThePath) {
  auto registry = CustomOpRegistry::create();
  std::string error;
  EXPECT_FALSE(
      loadCustomOpPlugin("/nonexistent/libnothing.so", *registry, error));
  EXPECT_NE(error.find("/nonexistent/libnothing.so"), std::string::npos)
      << error;
}

TEST(CustomOpPlugin, LibraryWithoutEntryPointIsRejected) {
  // libm exists everywhere and exports no dtfmRegisterCustomOps.
  auto registry = CustomOpRegistry::create();
  std::string error;
  EXPECT_FALSE(loadCustomOpPlugin("libm.so.6", *registry, error));
  EXPECT_NE(error.find(kPluginEntryPoint), std::string::npos) << error;
}

TEST(PluginFlags, AcceptsEveryFlagSpelling) {
  const char *args[] = {"tool",
                        "--load-dtfm-plugin=a.so",
                        "-load-dtfm-plugin=b.so",
                        "--load-dtfm-plugin",
                        "c.so",
                        "--load-dtfm-pluginx=d.so",
                        "--other",
                        "--",
                        "--load-dtfm-plugin=e.so"};
  std::vector<std::string> paths =
      scanPluginFlags(9, const_cast<char **>(args));
  EXPECT_EQ(paths, (std::vector<std::string>{"a.so", "b.so", "c.so"}));
}

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtypeBytes(DType::F32), 4);
  EXPECT_EQ(dtypeBytes(DType::BF16), 2);
  EXPECT_EQ(dtypeBytes(DType::I64), 8);
  EXPECT_STREQ(dtypeName(DType::BF16), "bf16");
}

} // namespace

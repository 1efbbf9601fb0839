//===- PlanInputs.h - What a plan records to be planned again ---*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR): written by --dtfm-plan, read by the
// runtime when it re-plans (dtfm-run --elastic).
//
//===----------------------------------------------------------------------===//
//
// --dtfm-plan records its inputs on the planned module, and so in the plan
// file's module attributes:
//
//   dtfm.plan_input    the module as --dtfm-plan received it (MLIR text,
//                      without a dtfm.cluster), and
//   dtfm.plan_options  its options as `key=value` items without `cluster`
//                      and `print-table`, every number exact.
//
// With them and a cluster file, `dtfm-opt` plans the same model again on
// other devices: the same options on the same cluster give the same plan,
// byte for byte. The option items are spelled as MLIR's pass options are
// (space-separated, a value holding a space in braces).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_FORMAT_PLANINPUTS_H
#define DTFM_FORMAT_PLANINPUTS_H

#include <optional>
#include <string>
#include <vector>

namespace dtfm::format {

/// Module attribute (and plan.module_attrs key) holding the model as
/// --dtfm-plan received it.
inline constexpr const char *kPlanInputAttrName = "dtfm.plan_input";
/// Module attribute (and plan.module_attrs key) holding --dtfm-plan's
/// options.
inline constexpr const char *kPlanOptionsAttrName = "dtfm.plan_options";

/// One `key=value` item of a pass option string.
struct PlanOption {
  std::string key, value;
  bool operator==(const PlanOption &other) const {
    return key == other.key && value == other.value;
  }
};

/// Splits "a=1 b={x y} c=2" (or the same in outer braces, as MLIR prints
/// options) into its items, braces around a value removed. False with a
/// one-line `error` for an item without a key and '=', or unbalanced
/// braces.
bool parsePlanOptions(const std::string &text, std::vector<PlanOption> &items,
                      std::string &error);

/// The items as one option string: "a=1 b={x y}" (a value with a space in
/// braces).
std::string joinPlanOptions(const std::vector<PlanOption> &items);

/// The value of `key`, when an item has it.
std::optional<std::string> findPlanOption(const std::vector<PlanOption> &items,
                                          const std::string &key);

/// Gives `key` the value `value`: in place where an item has the key (the
/// first; later ones removed), else appended.
void setPlanOption(std::vector<PlanOption> &items, const std::string &key,
                   const std::string &value);

/// Removes every item of `key`.
void erasePlanOption(std::vector<PlanOption> &items, const std::string &key);

} // namespace dtfm::format

#endif // DTFM_FORMAT_PLANINPUTS_H

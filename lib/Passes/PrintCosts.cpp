//===- PrintCosts.cpp - Print per-op and per-layer cost tables ------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/CostAnalysis.h"
#include "dtfm/Passes/Passes.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::dtfm {
#define GEN_PASS_DEF_PRINTCOSTS
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;

/// "dtfm.linear", or "dtfm.param wte" for named sources.
static std::string describeOp(Operation *op) {
  std::string text = op->getName().getStringRef().str();
  if (auto name = op->getAttrOfType<StringAttr>("name"))
    text += " " + name.str();
  else if (auto kind = op->getAttrOfType<StringAttr>("kind"))
    text += " " + kind.str();
  return text;
}

/// llvm::format takes pointers, not arrays.
static const char *cstr(const char *text) { return text; }

/// 1234567 -> "1.235 M" (decimal prefixes).
static std::string humanCount(int64_t value) {
  static const char *prefixes[] = {"", " k", " M", " G", " T", " P", " E"};
  double scaled = static_cast<double>(value);
  int prefix = 0;
  while (scaled >= 1000.0 && prefix < 6) {
    scaled /= 1000.0;
    ++prefix;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  if (prefix == 0)
    os << value;
  else
    os << llvm::format("%.3f", scaled) << prefixes[prefix];
  return text;
}

/// 1234567 -> "1.177 MiB" (binary prefixes).
static std::string humanBytes(int64_t value) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double scaled = static_cast<double>(value);
  int unit = 0;
  while (scaled >= 1024.0 && unit < 6) {
    scaled /= 1024.0;
    ++unit;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  if (unit == 0)
    os << value << " B";
  else
    os << llvm::format("%.3f", scaled) << " " << units[unit];
  return text;
}

static llvm::json::Object totalsToJson(const CostTotals &t) {
  return llvm::json::Object{
      {"ops", t.ops},
      {"trainable_params", t.trainableParameters},
      {"frozen_params", t.frozenParameters},
      {"param_bytes", t.parameterBytes},
      {"fwd_flops", t.forwardFlops},
      {"bwd_flops", t.backwardFlops},
      {"optimizer_flops", t.optimizerFlops},
      {"training_flops", t.trainingFlops()},
      {"saved_bytes", t.savedActivationBytes},
      {"result_bytes", t.resultBytes},
  };
}

namespace {
struct PrintCosts : public mlir::dtfm::impl::PrintCostsBase<PrintCosts> {
  using PrintCostsBase::PrintCostsBase;

  void runOnOperation() override {
    if (format != "table" && format != "json") {
      mlir::emitError(toolLoc(getOperation(), ""))
          << "dtfm-print-costs: unknown format '" << format.getValue()
          << "' (expected table or json)";
      return signalPassFailure();
    }
    CostAnalysis &analysis = getAnalysis<CostAnalysis>();
    if (!analysis.isValid())
      return signalPassFailure();
    if (format == "json")
      printJson(analysis, llvm::outs());
    else
      printTable(analysis, llvm::outs());
    llvm::outs().flush();
    markAllAnalysesPreserved();
  }

  void printTable(const CostAnalysis &analysis, raw_ostream &os) {
    os << "=== dtfm costs (one micro-batch) ===\n";
    if (perOp) {
      os << llvm::format("%6s  %-32s %-14s %16s %16s %14s %14s %14s\n",
                         cstr("#"), cstr("op"), cstr("layer"),
                         cstr("fwd FLOPs"), cstr("bwd FLOPs"),
                         cstr("saved bytes"), cstr("result bytes"),
                         cstr("param bytes"));
      for (auto [index, cost] : llvm::enumerate(analysis.getOpCosts()))
        os << llvm::format(
            "%6zu  %-32s %-14s %16lld %16lld %14lld %14lld %14lld\n", index,
            describeOp(cost.op).c_str(),
            cost.layer.empty() ? "-" : cost.layer.c_str(),
            (long long)cost.forwardFlops, (long long)cost.backwardFlops,
            (long long)cost.savedActivationBytes,
            (long long)cost.totalResultBytes(),
            (long long)cost.parameterBytes);
      os << "\n";
    }
    os << "--- per layer ---\n";
    os << llvm::format("%-14s %6s %14s %18s %18s %16s\n", cstr("layer"),
                       cstr("ops"), cstr("params"), cstr("fwd FLOPs"),
                       cstr("bwd FLOPs"), cstr("saved bytes"));
    for (const auto &[layer, t] : analysis.getLayerTotals())
      os << llvm::format("%-14s %6lld %14lld %18lld %18lld %16lld\n",
                         layer.empty() ? "-" : layer.c_str(), (long long)t.ops,
                         (long long)(t.trainableParameters +
                                     t.frozenParameters),
                         (long long)t.forwardFlops, (long long)t.backwardFlops,
                         (long long)t.savedActivationBytes);
    const CostTotals &t = analysis.getTotals();
    auto line = [&](const char *label, int64_t value, std::string human) {
      os << llvm::format("%-26s %20lld  (%s)\n", label, (long long)value,
                         human.c_str());
    };
    os << "\n--- totals ---\n";
    line("ops", t.ops, humanCount(t.ops));
    line("parameters (trainable)", t.trainableParameters,
         humanCount(t.trainableParameters));
    line("parameters (frozen)", t.frozenParameters,
         humanCount(t.frozenParameters));
    line("parameter bytes", t.parameterBytes, humanBytes(t.parameterBytes));
    line("forward FLOPs", t.forwardFlops, humanCount(t.forwardFlops));
    line("backward FLOPs", t.backwardFlops, humanCount(t.backwardFlops));
    if (analysis.isTrainingGraph())
      line("optimizer FLOPs", t.optimizerFlops, humanCount(t.optimizerFlops));
    line("training FLOPs", t.trainingFlops(), humanCount(t.trainingFlops()));
    line("saved activation bytes", t.savedActivationBytes,
         humanBytes(t.savedActivationBytes));
  }

  void printJson(const CostAnalysis &analysis, raw_ostream &os) {
    llvm::json::Array ops;
    if (perOp) {
      for (const OpCost &cost : analysis.getOpCosts()) {
        llvm::json::Array results;
        for (int64_t bytes : cost.resultBytes)
          results.push_back(bytes);
        ops.push_back(llvm::json::Object{
            {"op", describeOp(cost.op)},
            {"layer", cost.layer},
            {"fwd_flops", cost.forwardFlops},
            {"bwd_flops", cost.backwardFlops},
            {"saved_bytes", cost.savedActivationBytes},
            {"param_bytes", cost.parameterBytes},
            {"result_bytes", std::move(results)},
        });
      }
    }
    llvm::json::Array layers;
    for (const auto &[layer, t] : analysis.getLayerTotals()) {
      llvm::json::Object entry = totalsToJson(t);
      entry["layer"] = layer;
      layers.push_back(std::move(entry));
    }
    llvm::json::Value root = llvm::json::Object{
        {"ops", std::move(ops)},
        {"layers", std::move(layers)},
        {"totals", totalsToJson(analysis.getTotals())},
    };
    os << root << "\n";
  }
};
} // namespace

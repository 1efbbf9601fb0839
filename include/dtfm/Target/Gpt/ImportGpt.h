//===- ImportGpt.h - Build GPT models in the dtfm dialect -------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// A GPT decoder (GPT-2/GPT-3 architecture: learned position embeddings,
// pre-layernorm blocks, 4x MLP with GELU, output projection tied to the token
// embedding) for one micro-batch, ending in the cross-entropy loss.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_TARGET_GPT_IMPORTGPT_H
#define DTFM_TARGET_GPT_IMPORTGPT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::dtfm {

/// Shape of a GPT model and of the micro-batch it is built for.
struct GptConfig {
  std::string name = "custom";
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t seqLen = 0;
  int64_t vocab = 0;
  int64_t microBatch = 1;
  /// Element type of parameters and activations: f32, f16 or bf16.
  std::string dtype = "f32";
};

/// The preset called `name` (gpt3-1.3b, gpt3-6.7b, gpt3-13b, gpt3-175b,
/// gpt2-xl, tiny), or nullopt.
std::optional<GptConfig> getGptPreset(llvm::StringRef name);

/// Names of all presets, in a fixed order.
std::vector<std::string> getGptPresetNames();

/// The most decoder layers a GPT may have.
inline constexpr int64_t kMaxGptLayers = 4096;

/// Checks sizes (all positive, at most kMaxGptLayers layers, hidden
/// divisible by heads, every op's and one micro-batch's FLOPs within 64
/// bits) and dtype. On failure returns false with a one-line reason in
/// `error`.
bool validateGptConfig(const GptConfig &config, std::string &error);

/// Closed-form parameter count: l(12h^2 + 13h) + (V + s + 2)h (weights,
/// biases, layernorms, token and position embeddings, final layernorm; the
/// output projection is tied to the token embedding).
int64_t gptParameterCountClosedForm(const GptConfig &config);

/// Closed-form training FLOPs of one micro-batch (forward + backward, matmuls
/// only): 72 B s l h^2 (1 + s/(6h) + V/(12 l h)).
double gptTrainingFlopsClosedForm(const GptConfig &config);

/// Builds the model as `func.func @<name>` in a new module. The config must
/// be valid.
OwningOpRef<ModuleOp> buildGptModule(MLIRContext *context,
                                     const GptConfig &config);

} // namespace mlir::dtfm

#endif // DTFM_TARGET_GPT_IMPORTGPT_H

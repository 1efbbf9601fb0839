//===- ImportGpt.h - Build GPT models in the dtfm dialect -------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// A decoder-only transformer for one micro-batch, ending in the
// cross-entropy loss, in one of two architectures:
//  - GPT (GPT-2/GPT-3): learned position embeddings, pre-layernorm blocks,
//    4x MLP with GELU, biases, output projection tied to the token
//    embedding;
//  - Llama (Llama 2/3): rotary position embeddings on Q and K, RMSNorm,
//    grouped-query attention, a SwiGLU MLP, no biases, an untied head.
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

enum class DecoderArchitecture { Gpt, Llama };

/// Shape of a decoder model and of the micro-batch it is built for.
struct GptConfig {
  std::string name = "custom";
  DecoderArchitecture architecture = DecoderArchitecture::Gpt;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  /// Key/value heads (grouped-query attention); 0 means `heads`. Llama only.
  int64_t kvHeads = 0;
  /// Width of the MLP's hidden layer; 0 means 4 x hidden.
  int64_t ffnHidden = 0;
  /// Base of the rotary embedding's angles (Llama).
  double ropeTheta = 10000;
  int64_t seqLen = 0;
  int64_t vocab = 0;
  /// The token table's rows and the logits' columns are the vocabulary
  /// rounded up to a multiple of this; the padding classes take no part in
  /// the loss (cross_entropy's `classes`). 1: none.
  int64_t padVocabTo = 1;
  int64_t microBatch = 1;
  /// Element type of parameters and activations: f32, f16 or bf16.
  std::string dtype = "f32";
};

/// `kvHeads` and `ffnHidden` with their defaults applied.
int64_t keyValueHeadsOf(const GptConfig &config);
int64_t ffnHiddenOf(const GptConfig &config);
/// The vocabulary rounded up to a multiple of `padVocabTo`: the token
/// table's rows and the logits' columns.
int64_t paddedVocabOf(const GptConfig &config);

/// "gpt" or "llama"; parseDecoderArchitecture is its inverse.
const char *decoderArchitectureName(DecoderArchitecture architecture);
std::optional<DecoderArchitecture>
parseDecoderArchitecture(llvm::StringRef name);

/// The preset called `name` (gpt3-1.3b, gpt3-6.7b, gpt3-13b, gpt3-175b,
/// gpt2-xl, tiny, llama2-7b, llama3-8b, tiny-llama), or nullopt.
std::optional<GptConfig> getGptPreset(llvm::StringRef name);

/// Names of all presets, in a fixed order.
std::vector<std::string> getGptPresetNames();

/// The most decoder layers a GPT may have.
inline constexpr int64_t kMaxGptLayers = 4096;

/// Checks sizes (all positive, at most kMaxGptLayers layers, hidden
/// divisible by heads, key/value heads dividing heads and only in Llama, an
/// even head dimension and a finite rope theta > 1 in Llama, every op's and
/// one micro-batch's FLOPs within 64 bits) and dtype. On failure returns
/// false with a one-line reason in `error`.
bool validateGptConfig(const GptConfig &config, std::string &error);

/// Closed-form parameter count. GPT: l(12h^2 + 13h) + (V + s + 2)h
/// (weights, biases, layernorms, token and position embeddings, final
/// layernorm; the output projection is tied to the token embedding).
/// Llama: l(2h^2 + 2h kv + 3h f + 2h) + 2Vh + h, kv = h / heads x kv heads
/// and f the MLP width (the head untied, no biases).
int64_t gptParameterCountClosedForm(const GptConfig &config);

/// Closed-form training FLOPs of one micro-batch (forward + backward, matmuls
/// only, three times the forward): 3 B s (l (2(2h^2 + 2h kv + m h f) +
/// 4 s h) + 2 h V) with m = 2 MLP matrices in GPT (72 B s l h^2 (1 + s/(6h)
/// + V/(12 l h)) with f = 4h) and 3 in Llama.
double gptTrainingFlopsClosedForm(const GptConfig &config);

/// Builds the model as `func.func @<name>` in a new module. The config must
/// be valid.
OwningOpRef<ModuleOp> buildGptModule(MLIRContext *context,
                                     const GptConfig &config);

} // namespace mlir::dtfm

#endif // DTFM_TARGET_GPT_IMPORTGPT_H

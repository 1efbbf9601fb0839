//===- HfWeights.h - Hugging Face names of the decoder presets ---*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// The one map between the parameters of dtfm's GPT and Llama presets
// (--import-gpt: "wte", "h.N.attn.q.weight" (in, out), "layers.N.mlp.gate.
// weight", ...) and Hugging Face's state dicts of GPT2LMHeadModel and
// LlamaForCausalLM:
//
// - GPT-2 keeps Conv1D's (in, out) layout: q, k and v become one
//   "transformer.h.N.attn.c_attn" of (d, 3d), concatenated along out;
//   "lm_head.weight" is the token table again (the models tie them).
// - Llama's nn.Linear weights are (out, in): transposed. dtfm's rotary
//   embedding turns the pairs (i, i + d_head/2) as HF's rotate_half does,
//   so q_proj and k_proj need no permutation (Meta's original checkpoints,
//   which turn adjacent pairs, do: HF's conversion script permutes them).
//
// The model's config goes into "__metadata__" as "dtfm.hf_config": the
// JSON of the config.json HF would write (architectures, model_type, sizes,
// epsilon, rope theta, activation).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_FORMAT_HFWEIGHTS_H
#define DTFM_FORMAT_HFWEIGHTS_H

#include "dtfm/Format/Safetensors.h"

#include <string>

namespace dtfm::format {

/// A decoder preset's shape, for HF's config: the sizes come from the
/// weights (decoderShapeOf), the rest from the model's ops.
struct DecoderShape {
  bool llama = false;
  int64_t layers = 0, hidden = 0, ffn = 0, vocab = 0, positions = 0;
  int64_t heads = 0, kvHeads = 0;
  double normEpsilon = 1e-5, ropeTheta = 10000;
  bool tanhGelu = false;
};

/// The sizes of the decoder whose dtfm-named weights these are (layers,
/// hidden, ffn, vocabulary, and GPT's positions); false with `error` when
/// they are not a GPT or Llama preset's.
bool decoderShapeOf(const TensorMap &weights, DecoderShape &shape,
                    std::string &error);

/// dtfm's names and layouts to HF's, with the config in `metadata`.
bool toHuggingFace(const TensorMap &weights, const DecoderShape &shape,
                   TensorMap &hf, WeightMetadata &metadata,
                   std::string &error);

/// Whether `weights` are named as an HF GPT-2 or Llama state dict.
bool hasHuggingFaceNames(const TensorMap &weights);

/// HF's names and layouts back to dtfm's; false with a one-line `error`
/// for a tensor neither model has, a shape that does not split, or an
/// lm_head that differs from GPT-2's token table.
bool fromHuggingFace(const TensorMap &hf, TensorMap &weights,
                     std::string &error);

} // namespace dtfm::format

#endif // DTFM_FORMAT_HFWEIGHTS_H

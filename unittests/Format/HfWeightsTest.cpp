//===- HfWeightsTest.cpp - Hugging Face names of the decoder presets ------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/HfWeights.h"

#include <gtest/gtest.h>

using namespace dtfm::format;

namespace {

/// A tensor of `shape` holding 0, 1, 2, ... plus `offset`.
Tensor counting(std::vector<int64_t> shape, float offset = 0) {
  Tensor t(std::move(shape));
  for (size_t i = 0; i < t.data.size(); ++i)
    t.data[i] = static_cast<float>(i) + offset;
  return t;
}

/// A one-layer GPT preset of width 2 and vocabulary 3.
TensorMap gpt() {
  TensorMap w;
  w["wte"] = counting({3, 2});
  w["wpe"] = counting({4, 2}, 10);
  for (const char *n : {"ln_1", "ln_2", "ln_f"}) {
    std::string p = std::string(n == std::string("ln_f") ? "" : "h.0.") + n;
    w[p + ".gamma"] = counting({2}, 20);
    w[p + ".beta"] = counting({2}, 30);
  }
  float offset = 40;
  for (const char *n : {"attn.q", "attn.k", "attn.v", "attn.proj"}) {
    w[std::string("h.0.") + n + ".weight"] = counting({2, 2}, offset);
    w[std::string("h.0.") + n + ".bias"] = counting({2}, offset + 100);
    offset += 10;
  }
  w["h.0.mlp.fc.weight"] = counting({2, 8}, 80);
  w["h.0.mlp.fc.bias"] = counting({8}, 90);
  w["h.0.mlp.proj.weight"] = counting({8, 2}, 100);
  w["h.0.mlp.proj.bias"] = counting({2}, 110);
  return w;
}

} // namespace

TEST(HfWeights, GptGoesThereAndBack) {
  TensorMap weights = gpt(), hf, back;
  DecoderShape shape;
  std::string error;
  ASSERT_TRUE(decoderShapeOf(weights, shape, error)) << error;
  EXPECT_FALSE(shape.llama);
  EXPECT_EQ(shape.layers, 1);
  EXPECT_EQ(shape.hidden, 2);
  EXPECT_EQ(shape.vocab, 3);
  EXPECT_EQ(shape.ffn, 8);
  EXPECT_EQ(shape.positions, 4);
  shape.heads = shape.kvHeads = 1;
  WeightMetadata metadata;
  ASSERT_TRUE(toHuggingFace(weights, shape, hf, metadata, error)) << error;
  // c_attn: q, k, v side by side along out, row by row.
  const Tensor &cAttn = hf.at("transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(cAttn.shape, (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(cAttn.data, (std::vector<float>{40, 41, 50, 51, 60, 61, 42, 43,
                                            52, 53, 62, 63}));
  EXPECT_EQ(hf.at("lm_head.weight").data, weights.at("wte").data);
  EXPECT_EQ(hf.at("transformer.ln_f.bias").data,
            weights.at("ln_f.beta").data);
  EXPECT_NE(metadata.at("dtfm.hf_config").find("\"model_type\":\"gpt2\""),
            std::string::npos);
  ASSERT_TRUE(hasHuggingFaceNames(hf));
  ASSERT_TRUE(fromHuggingFace(hf, back, error)) << error;
  ASSERT_EQ(back.size(), weights.size());
  for (const auto &[name, t] : weights) {
    EXPECT_EQ(back.at(name).shape, t.shape) << name;
    EXPECT_EQ(back.at(name).data, t.data) << name;
  }
}

TEST(HfWeights, TheHubsGpt2FilesAreReadToo) {
  // GPT2Model's names (no "transformer.", no lm_head) and the causal-mask
  // buffers some files carry.
  TensorMap weights = gpt(), hf, bare, back;
  DecoderShape shape;
  WeightMetadata metadata;
  std::string error;
  ASSERT_TRUE(decoderShapeOf(weights, shape, error));
  ASSERT_TRUE(toHuggingFace(weights, shape, hf, metadata, error));
  for (auto &[name, t] : hf)
    if (name != "lm_head.weight")
      bare[name.substr(std::string("transformer.").size())] = t;
  bare["h.0.attn.bias"] = Tensor({1, 1, 4, 4}, 1);
  bare["h.0.attn.masked_bias"] = Tensor(std::vector<int64_t>{}, -1e4f);
  ASSERT_TRUE(fromHuggingFace(bare, back, error)) << error;
  EXPECT_EQ(back.size(), weights.size());
}

TEST(HfWeights, LlamaTransposesItsProjections) {
  TensorMap weights, hf, back;
  weights["wte"] = counting({3, 4});
  weights["norm.gamma"] = counting({4});
  weights["lm_head.weight"] = counting({4, 3});
  weights["layers.0.attn_norm.gamma"] = counting({4});
  weights["layers.0.mlp_norm.gamma"] = counting({4});
  weights["layers.0.attn.q.weight"] = counting({4, 4});
  weights["layers.0.attn.k.weight"] = counting({4, 2});
  weights["layers.0.attn.v.weight"] = counting({4, 2});
  weights["layers.0.attn.o.weight"] = counting({4, 4});
  weights["layers.0.mlp.gate.weight"] = counting({4, 6});
  weights["layers.0.mlp.up.weight"] = counting({4, 6});
  weights["layers.0.mlp.down.weight"] = counting({6, 4});
  DecoderShape shape;
  WeightMetadata metadata;
  std::string error;
  ASSERT_TRUE(decoderShapeOf(weights, shape, error));
  EXPECT_TRUE(shape.llama);
  EXPECT_EQ(shape.ffn, 6);
  ASSERT_TRUE(toHuggingFace(weights, shape, hf, metadata, error)) << error;
  const Tensor &k = hf.at("model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(k.shape, (std::vector<int64_t>{2, 4})); // (out, in)
  EXPECT_EQ(k.data, (std::vector<float>{0, 2, 4, 6, 1, 3, 5, 7}));
  EXPECT_EQ(hf.at("lm_head.weight").shape, (std::vector<int64_t>{3, 4}));
  hf["model.layers.0.self_attn.rotary_emb.inv_freq"] = Tensor({2}, 1);
  ASSERT_TRUE(fromHuggingFace(hf, back, error)) << error;
  for (const auto &[name, t] : weights)
    EXPECT_EQ(back.at(name).data, t.data) << name;
}

TEST(HfWeights, Refusals) {
  TensorMap weights = gpt(), hf, back;
  DecoderShape shape;
  WeightMetadata metadata;
  std::string error;
  ASSERT_TRUE(decoderShapeOf(weights, shape, error));
  ASSERT_TRUE(toHuggingFace(weights, shape, hf, metadata, error));

  TensorMap other = hf;
  other["transformer.h.0.attn.rotary"] = Tensor({2});
  EXPECT_FALSE(fromHuggingFace(other, back, error));
  EXPECT_EQ(error, "tensor 'transformer.h.0.attn.rotary' is not one of a "
                   "GPT-2 model's (Hugging Face names: transformer.*, "
                   "lm_head.weight)");
  other = hf;
  other["transformer.h.0.attn.c_attn.weight"] = Tensor({2, 4});
  EXPECT_FALSE(fromHuggingFace(other, back, error));
  EXPECT_EQ(error, "tensor 'transformer.h.0.attn.c_attn.weight' of shape "
                   "[2, 4] is not q, k and v side by side");
  other = hf;
  other["lm_head.weight"].data[0] += 1;
  EXPECT_FALSE(fromHuggingFace(other, back, error));
  EXPECT_NE(error.find("differs from the token table"), std::string::npos);

  TensorMap resnet{{"conv1.weight", Tensor({2, 2})}};
  EXPECT_FALSE(decoderShapeOf(resnet, shape, error));
  EXPECT_NE(error.find("not a GPT or Llama preset"), std::string::npos);
  weights["h.0.extra"] = Tensor({2});
  EXPECT_FALSE(toHuggingFace(weights, shape, hf, metadata, error));
  EXPECT_NE(error.find("parameter 'h.0.extra' is not one of the GPT "
                       "preset's"),
            std::string::npos);
}

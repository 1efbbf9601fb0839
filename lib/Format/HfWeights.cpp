//===- HfWeights.cpp - Hugging Face names of the decoder presets ----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/HfWeights.h"
#include "dtfm/Support/Json.h"

#include <cstring>
#include <set>

using namespace dtfm::format;

namespace {

enum class Layout { Same, Transposed };

/// One parameter in both namings: a global one, or one of every layer
/// (the names after "h.N." / "layers.N." and after HF's layer prefix).
struct Rule {
  const char *dtfm, *hf;
  Layout layout;
};

// GPT-2: Conv1D keeps (in, out), as dtfm does; q, k and v are c_attn.
const Rule kGptGlobal[] = {{"wte", "transformer.wte.weight", Layout::Same},
                           {"wpe", "transformer.wpe.weight", Layout::Same},
                           {"ln_f.gamma", "transformer.ln_f.weight",
                            Layout::Same},
                           {"ln_f.beta", "transformer.ln_f.bias",
                            Layout::Same}};
const Rule kGptLayer[] = {
    {"ln_1.gamma", "ln_1.weight", Layout::Same},
    {"ln_1.beta", "ln_1.bias", Layout::Same},
    {"attn.proj.weight", "attn.c_proj.weight", Layout::Same},
    {"attn.proj.bias", "attn.c_proj.bias", Layout::Same},
    {"ln_2.gamma", "ln_2.weight", Layout::Same},
    {"ln_2.beta", "ln_2.bias", Layout::Same},
    {"mlp.fc.weight", "mlp.c_fc.weight", Layout::Same},
    {"mlp.fc.bias", "mlp.c_fc.bias", Layout::Same},
    {"mlp.proj.weight", "mlp.c_proj.weight", Layout::Same},
    {"mlp.proj.bias", "mlp.c_proj.bias", Layout::Same}};
const char *kGptLayerPrefix = "transformer.h.";

// Llama: nn.Linear's weights are (out, in).
const Rule kLlamaGlobal[] = {
    {"wte", "model.embed_tokens.weight", Layout::Same},
    {"norm.gamma", "model.norm.weight", Layout::Same},
    {"lm_head.weight", "lm_head.weight", Layout::Transposed}};
const Rule kLlamaLayer[] = {
    {"attn_norm.gamma", "input_layernorm.weight", Layout::Same},
    {"attn.q.weight", "self_attn.q_proj.weight", Layout::Transposed},
    {"attn.k.weight", "self_attn.k_proj.weight", Layout::Transposed},
    {"attn.v.weight", "self_attn.v_proj.weight", Layout::Transposed},
    {"attn.o.weight", "self_attn.o_proj.weight", Layout::Transposed},
    {"mlp_norm.gamma", "post_attention_layernorm.weight", Layout::Same},
    {"mlp.gate.weight", "mlp.gate_proj.weight", Layout::Transposed},
    {"mlp.up.weight", "mlp.up_proj.weight", Layout::Transposed},
    {"mlp.down.weight", "mlp.down_proj.weight", Layout::Transposed}};
const char *kLlamaLayerPrefix = "model.layers.";

Tensor transposed(const Tensor &t) {
  Tensor out({t.shape[1], t.shape[0]});
  for (int64_t i = 0; i < t.shape[0]; ++i)
    for (int64_t j = 0; j < t.shape[1]; ++j)
      out.data[j * t.shape[0] + i] = t.data[i * t.shape[1] + j];
  return out;
}

/// `name` = prefix + N + "." + rest: N and rest.
bool splitLayer(const std::string &name, const std::string &prefix,
                int64_t &layer, std::string &rest) {
  if (name.rfind(prefix, 0) != 0)
    return false;
  size_t at = prefix.size(), dot = name.find('.', at);
  if (dot == std::string::npos || dot == at || dot - at > 9)
    return false;
  layer = 0;
  for (size_t i = at; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9')
      return false;
    layer = layer * 10 + (name[i] - '0');
  }
  rest = name.substr(dot + 1);
  return true;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

/// The q, k and v weights (or biases) of a GPT layer side by side along
/// their last dimension: c_attn.
Tensor concatenated(const Tensor &q, const Tensor &k, const Tensor &v) {
  int64_t rows = q.shape.size() == 2 ? q.shape[0] : 1,
          width = q.shape.back();
  std::vector<int64_t> shape = q.shape;
  shape.back() = 3 * width;
  Tensor out(shape);
  for (int64_t r = 0; r < rows; ++r)
    for (int part = 0; part < 3; ++part) {
      const Tensor &from = part == 0 ? q : part == 1 ? k : v;
      std::memcpy(&out.data[r * 3 * width + part * width],
                  &from.data[r * width], width * sizeof(float));
    }
  return out;
}

Tensor third(const Tensor &t, int part) {
  int64_t rows = t.shape.size() == 2 ? t.shape[0] : 1,
          width = t.shape.back() / 3;
  std::vector<int64_t> shape = t.shape;
  shape.back() = width;
  Tensor out(shape);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(&out.data[r * width], &t.data[r * 3 * width + part * width],
                width * sizeof(float));
  return out;
}

std::string integerJson(int64_t value) { return std::to_string(value); }

} // namespace

bool dtfm::format::decoderShapeOf(const TensorMap &weights,
                                  DecoderShape &shape, std::string &error) {
  auto wte = weights.find("wte");
  if (wte == weights.end() || wte->second.shape.size() != 2) {
    error = "the model is not a GPT or Llama preset (no token table 'wte'): "
            "Hugging Face names are written for those alone";
    return false;
  }
  shape.llama = weights.count("norm.gamma") != 0;
  shape.vocab = wte->second.shape[0];
  shape.hidden = wte->second.shape[1];
  std::set<int64_t> layers;
  for (const auto &[name, t] : weights) {
    int64_t layer = 0;
    std::string rest;
    if (splitLayer(name, shape.llama ? "layers." : "h.", layer, rest))
      layers.insert(layer);
  }
  shape.layers = static_cast<int64_t>(layers.size());
  auto ffn = weights.find(shape.llama ? "layers.0.mlp.gate.weight"
                                      : "h.0.mlp.fc.weight");
  if (ffn != weights.end() && ffn->second.shape.size() == 2)
    shape.ffn = ffn->second.shape[1];
  auto wpe = weights.find("wpe");
  if (!shape.llama && wpe != weights.end() && !wpe->second.shape.empty())
    shape.positions = wpe->second.shape[0];
  return true;
}

bool dtfm::format::toHuggingFace(const TensorMap &weights,
                                 const DecoderShape &shape, TensorMap &hf,
                                 WeightMetadata &metadata,
                                 std::string &error) {
  hf.clear();
  const Rule *global = shape.llama ? std::begin(kLlamaGlobal)
                                   : std::begin(kGptGlobal);
  const Rule *globalEnd =
      shape.llama ? std::end(kLlamaGlobal) : std::end(kGptGlobal);
  const Rule *layer = shape.llama ? std::begin(kLlamaLayer)
                                  : std::begin(kGptLayer);
  const Rule *layerEnd =
      shape.llama ? std::end(kLlamaLayer) : std::end(kGptLayer);
  std::string layerPrefix = shape.llama ? "layers." : "h.";
  std::string hfLayerPrefix = shape.llama ? kLlamaLayerPrefix : kGptLayerPrefix;
  auto place = [&](const Rule &rule, const std::string &hfName,
                   const Tensor &t) {
    if (rule.layout == Layout::Transposed && t.shape.size() != 2) {
      error = "parameter '" + std::string(rule.dtfm) + "' of shape " +
              shapeText(t.shape) + " is not a matrix";
      return false;
    }
    hf[hfName] = rule.layout == Layout::Transposed ? transposed(t) : t;
    return true;
  };
  for (const auto &[name, t] : weights) {
    bool placed = false;
    for (const Rule *rule = global; rule != globalEnd && !placed; ++rule)
      if (name == rule->dtfm) {
        if (!place(*rule, rule->hf, t))
          return false;
        placed = true;
      }
    int64_t n = 0;
    std::string rest;
    if (!placed && splitLayer(name, layerPrefix, n, rest)) {
      std::string hfPrefix = hfLayerPrefix + std::to_string(n) + ".";
      for (const Rule *rule = layer; rule != layerEnd && !placed; ++rule)
        if (rest == rule->dtfm) {
          if (!place(*rule, hfPrefix + rule->hf, t))
            return false;
          placed = true;
        }
      // GPT-2's c_attn: q, k and v side by side, written once from q's.
      for (const char *kind : {"weight", "bias"}) {
        if (placed || shape.llama)
          break;
        std::string base = layerPrefix + std::to_string(n) + ".attn.";
        if (rest == std::string("attn.k.") + kind ||
            rest == std::string("attn.v.") + kind) {
          placed = true; // with q's
        } else if (rest == std::string("attn.q.") + kind) {
          auto k = weights.find(base + "k." + kind),
               v = weights.find(base + "v." + kind);
          if (k == weights.end() || v == weights.end() ||
              k->second.shape != t.shape || v->second.shape != t.shape) {
            error = "parameter '" + name +
                    "': its layer's k and v are missing or of another shape";
            return false;
          }
          hf[hfPrefix + "attn.c_attn." + kind] =
              concatenated(t, k->second, v->second);
          placed = true;
        }
      }
    }
    if (!placed) {
      error = "parameter '" + name + "' is not one of the " +
              (shape.llama ? "Llama" : "GPT") +
              " preset's: Hugging Face names are written for the presets "
              "alone";
      return false;
    }
  }
  std::string config;
  auto field = [&](const std::string &key, const std::string &value) {
    config += (config.empty() ? "{" : ",") + ("\"" + key + "\":") + value;
  };
  if (shape.llama) {
    field("architectures", "[\"LlamaForCausalLM\"]");
    field("model_type", "\"llama\"");
    field("vocab_size", integerJson(shape.vocab));
    field("hidden_size", integerJson(shape.hidden));
    field("intermediate_size", integerJson(shape.ffn));
    field("num_hidden_layers", integerJson(shape.layers));
    field("num_attention_heads", integerJson(shape.heads));
    field("num_key_value_heads", integerJson(shape.kvHeads));
    field("max_position_embeddings", integerJson(shape.positions));
    field("rms_norm_eps", jsonNumber(shape.normEpsilon, 17, true));
    field("rope_theta", jsonNumber(shape.ropeTheta, 17, true));
    field("hidden_act", "\"silu\"");
    field("tie_word_embeddings", "false");
  } else {
    // GPT-2 ties the head to the token table; HF's state dict has both.
    hf["lm_head.weight"] = weights.at("wte");
    field("architectures", "[\"GPT2LMHeadModel\"]");
    field("model_type", "\"gpt2\"");
    field("vocab_size", integerJson(shape.vocab));
    field("n_positions", integerJson(shape.positions));
    field("n_embd", integerJson(shape.hidden));
    field("n_layer", integerJson(shape.layers));
    field("n_head", integerJson(shape.heads));
    field("n_inner", integerJson(shape.ffn));
    field("activation_function",
          shape.tanhGelu ? "\"gelu_new\"" : "\"gelu\"");
    field("layer_norm_epsilon", jsonNumber(shape.normEpsilon, 17, true));
    field("tie_word_embeddings", "true");
  }
  metadata["dtfm.hf_config"] = config + "}";
  return true;
}

bool dtfm::format::hasHuggingFaceNames(const TensorMap &weights) {
  return weights.count("transformer.wte.weight") ||
         weights.count("wte.weight") ||
         weights.count("model.embed_tokens.weight");
}

bool dtfm::format::fromHuggingFace(const TensorMap &hf, TensorMap &weights,
                                   std::string &error) {
  weights.clear();
  bool llama = hf.count("model.embed_tokens.weight") != 0;
  // GPT2Model's files (the hub's gpt2) name the same tensors without
  // "transformer.".
  bool bare = !llama && !hf.count("transformer.wte.weight");
  const Rule *global = llama ? std::begin(kLlamaGlobal) : std::begin(kGptGlobal);
  const Rule *globalEnd = llama ? std::end(kLlamaGlobal) : std::end(kGptGlobal);
  const Rule *layer = llama ? std::begin(kLlamaLayer) : std::begin(kGptLayer);
  const Rule *layerEnd = llama ? std::end(kLlamaLayer) : std::end(kGptLayer);
  std::string hfLayerPrefix = llama ? kLlamaLayerPrefix : kGptLayerPrefix;
  std::string layerPrefix = llama ? "layers." : "h.";
  const char *model = llama ? "Llama" : "GPT-2";
  auto take = [&](const Rule &rule, const std::string &dtfmName,
                  const std::string &hfName, const Tensor &t) {
    if (rule.layout == Layout::Transposed && t.shape.size() != 2) {
      error = "tensor '" + hfName + "' of shape " + shapeText(t.shape) +
              " is not a matrix";
      return false;
    }
    weights[dtfmName] = rule.layout == Layout::Transposed ? transposed(t) : t;
    return true;
  };
  for (const auto &[given, t] : hf) {
    std::string name =
        bare && given != "lm_head.weight" ? "transformer." + given : given;
    bool taken = false;
    for (const Rule *rule = global; rule != globalEnd && !taken; ++rule)
      if (name == rule->hf) {
        if (!take(*rule, rule->dtfm, given, t))
          return false;
        taken = true;
      }
    int64_t n = 0;
    std::string rest;
    if (!taken && splitLayer(name, hfLayerPrefix, n, rest)) {
      std::string prefix = layerPrefix + std::to_string(n) + ".";
      for (const Rule *rule = layer; rule != layerEnd && !taken; ++rule)
        if (rest == rule->hf) {
          if (!take(*rule, prefix + rule->dtfm, given, t))
            return false;
          taken = true;
        }
      if (!taken && !llama &&
          (rest == "attn.c_attn.weight" || rest == "attn.c_attn.bias")) {
        bool weight = rest == "attn.c_attn.weight";
        if (t.shape.size() != (weight ? 2u : 1u) || t.shape.back() % 3 != 0 ||
            (weight && t.shape[1] != 3 * t.shape[0])) {
          error = "tensor '" + given + "' of shape " + shapeText(t.shape) +
                  " is not q, k and v side by side";
          return false;
        }
        const char *kind = weight ? "weight" : "bias";
        weights[prefix + "attn.q." + kind] = third(t, 0);
        weights[prefix + "attn.k." + kind] = third(t, 1);
        weights[prefix + "attn.v." + kind] = third(t, 2);
        taken = true;
      }
      // Buffers some checkpoints carry: GPT-2's causal mask and masked
      // bias, Llama's rotary frequencies. dtfm computes them.
      if (!taken && ((!llama && (rest == "attn.masked_bias" ||
                                 (rest == "attn.bias" && t.shape.size() != 1))) ||
                     (llama && rest == "self_attn.rotary_emb.inv_freq")))
        taken = true;
    }
    if (!taken && !llama && name == "lm_head.weight") {
      // Tied to the token table: it must be the same tensor.
      auto wte = hf.find(bare ? "wte.weight" : "transformer.wte.weight");
      if (wte == hf.end() || wte->second.shape != t.shape ||
          std::memcmp(wte->second.data.data(), t.data.data(),
                      t.data.size() * sizeof(float)) != 0) {
        error = "tensor 'lm_head.weight' differs from the token table: "
                "dtfm's GPT ties them, as GPT-2 does";
        return false;
      }
      taken = true;
    }
    if (!taken) {
      error = std::string("tensor '") + given + "' is not one of a " + model +
              " model's (Hugging Face names: " +
              (llama ? "model.*, lm_head.weight" : "transformer.*, lm_head.weight") +
              ")";
      return false;
    }
  }
  return true;
}

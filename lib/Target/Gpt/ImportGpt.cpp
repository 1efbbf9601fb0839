//===- ImportGpt.cpp - Build GPT models in the dtfm dialect ---------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Target/Gpt/ImportGpt.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::dtfm;

//===----------------------------------------------------------------------===//
// Presets
//===----------------------------------------------------------------------===//

namespace {
struct Preset {
  const char *name;
  DecoderArchitecture architecture;
  int64_t layers, hidden, heads, kvHeads, ffnHidden, seqLen, vocab, microBatch;
  double ropeTheta;
  const char *dtype;
};
constexpr DecoderArchitecture kGpt = DecoderArchitecture::Gpt;
constexpr DecoderArchitecture kLlama = DecoderArchitecture::Llama;
/// Llama 2 and 3 both normalise with this epsilon.
constexpr double kRmsNormEpsilon = 1e-5;
} // namespace

// GPT-3 sizes from Brown et al. 2020, Table 2.1, where two rows contradict
// themselves and we keep the paper's d_head = 128: for 1.3B the table gives
// d_model 2048 with 24 heads of 128 (24 x 128 = 3072, and 2048/24 is not an
// integer), so we use 2048/128 = 16 heads; for 13B it gives d_model 5140 with
// 40 heads of 128, so we use 40 x 128 = 5120. Heads change neither parameters
// nor matmul FLOPs, only the attention's softmax work. GPT-2 XL from Radford et
// al. 2019. GPT-3 and GPT-2 presets are in f16 (mixed-precision training keeps
// activations in half precision); `tiny` is f32 and trains on a CPU.
// Llama 2 7B from Touvron et al. 2023 (and its released config: MLP width
// 11008, 4096 positions); Llama 3 8B from its released config (8 key/value
// heads, MLP width 14336, vocabulary 128256, rope theta 500000, 8192
// positions). Both in bf16, as they were trained; `tiny-llama` is f32 and
// trains on a CPU.
static const Preset kPresets[] = {
    // GPT: as many key/value heads as heads, an MLP of 4 x hidden (0s: so
    // that --heads and --hidden overrides keep them so).
    {"gpt3-1.3b", kGpt, 24, 2048, 16, 0, 0, 2048, 50257, 1, 1e4, "f16"},
    {"gpt3-6.7b", kGpt, 32, 4096, 32, 0, 0, 2048, 50257, 1, 1e4, "f16"},
    {"gpt3-13b", kGpt, 40, 5120, 40, 0, 0, 2048, 50257, 1, 1e4, "f16"},
    {"gpt3-175b", kGpt, 96, 12288, 96, 0, 0, 2048, 50257, 1, 1e4, "f16"},
    {"gpt2-xl", kGpt, 48, 1600, 25, 0, 0, 1024, 50257, 1, 1e4, "f16"},
    {"tiny", kGpt, 2, 64, 4, 0, 0, 32, 256, 4, 1e4, "f32"},
    {"llama2-7b", kLlama, 32, 4096, 32, 32, 11008, 4096, 32000, 1, 1e4, "bf16"},
    {"llama3-8b", kLlama, 32, 4096, 32, 8, 14336, 8192, 128256, 1, 5e5, "bf16"},
    {"tiny-llama", kLlama, 2, 64, 4, 2, 176, 32, 256, 4, 1e4, "f32"},
};

int64_t mlir::dtfm::keyValueHeadsOf(const GptConfig &config) {
  return config.kvHeads ? config.kvHeads : config.heads;
}

int64_t mlir::dtfm::paddedVocabOf(const GptConfig &config) {
  if (config.padVocabTo <= 1 || config.vocab <= 0)
    return config.vocab;
  int64_t padded = 0;
  // Saturated: validateGptConfig refuses such a model as too large.
  if (__builtin_add_overflow(config.vocab,
                             (config.padVocabTo -
                              config.vocab % config.padVocabTo) %
                                 config.padVocabTo,
                             &padded))
    return std::numeric_limits<int64_t>::max();
  return padded;
}

int64_t mlir::dtfm::ffnHiddenOf(const GptConfig &config) {
  if (config.ffnHidden)
    return config.ffnHidden;
  // Saturated: validateGptConfig refuses such a model as too large.
  return config.hidden > std::numeric_limits<int64_t>::max() / 4
             ? std::numeric_limits<int64_t>::max()
             : 4 * config.hidden;
}

const char *mlir::dtfm::decoderArchitectureName(DecoderArchitecture a) {
  return a == DecoderArchitecture::Llama ? "llama" : "gpt";
}

std::optional<DecoderArchitecture>
mlir::dtfm::parseDecoderArchitecture(StringRef name) {
  if (name == "gpt")
    return DecoderArchitecture::Gpt;
  if (name == "llama")
    return DecoderArchitecture::Llama;
  return std::nullopt;
}

std::optional<GptConfig> mlir::dtfm::getGptPreset(StringRef name) {
  for (const Preset &p : kPresets) {
    if (name != p.name)
      continue;
    GptConfig config;
    config.name = p.name;
    config.architecture = p.architecture;
    config.layers = p.layers;
    config.hidden = p.hidden;
    config.heads = p.heads;
    config.kvHeads = p.kvHeads;
    config.ffnHidden = p.ffnHidden;
    config.ropeTheta = p.ropeTheta;
    config.seqLen = p.seqLen;
    config.vocab = p.vocab;
    config.microBatch = p.microBatch;
    config.dtype = p.dtype;
    return config;
  }
  return std::nullopt;
}

std::vector<std::string> mlir::dtfm::getGptPresetNames() {
  std::vector<std::string> names;
  for (const Preset &p : kPresets)
    names.push_back(p.name);
  return names;
}

bool mlir::dtfm::validateGptConfig(const GptConfig &config,
                                   std::string &error) {
  struct Field {
    const char *flag;
    int64_t value;
  } fields[] = {{"layers", config.layers},
                {"hidden", config.hidden},
                {"heads", config.heads},
                {"kv-heads", keyValueHeadsOf(config)},
                {"ffn-hidden", ffnHiddenOf(config)},
                {"seq-len", config.seqLen},
                {"vocab", config.vocab},
                {"pad-vocab", config.padVocabTo},
                {"micro-batch", config.microBatch}};
  for (const Field &f : fields) {
    if (f.value <= 0) {
      error = std::string("--") + f.flag + " must be positive, got " +
              std::to_string(f.value);
      return false;
    }
  }
  // A bound on the graph's size (GPT-3 175B has 96 layers).
  if (config.layers > kMaxGptLayers) {
    error = "--layers must be at most " + std::to_string(kMaxGptLayers) +
            ", got " + std::to_string(config.layers);
    return false;
  }
  if (config.hidden % config.heads != 0) {
    error = "--hidden " + std::to_string(config.hidden) +
            " is not divisible by --heads " + std::to_string(config.heads);
    return false;
  }
  bool llama = config.architecture == DecoderArchitecture::Llama;
  if (!llama && keyValueHeadsOf(config) != config.heads) {
    error = "--kv-heads needs --architecture=llama (GPT's attention has as "
            "many key/value heads as heads)";
    return false;
  }
  if (config.heads % keyValueHeadsOf(config) != 0) {
    error = "--kv-heads " + std::to_string(keyValueHeadsOf(config)) +
            " does not divide --heads " + std::to_string(config.heads);
    return false;
  }
  if (llama && (config.hidden / config.heads) % 2 != 0) {
    error = "the head dimension " +
            std::to_string(config.hidden / config.heads) +
            " is odd; the rotary embedding turns pairs";
    return false;
  }
  if (llama && !(config.ropeTheta > 1 && std::isfinite(config.ropeTheta))) {
    error = "--rope-theta must be finite and greater than 1";
    return false;
  }
  if (config.dtype != "f32" && config.dtype != "f16" &&
      config.dtype != "bf16") {
    error = "--dtype must be f32, f16 or bf16, got '" + config.dtype + "'";
    return false;
  }
  // Keep every tensor's element count, and so every op's cost, well inside
  // int64: the largest tensors are the logits [B, s, V] and the attention
  // probabilities [B, heads, s, s].
  long double logits = (long double)config.microBatch * config.seqLen *
                       std::max(paddedVocabOf(config), ffnHiddenOf(config));
  long double scores = (long double)config.microBatch * config.heads *
                       config.seqLen * config.seqLen;
  long double table = (long double)paddedVocabOf(config) * config.hidden;
  if (std::max({logits, scores, table}) * config.hidden * 8 > 9.0e18L) {
    error = "model too large: a single op's FLOPs would overflow 64 bits";
    return false;
  }
  // And the FLOPs of one micro-batch's training step, summed over the ops
  // (the closed form, with room for what it leaves out).
  if (gptTrainingFlopsClosedForm(config) > 2.0e18) {
    error = "model too large: one micro-batch's training FLOPs would "
            "overflow 64 bits";
    return false;
  }
  return true;
}

int64_t mlir::dtfm::gptParameterCountClosedForm(const GptConfig &c) {
  int64_t h = c.hidden;
  if (c.architecture == DecoderArchitecture::Llama) {
    int64_t kv = h / c.heads * keyValueHeadsOf(c), f = ffnHiddenOf(c);
    return c.layers * (2 * h * h + 2 * h * kv + 3 * h * f + 2 * h) +
           2 * paddedVocabOf(c) * h + h;
  }
  return c.layers * (12 * h * h + 13 * h) +
         (paddedVocabOf(c) + c.seqLen + 2) * h;
}

double mlir::dtfm::gptTrainingFlopsClosedForm(const GptConfig &c) {
  double b = c.microBatch, s = c.seqLen, l = c.layers, h = c.hidden,
         v = static_cast<double>(paddedVocabOf(c)),
         f = static_cast<double>(ffnHiddenOf(c));
  double kv = h / c.heads * static_cast<double>(keyValueHeadsOf(c));
  double mlpMatrices = c.architecture == DecoderArchitecture::Llama ? 3 : 2;
  double layer = 2 * (2 * h * h + 2 * h * kv + mlpMatrices * h * f) + 4 * s * h;
  return 3 * b * s * (l * layer + 2 * h * v);
}

//===----------------------------------------------------------------------===//
// Builder
//===----------------------------------------------------------------------===//

namespace {
class GptBuilder {
public:
  GptBuilder(MLIRContext *context, const GptConfig &config)
      : b(context), config(config) {
    element = llvm::StringSwitch<Type>(config.dtype)
                  .Case("f16", b.getF16Type())
                  .Case("bf16", b.getBF16Type())
                  .Default(b.getF32Type());
  }

  OwningOpRef<ModuleOp> build() {
    Location loc = NameLoc::get(b.getStringAttr(config.name));
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    b.setInsertionPointToEnd(module->getBody());
    auto lossType = RankedTensorType::get({}, b.getF32Type());
    auto func = b.create<func::FuncOp>(loc, funcName(),
                                       b.getFunctionType({}, {lossType}));
    func->setAttr(kModelAttrName, b.getStringAttr(config.name));
    b.setInsertionPointToStart(func.addEntryBlock());

    int64_t bsz = config.microBatch, s = config.seqLen, h = config.hidden;
    bool llama = config.architecture == DecoderArchitecture::Llama;
    layer = "embedding";
    auto tokenType = RankedTensorType::get({bsz, s}, b.getI64Type());
    Value tokens = tag(b.create<InputOp>(at("tokens"), tokenType, "tokens"));
    int64_t vocab = paddedVocabOf(config);
    Value wte = param("wte", {vocab, h}, InitKind::normal, 0.02);
    // Llama's positions are the rotary embedding's.
    Value wpe = llama ? Value() : param("wpe", {s, h}, InitKind::normal, 0.01);
    Value x = tag(b.create<EmbeddingOp>(at("embed"), act({bsz, s, h}), tokens,
                                        wte, IntegerAttr()));
    if (wpe)
      x = tag(b.create<AddOp>(at("embed.add_pos"), act({bsz, s, h}), x, wpe));

    for (int64_t i = 0; i < config.layers; ++i)
      x = llama ? llamaBlock(i, x) : block(i, x);

    layer = "head";
    Value logits;
    if (llama) {
      x = rmsNorm("norm", x);
      logits = linear("lm_head", x, h, vocab, 0.02, /*bias=*/false);
    } else {
      x = layerNorm("ln_f", x);
      logits =
          tag(b.create<MatmulOp>(at("lm_head"), act({bsz, s, vocab}), x,
                                 wte, /*transpose_rhs=*/b.getUnitAttr()));
    }
    auto labelType = RankedTensorType::get({bsz, s}, b.getI64Type());
    Value labels = tag(b.create<LabelOp>(at("labels"), labelType, "labels"));
    // Padding classes take no part in the loss.
    IntegerAttr classes =
        vocab == config.vocab ? IntegerAttr()
                              : b.getI64IntegerAttr(config.vocab);
    Value loss = tag(b.create<CrossEntropyOp>(at("loss"), lossType, logits,
                                              labels, IntegerAttr(), classes));
    b.create<func::ReturnOp>(at("return"), loss);
    return module;
  }

private:
  std::string funcName() const {
    std::string name;
    for (char c : config.name)
      name += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
    return name;
  }

  Location at(const std::string &name) {
    return NameLoc::get(b.getStringAttr(name));
  }

  RankedTensorType act(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, element);
  }

  /// Marks the op with the current layer and returns its first result.
  Value tag(Operation *op) {
    op->setAttr(kLayerAttrName, b.getStringAttr(layer));
    return op->getNumResults() ? op->getResult(0) : Value();
  }

  Value param(const std::string &name, ArrayRef<int64_t> shape, InitKind init,
              std::optional<double> scale = std::nullopt) {
    auto op = b.create<ParamOp>(at(name), act(shape), b.getStringAttr(name),
                                InitKindAttr::get(b.getContext(), init),
                                scale ? b.getF64FloatAttr(*scale) : FloatAttr(),
                                UnitAttr());
    return tag(op);
  }

  Value layerNorm(const std::string &prefix, Value x) {
    int64_t h = config.hidden;
    Value gamma = param(prefix + ".gamma", {h}, InitKind::ones);
    Value beta = param(prefix + ".beta", {h}, InitKind::zeros);
    return tag(b.create<LayerNormOp>(at(prefix), x.getType(), x, gamma, beta,
                                     b.getF64FloatAttr(1e-5)));
  }

  Value rmsNorm(const std::string &prefix, Value x) {
    Value gamma = param(prefix + ".gamma", {config.hidden}, InitKind::ones);
    return tag(b.create<RmsNormOp>(at(prefix), x.getType(), x, gamma,
                                   b.getF64FloatAttr(kRmsNormEpsilon)));
  }

  Value linear(const std::string &prefix, Value x, int64_t in, int64_t out,
               double stddev, bool withBias = true) {
    Value w = param(prefix + ".weight", {in, out}, InitKind::normal, stddev);
    Value bias =
        withBias ? param(prefix + ".bias", {out}, InitKind::zeros) : Value();
    auto inType = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> shape(inType.getShape().drop_back());
    shape.push_back(out);
    return tag(b.create<LinearOp>(at(prefix), act(shape), x, w, bias));
  }

  Value block(int64_t index, Value x) {
    std::string p = "h." + std::to_string(index);
    layer = "layer." + std::to_string(index);
    int64_t h = config.hidden;
    // GPT-2's scaled initialisation of the projections into the residual.
    double residualStd = 0.02 / std::sqrt(2.0 * config.layers);

    Value a = layerNorm(p + ".ln_1", x);
    Value q = linear(p + ".attn.q", a, h, h, 0.02);
    Value k = linear(p + ".attn.k", a, h, h, 0.02);
    Value v = linear(p + ".attn.v", a, h, h, 0.02);
    Value attn = tag(b.create<CausalAttentionOp>(
        at(p + ".attn"), q.getType(), q, k, v,
        b.getI64IntegerAttr(config.heads), IntegerAttr()));
    Value proj = linear(p + ".attn.proj", attn, h, h, residualStd);
    x = tag(b.create<AddOp>(at(p + ".add_1"), x.getType(), x, proj));

    Value m = layerNorm(p + ".ln_2", x);
    int64_t f = ffnHiddenOf(config);
    Value up = linear(p + ".mlp.fc", m, h, f, 0.02);
    Value act = tag(
        b.create<GeluOp>(at(p + ".mlp.gelu"), up.getType(), up, UnitAttr()));
    Value down = linear(p + ".mlp.proj", act, f, h, residualStd);
    return tag(b.create<AddOp>(at(p + ".add_2"), x.getType(), x, down));
  }

  /// A Llama decoder layer: x + o(attn(rope(q), rope(k), v)) over an
  /// RMSNorm, then x + down(silu(gate) * up) over another.
  Value llamaBlock(int64_t index, Value x) {
    std::string p = "layers." + std::to_string(index);
    layer = "layer." + std::to_string(index);
    int64_t h = config.hidden, kvHeads = keyValueHeadsOf(config);
    int64_t kv = h / config.heads * kvHeads, f = ffnHiddenOf(config);
    double residualStd = 0.02 / std::sqrt(2.0 * config.layers);
    auto rope = [&](const std::string &name, Value v, int64_t heads) {
      return tag(b.create<RotaryOp>(at(name), v.getType(), v,
                                    b.getI64IntegerAttr(heads),
                                    b.getF64FloatAttr(config.ropeTheta)));
    };

    Value a = rmsNorm(p + ".attn_norm", x);
    Value q = linear(p + ".attn.q", a, h, h, 0.02, false);
    Value k = linear(p + ".attn.k", a, h, kv, 0.02, false);
    Value v = linear(p + ".attn.v", a, h, kv, 0.02, false);
    q = rope(p + ".attn.rope_q", q, config.heads);
    k = rope(p + ".attn.rope_k", k, kvHeads);
    Value attn = tag(b.create<CausalAttentionOp>(
        at(p + ".attn"), q.getType(), q, k, v,
        b.getI64IntegerAttr(config.heads),
        kvHeads == config.heads ? IntegerAttr()
                                : b.getI64IntegerAttr(kvHeads)));
    Value o = linear(p + ".attn.o", attn, h, h, residualStd, false);
    x = tag(b.create<AddOp>(at(p + ".add_1"), x.getType(), x, o));

    Value m = rmsNorm(p + ".mlp_norm", x);
    Value gate = linear(p + ".mlp.gate", m, h, f, 0.02, false);
    Value up = linear(p + ".mlp.up", m, h, f, 0.02, false);
    Value act =
        tag(b.create<SiluOp>(at(p + ".mlp.silu"), gate.getType(), gate));
    Value gated =
        tag(b.create<MulOp>(at(p + ".mlp.gated"), act.getType(), act, up));
    Value down = linear(p + ".mlp.down", gated, f, h, residualStd, false);
    return tag(b.create<AddOp>(at(p + ".add_2"), x.getType(), x, down));
  }

  OpBuilder b;
  const GptConfig &config;
  Type element;
  std::string layer;
};
} // namespace

OwningOpRef<ModuleOp> mlir::dtfm::buildGptModule(MLIRContext *context,
                                                 const GptConfig &config) {
  context->loadDialect<DtfmDialect, func::FuncDialect>();
  return GptBuilder(context, config).build();
}

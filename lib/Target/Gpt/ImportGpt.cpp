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

using namespace mlir;
using namespace mlir::dtfm;

//===----------------------------------------------------------------------===//
// Presets
//===----------------------------------------------------------------------===//

namespace {
struct Preset {
  const char *name;
  int64_t layers, hidden, heads, seqLen, vocab, microBatch;
  const char *dtype;
};
} // namespace

// GPT-3 sizes from Brown et al. 2020, Table 2.1, where two rows contradict
// themselves and we keep the paper's d_head = 128: for 1.3B the table gives
// d_model 2048 with 24 heads of 128 (24 x 128 = 3072, and 2048/24 is not an
// integer), so we use 2048/128 = 16 heads; for 13B it gives d_model 5140 with
// 40 heads of 128, so we use 40 x 128 = 5120. Heads change neither parameters
// nor matmul FLOPs, only the attention's softmax work. GPT-2 XL from Radford et
// al. 2019. GPT-3 and GPT-2 presets are in f16 (mixed-precision training keeps
// activations in half precision); `tiny` is f32 and trains on a CPU.
static const Preset kPresets[] = {
    {"gpt3-1.3b", 24, 2048, 16, 2048, 50257, 1, "f16"},
    {"gpt3-6.7b", 32, 4096, 32, 2048, 50257, 1, "f16"},
    {"gpt3-13b", 40, 5120, 40, 2048, 50257, 1, "f16"},
    {"gpt3-175b", 96, 12288, 96, 2048, 50257, 1, "f16"},
    {"gpt2-xl", 48, 1600, 25, 1024, 50257, 1, "f16"},
    {"tiny", 2, 64, 4, 32, 256, 4, "f32"},
};

std::optional<GptConfig> mlir::dtfm::getGptPreset(StringRef name) {
  for (const Preset &p : kPresets) {
    if (name != p.name)
      continue;
    GptConfig config;
    config.name = p.name;
    config.layers = p.layers;
    config.hidden = p.hidden;
    config.heads = p.heads;
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
  } fields[] = {{"layers", config.layers}, {"hidden", config.hidden},
                {"heads", config.heads},   {"seq-len", config.seqLen},
                {"vocab", config.vocab},   {"micro-batch", config.microBatch}};
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
  if (config.dtype != "f32" && config.dtype != "f16" &&
      config.dtype != "bf16") {
    error = "--dtype must be f32, f16 or bf16, got '" + config.dtype + "'";
    return false;
  }
  // Keep every tensor's element count, and so every op's cost, well inside
  // int64: the largest tensors are the logits [B, s, V] and the attention
  // probabilities [B, heads, s, s].
  long double logits = (long double)config.microBatch * config.seqLen *
                       std::max(config.vocab, config.hidden * 4);
  long double scores = (long double)config.microBatch * config.heads *
                       config.seqLen * config.seqLen;
  long double table = (long double)config.vocab * config.hidden;
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
  return c.layers * (12 * h * h + 13 * h) + (c.vocab + c.seqLen + 2) * h;
}

double mlir::dtfm::gptTrainingFlopsClosedForm(const GptConfig &c) {
  double b = c.microBatch, s = c.seqLen, l = c.layers, h = c.hidden,
         v = c.vocab;
  return 72.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * l * h));
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
    layer = "embedding";
    auto tokenType = RankedTensorType::get({bsz, s}, b.getI64Type());
    Value tokens = tag(b.create<InputOp>(at("tokens"), tokenType, "tokens"));
    Value wte = param("wte", {config.vocab, h}, InitKind::normal, 0.02);
    Value wpe = param("wpe", {s, h}, InitKind::normal, 0.01);
    Value x = tag(b.create<EmbeddingOp>(at("embed"), act({bsz, s, h}), tokens,
                                        wte, IntegerAttr()));
    x = tag(b.create<AddOp>(at("embed.add_pos"), act({bsz, s, h}), x, wpe));

    for (int64_t i = 0; i < config.layers; ++i)
      x = block(i, x);

    layer = "head";
    x = layerNorm("ln_f", x);
    Value logits =
        tag(b.create<MatmulOp>(at("lm_head"), act({bsz, s, config.vocab}), x,
                               wte, /*transpose_rhs=*/b.getUnitAttr()));
    auto labelType = RankedTensorType::get({bsz, s}, b.getI64Type());
    Value labels = tag(b.create<LabelOp>(at("labels"), labelType, "labels"));
    Value loss = tag(b.create<CrossEntropyOp>(at("loss"), lossType, logits,
                                              labels, IntegerAttr()));
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

  Value linear(const std::string &prefix, Value x, int64_t in, int64_t out,
               double stddev) {
    Value w = param(prefix + ".weight", {in, out}, InitKind::normal, stddev);
    Value bias = param(prefix + ".bias", {out}, InitKind::zeros);
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
    Value attn =
        tag(b.create<CausalAttentionOp>(at(p + ".attn"), q.getType(), q, k, v,
                                        b.getI64IntegerAttr(config.heads)));
    Value proj = linear(p + ".attn.proj", attn, h, h, residualStd);
    x = tag(b.create<AddOp>(at(p + ".add_1"), x.getType(), x, proj));

    Value m = layerNorm(p + ".ln_2", x);
    Value up = linear(p + ".mlp.fc", m, h, 4 * h, 0.02);
    Value act = tag(
        b.create<GeluOp>(at(p + ".mlp.gelu"), up.getType(), up, UnitAttr()));
    Value down = linear(p + ".mlp.proj", act, 4 * h, h, residualStd);
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

//===- Executor.cpp - Run a device program on the CPU ---------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Executor.h"

#include "PlanOps.h"

#include "dtfm/Support/CustomOps.h"

#include "plan.pb.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>

using namespace dtfm::runtime;
using namespace dtfm::runtime::planops;
using cpu::Tensor;

namespace {

uint64_t hashName(uint64_t seed, const std::string &name) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

/// The kind and params of a dtfm.custom op, or of its backward (whose
/// forward attributes travel as dtfm.forward_attrs).
dtfm::CustomOpCall customCall(const dtfm::proto::PlanOp &op,
                              const std::vector<const Tensor *> &operands) {
  dtfm::CustomOpCall call;
  call.kind = stringAttr(op, "kind");
  for (const Tensor *t : operands)
    call.operands.push_back({t->shape, dtfm::DType::F32});
  for (const auto &[key, attr] : op.nested_attrs()) {
    std::string name;
    for (const char *prefix : {"params/", "dtfm.forward_attrs/params/"})
      if (key.rfind(prefix, 0) == 0)
        name = key.substr(std::strlen(prefix));
    if (name.empty() || name.find('/') != std::string::npos)
      continue;
    switch (attr.value_case()) {
    case dtfm::proto::PlanAttr::kI:
      call.params[name] = attr.i();
      break;
    case dtfm::proto::PlanAttr::kF:
      call.params[name] = attr.f();
      break;
    case dtfm::proto::PlanAttr::kS:
      call.params[name] = attr.s();
      break;
    case dtfm::proto::PlanAttr::kInts:
      call.params[name] = std::vector<int64_t>(attr.ints().values().begin(),
                                               attr.ints().values().end());
      break;
    default:
      break;
    }
  }
  return call;
}

/// The registered definition of a custom kind with the kernel wanted.
const dtfm::CustomOpDef *customKernels(const std::string &kind, bool backward,
                                       std::string &error) {
  const dtfm::CustomOpDef *def = dtfm::CustomOpRegistry::global().lookup(kind);
  if (!def) {
    error = "custom op kind '" + kind +
            "' is not registered (load its plugin with --load-dtfm-plugin)";
    return nullptr;
  }
  if (backward ? !def->backward : !def->forward) {
    error = "the plugin of custom op kind '" + kind + "' registers no CPU " +
            (backward ? "backward" : "forward") + " kernel";
    return nullptr;
  }
  return def;
}

dtfm::KernelTensor toKernel(const Tensor &t) { return {t.shape, t.data}; }

/// The gradients of one forward op (see dtfm.backward): recomputes what the
/// backward needs from the forward operands among its inputs.
bool runBackward(const dtfm::proto::PlanOp &op,
                 std::map<int64_t, Tensor> &values, std::string &error) {
  std::string forward = stringAttr(op, "forward");
  const dtfm::proto::PlanAttr *wrtAttr = findAttr(op, "wrt");
  if (!wrtAttr || wrtAttr->value_case() != dtfm::proto::PlanAttr::kInts) {
    error = "dtfm.backward without wrt";
    return false;
  }
  std::vector<int64_t> wrt(wrtAttr->ints().values().begin(),
                           wrtAttr->ints().values().end());
  bool isLoss = forward == "dtfm.cross_entropy";
  int numOperands = op.operands_size() - (isLoss ? 0 : 1);
  auto in = [&](int i) -> const Tensor & { return values.at(op.operands(i)); };
  const Tensor *dOut = isLoss ? nullptr : &in(op.operands_size() - 1);
  std::vector<Tensor> grads(numOperands);
  std::vector<Tensor *> want(numOperands, nullptr);
  for (int64_t index : wrt) {
    if (index < 0 || index >= numOperands) {
      error = "dtfm.backward wrt index out of range";
      return false;
    }
    grads[index] = Tensor(in(index).shape);
    want[index] = &grads[index];
  }
  auto at = [&](int i) { return i < numOperands ? want[i] : nullptr; };
  if (forward == "dtfm.linear") {
    cpu::linearBackward(in(0), in(1), *dOut, at(0), at(1),
                        numOperands > 2 ? at(2) : nullptr);
  } else if (forward == "dtfm.matmul") {
    cpu::matmulBackward(in(0), in(1), unitAttr(op, "transpose_rhs"), *dOut,
                        at(0), at(1));
  } else if (forward == "dtfm.add") {
    cpu::addBackward(*dOut, at(0), at(1));
  } else if (forward == "dtfm.sqrt" || forward == "dtfm.tanh" ||
             forward == "dtfm.erf" || forward == "dtfm.exp") {
    cpu::elementwiseMathBackward(in(0), forward.substr(5), *dOut, at(0));
  } else if (forward == "dtfm.pow") {
    cpu::powerBackward(in(0), floatAttr(op, "exponent", 1), *dOut, at(0));
  } else if (forward == "dtfm.reduce_mean") {
    cpu::reduceMeanBackward(in(0), intsAttr(op, "axes", {}), *dOut, at(0));
  } else if (forward == "dtfm.concat") {
    std::vector<Tensor *> parts;
    std::vector<Tensor> unwanted;
    unwanted.reserve(numOperands);
    for (int i = 0; i < numOperands; ++i) {
      unwanted.emplace_back(in(i).shape);
      parts.push_back(at(i) ? at(i) : &unwanted.back());
    }
    cpu::concatBackward(*dOut, intAttr(op, "axis", 0), parts);
  } else if (forward == "dtfm.gather") {
    cpu::gatherBackward(in(0), in(1), intAttr(op, "axis", 0), *dOut, at(0));
  } else if (forward == "dtfm.where") {
    cpu::whereBackward(in(0), *dOut, at(1), at(2));
  } else if (forward == "dtfm.slice") {
    cpu::sliceBackward(in(0), intsAttr(op, "starts", {}),
                       intsAttr(op, "steps", {}), *dOut, at(0));
  } else if (forward == "dtfm.transpose") {
    cpu::transposeBackward(*dOut, intsAttr(op, "perm", {}), at(0));
  } else if (forward == "dtfm.sub") {
    cpu::subBackward(in(0), in(1), *dOut, at(0), at(1));
  } else if (forward == "dtfm.mul") {
    cpu::mulBackward(in(0), in(1), *dOut, at(0), at(1));
  } else if (forward == "dtfm.div") {
    cpu::divBackward(in(0), in(1), *dOut, at(0), at(1));
  } else if (forward == "dtfm.layernorm") {
    std::vector<float> mean, rstd;
    cpu::layerNorm(in(0), in(1), in(2), floatAttr(op, "epsilon", 1e-5), mean,
                   rstd);
    cpu::layerNormBackward(in(0), in(1), mean, rstd, *dOut, at(0), at(1),
                           at(2));
  } else if (forward == "dtfm.gelu") {
    cpu::geluBackward(in(0), unitAttr(op, "tanh_approximation"), *dOut, at(0));
  } else if (forward == "dtfm.relu") {
    cpu::reluBackward(cpu::relu(in(0)), *dOut, at(0));
  } else if (forward == "dtfm.softmax") {
    cpu::softmaxBackward(cpu::softmax(in(0)), *dOut, at(0));
  } else if (forward == "dtfm.causal_attention") {
    Tensor probs;
    int64_t heads = intAttr(op, "num_heads", 1);
    cpu::causalAttention(in(0), in(1), in(2), heads, probs);
    cpu::causalAttentionBackward(in(0), in(1), in(2), heads, probs, *dOut,
                                 at(0), at(1), at(2));
  } else if (forward == "dtfm.embedding") {
    cpu::embeddingBackward(in(0), *dOut, at(1));
  } else if (forward == "dtfm.cross_entropy") {
    Tensor probs;
    cpu::crossEntropy(in(0), in(1), probs);
    cpu::crossEntropyBackward(probs, in(1), 1.0f, at(0));
  } else if (forward == "dtfm.conv2d") {
    cpu::conv2dBackward(in(0), in(1), windowOf(op), intAttr(op, "groups", 1),
                        *dOut, at(0), at(1), numOperands > 2 ? at(2) : nullptr);
  } else if (forward == "dtfm.batchnorm") {
    cpu::batchNormBackward(in(0), in(1), floatAttr(op, "epsilon", 1e-5), *dOut,
                           at(0), at(1), at(2));
  } else if (forward == "dtfm.max_pool2d" || forward == "dtfm.avg_pool2d") {
    std::vector<int64_t> kernel = intsAttr(op, "kernel", {1, 1});
    if (forward == "dtfm.max_pool2d")
      cpu::maxPool2dBackward(in(0), kernel[0], kernel[1], windowOf(op), *dOut,
                             at(0));
    else
      cpu::avgPool2dBackward(in(0), kernel[0], kernel[1], windowOf(op), *dOut,
                             at(0));
  } else if (forward == "dtfm.global_avg_pool") {
    cpu::globalAvgPoolBackward(in(0), *dOut, at(0));
  } else if (forward == "dtfm.reshape" || forward == "dtfm.flatten") {
    if (at(0)) {
      grads[0].data = dOut->data;
    }
  } else if (forward == "dtfm.custom") {
    std::vector<const Tensor *> operands;
    for (int i = 0; i < numOperands; ++i)
      operands.push_back(&in(i));
    dtfm::CustomOpCall call = customCall(op, operands);
    const dtfm::CustomOpDef *def = customKernels(call.kind, true, error);
    if (!def)
      return false;
    std::vector<dtfm::KernelTensor> inputs, operandGrads;
    std::vector<const dtfm::KernelTensor *> views;
    std::vector<bool> wanted(numOperands, false);
    for (int i = 0; i < numOperands; ++i) {
      inputs.push_back(toKernel(in(i)));
      operandGrads.push_back(toKernel(Tensor(in(i).shape)));
      wanted[i] = at(i) != nullptr;
    }
    for (const dtfm::KernelTensor &t : inputs)
      views.push_back(&t);
    if (!def->backward(call, views, toKernel(*dOut), wanted, operandGrads,
                       error)) {
      error = "custom op '" + call.kind + "' backward: " + error;
      return false;
    }
    for (int i = 0; i < numOperands; ++i)
      if (at(i)) {
        if (operandGrads[i].data.size() != grads[i].data.size()) {
          error = "custom op '" + call.kind +
                  "' backward resized the gradient of operand " +
                  std::to_string(i);
          return false;
        }
        grads[i].data = std::move(operandGrads[i].data);
      }
  } else {
    error = "no CPU backward for " + forward + " yet";
    return false;
  }
  for (size_t k = 0; k < wrt.size(); ++k) {
    Tensor g = std::move(grads[wrt[k]]);
    g.shape = shapeOf(op.results(k));
    values[op.results(k).id()] = std::move(g);
  }
  return true;
}

} // namespace

StageExecutor::~StageExecutor() = default;

ProgramExecutor::ProgramExecutor(const proto::DeviceProgram &program)
    : program(program) {}

std::vector<InputSpec> ProgramExecutor::inputs() const {
  std::vector<InputSpec> specs;
  for (const proto::PlanOp &op : program.ops())
    if ((op.name() == "dtfm.input" || op.name() == "dtfm.label") &&
        op.results_size() == 1)
      specs.push_back({stringAttr(op, "name"), shapeOf(op.results(0)),
                       op.name() == "dtfm.label",
                       op.results(0).dtype()[0] == 'i',
                       op.results(0).dtype() == "i1"});
  return specs;
}

bool ProgramExecutor::initialize(
    uint64_t seed, std::string &error,
    const std::map<std::string, Tensor> *weights) {
  params.clear();
  for (const proto::PlanOp &op : program.ops()) {
    if (op.name() != "dtfm.param")
      continue;
    std::string name = stringAttr(op, "name");
    Tensor t(shapeOf(op.results(0)));
    int64_t init = intAttr(op, "init", -1);
    double scale = floatAttr(op, "scale", 0);
    std::mt19937_64 rng(hashName(seed, name));
    switch (init) {
    case 0: // zeros
      break;
    case 1: // ones
      std::fill(t.data.begin(), t.data.end(), 1.0f);
      break;
    case 2: // constant
      std::fill(t.data.begin(), t.data.end(), static_cast<float>(scale));
      break;
    case 3: { // normal
      std::normal_distribution<double> normal(0, scale);
      for (float &x : t.data)
        x = static_cast<float>(normal(rng));
      break;
    }
    case 4: { // uniform
      std::uniform_real_distribution<double> uniform(-scale, scale);
      for (float &x : t.data)
        x = static_cast<float>(uniform(rng));
      break;
    }
    case 5: { // external: the plan's weights file
      auto it = weights ? weights->find(name) : decltype(weights->end()){};
      if (!weights || it == weights->end()) {
        error = "parameter '" + name + "' takes its values from the weights "
                "file, which " +
                (weights ? "has no tensor of that name"
                         : "the plan does not name (dtfm.weights)");
        return false;
      }
      if (it->second.shape != t.shape) {
        error = "parameter '" + name + "' has another shape in the weights "
                "file";
        return false;
      }
      t = it->second;
      break;
    }
    default:
      error = "parameter '" + name + "' has an unknown initializer";
      return false;
    }
    params[name] = std::move(t);
  }
  optimizer.clear();
  return true;
}

bool ProgramExecutor::loadParameters(const std::string &path,
                                     std::string &error) {
  std::map<std::string, Tensor> loaded;
  if (!format::readTensorFile(path, loaded, error))
    return false;
  for (const proto::PlanOp &op : program.ops()) {
    if (op.name() != "dtfm.param")
      continue;
    std::string name = stringAttr(op, "name");
    auto it = loaded.find(name);
    if (it == loaded.end()) {
      error = path + ": no parameter '" + name + "'";
      return false;
    }
    if (it->second.shape != shapeOf(op.results(0))) {
      error = path + ": parameter '" + name + "' has the wrong shape";
      return false;
    }
    params[name] = it->second;
  }
  optimizer.clear();
  return true;
}

bool ProgramExecutor::saveParameters(const std::string &path,
                                     std::string &error) const {
  return format::writeTensorFile(path, params, error);
}

std::map<std::string, Tensor> ProgramExecutor::state() const {
  std::map<std::string, Tensor> out;
  for (const auto &[name, t] : params)
    out["param/" + name] = t;
  for (const auto &[name, s] : optimizer) {
    if (!s.m.data.empty())
      out["opt.m/" + name] = s.m;
    if (!s.v.data.empty())
      out["opt.v/" + name] = s.v;
    if (!s.velocity.data.empty())
      out["opt.velocity/" + name] = s.velocity;
    // Steps are small integers: exact in fp32.
    out["opt.step/" + name] = Tensor({1}, static_cast<float>(s.step));
  }
  return out;
}

bool ProgramExecutor::restoreState(const std::map<std::string, Tensor> &state,
                                   std::string &error) {
  std::map<std::string, Tensor> restored;
  for (const proto::PlanOp &op : program.ops()) {
    if (op.name() != "dtfm.param")
      continue;
    std::string name = stringAttr(op, "name");
    auto it = state.find("param/" + name);
    if (it == state.end() || it->second.shape != shapeOf(op.results(0))) {
      error = "no parameter '" + name + "' of the right shape";
      return false;
    }
    restored[name] = it->second;
  }
  std::map<std::string, OptimizerState> restoredOptimizer;
  for (const auto &[key, t] : state) {
    size_t slash = key.find('/');
    std::string kind = key.substr(0, slash), name = key.substr(slash + 1);
    if (kind == "param")
      continue;
    if (!restored.count(name)) {
      error = "optimizer state for unknown parameter '" + name + "'";
      return false;
    }
    OptimizerState &s = restoredOptimizer[name];
    if (kind == "opt.m")
      s.m = t;
    else if (kind == "opt.v")
      s.v = t;
    else if (kind == "opt.velocity")
      s.velocity = t;
    else if (kind == "opt.step" && t.numel() == 1)
      s.step = static_cast<int64_t>(t.data[0]);
    else {
      error = "unknown state entry '" + key + "'";
      return false;
    }
  }
  params = std::move(restored);
  optimizer = std::move(restoredOptimizer);
  return true;
}

bool ProgramExecutor::runPhase(const std::string &phase, int /*microBatch*/,
                               ValueTable &values, const MicroBatch &batch,
                               double &loss, std::string &error) {
  int index = -1;
  auto fail = [&](const proto::PlanOp &op, const std::string &message) {
    error = "op #" + std::to_string(index) + " " + op.name() + ": " + message;
    return false;
  };
  auto operand = [&](const proto::PlanOp &op, int i) -> const Tensor & {
    return values.at(op.operands(i));
  };
  auto set = [&](const proto::PlanOp &op, int i, Tensor t) {
    t.shape = shapeOf(op.results(i)); // views (reshape) adopt their type
    values[op.results(i).id()] = std::move(t);
  };
  for (const proto::PlanOp &op : program.ops()) {
    ++index;
    const std::string &name = op.name();
    if (phaseOf(op) != phase || name == "dtfm.send")
      continue;
    if (name == "dtfm.recv") { // filled by the receive slot
      if (!values.count(op.results(0).id()))
        return fail(op, "its value was never received");
      continue;
    }
    for (int i = 0; i < op.operands_size(); ++i)
      if (!values.count(op.operands(i)))
        return fail(op, "operand " + std::to_string(i) +
                            " was not computed in this phase");
    if (name == "dtfm.param") {
      std::string p = stringAttr(op, "name");
      values[op.results(0).id()] = params.at(p);
      paramOfValue[op.results(0).id()] = p;
    } else if (name == "dtfm.input" || name == "dtfm.label") {
      auto it = batch.find(stringAttr(op, "name"));
      if (it == batch.end())
        return fail(op, "no data for '" + stringAttr(op, "name") + "'");
      if (it->second.shape != shapeOf(op.results(0)))
        return fail(op, "data for '" + it->first + "' has the wrong shape");
      values[op.results(0).id()] = it->second;
    } else if (name == "dtfm.constant") {
      Tensor t(shapeOf(op.results(0)));
      std::vector<int64_t> elements = intsAttr(op, "values", {});
      if (static_cast<int64_t>(elements.size()) != t.numel())
        return fail(op, "has the wrong number of values");
      std::copy(elements.begin(), elements.end(), t.data.begin());
      values[op.results(0).id()] = std::move(t);
    } else if (name == "dtfm.gather") {
      Tensor out;
      std::string why;
      if (!cpu::gather(operand(op, 0), operand(op, 1), intAttr(op, "axis", 0),
                       out, why))
        return fail(op, why);
      set(op, 0, std::move(out));
    } else if (name == "dtfm.where") {
      set(op, 0, cpu::where(operand(op, 0), operand(op, 1), operand(op, 2)));
    } else if (name == "dtfm.embedding") {
      set(op, 0, cpu::embedding(operand(op, 0), operand(op, 1)));
    } else if (name == "dtfm.add") {
      set(op, 0, cpu::add(operand(op, 0), operand(op, 1)));
    } else if (name == "dtfm.sqrt" || name == "dtfm.tanh" ||
               name == "dtfm.erf" || name == "dtfm.exp") {
      set(op, 0, cpu::elementwiseMath(operand(op, 0), name.substr(5)));
    } else if (name == "dtfm.pow") {
      set(op, 0, cpu::power(operand(op, 0), floatAttr(op, "exponent", 1)));
    } else if (name == "dtfm.reduce_mean") {
      set(op, 0, cpu::reduceMean(operand(op, 0), intsAttr(op, "axes", {}),
                                 unitAttr(op, "keepdims")));
    } else if (name == "dtfm.concat") {
      std::vector<const Tensor *> parts;
      for (int i = 0; i < op.operands_size(); ++i)
        parts.push_back(&operand(op, i));
      set(op, 0, cpu::concat(parts, intAttr(op, "axis", 0)));
    } else if (name == "dtfm.slice") {
      set(op, 0, cpu::slice(operand(op, 0), intsAttr(op, "starts", {}),
                            intsAttr(op, "ends", {}),
                            intsAttr(op, "steps", {})));
    } else if (name == "dtfm.transpose") {
      set(op, 0, cpu::transpose(operand(op, 0), intsAttr(op, "perm", {})));
    } else if (name == "dtfm.sub") {
      set(op, 0, cpu::sub(operand(op, 0), operand(op, 1)));
    } else if (name == "dtfm.mul") {
      set(op, 0, cpu::mul(operand(op, 0), operand(op, 1)));
    } else if (name == "dtfm.div") {
      set(op, 0, cpu::div(operand(op, 0), operand(op, 1)));
    } else if (name == "dtfm.linear") {
      const Tensor *bias = op.operands_size() > 2 ? &operand(op, 2) : nullptr;
      set(op, 0, cpu::linear(operand(op, 0), operand(op, 1), bias));
    } else if (name == "dtfm.matmul") {
      set(op, 0, cpu::matmul(operand(op, 0), operand(op, 1),
                             unitAttr(op, "transpose_rhs")));
    } else if (name == "dtfm.layernorm") {
      std::vector<float> mean, rstd;
      set(op, 0, cpu::layerNorm(operand(op, 0), operand(op, 1),
                                operand(op, 2),
                                floatAttr(op, "epsilon", 1e-5), mean, rstd));
    } else if (name == "dtfm.gelu") {
      set(op, 0, cpu::gelu(operand(op, 0), unitAttr(op, "tanh_approximation")));
    } else if (name == "dtfm.relu") {
      set(op, 0, cpu::relu(operand(op, 0)));
    } else if (name == "dtfm.softmax") {
      int64_t axis = intAttr(op, "axis", -1);
      int64_t rank = static_cast<int64_t>(operand(op, 0).shape.size());
      if (axis != -1 && axis != rank - 1)
        return fail(op, "only the last axis is supported");
      set(op, 0, cpu::softmax(operand(op, 0)));
    } else if (name == "dtfm.causal_attention") {
      Tensor probs;
      set(op, 0, cpu::causalAttention(operand(op, 0), operand(op, 1),
                                      operand(op, 2),
                                      intAttr(op, "num_heads", 1), probs));
    } else if (name == "dtfm.cross_entropy") {
      Tensor probs;
      float l = cpu::crossEntropy(operand(op, 0), operand(op, 1), probs);
      loss += l;
      set(op, 0, Tensor({}, l));
    } else if (name == "dtfm.reshape" || name == "dtfm.flatten") {
      set(op, 0, operand(op, 0));
    } else if (name == "dtfm.conv2d") {
      const Tensor *bias = op.operands_size() > 2 ? &operand(op, 2) : nullptr;
      set(op, 0, cpu::conv2d(operand(op, 0), operand(op, 1), bias,
                             windowOf(op), intAttr(op, "groups", 1)));
    } else if (name == "dtfm.batchnorm") {
      // The running statistics are frozen parameters: updated in place.
      Tensor *mean = nullptr, *var = nullptr;
      auto pm = paramOfValue.find(op.operands(3));
      auto pv = paramOfValue.find(op.operands(4));
      if (pm != paramOfValue.end())
        mean = &params.at(pm->second);
      if (pv != paramOfValue.end())
        var = &params.at(pv->second);
      set(op, 0, cpu::batchNorm(operand(op, 0), operand(op, 1),
                                operand(op, 2),
                                floatAttr(op, "epsilon", 1e-5), mean, var,
                                floatAttr(op, "momentum", 0.1)));
    } else if (name == "dtfm.max_pool2d" || name == "dtfm.avg_pool2d") {
      std::vector<int64_t> kernel = intsAttr(op, "kernel", {1, 1});
      set(op, 0, name == "dtfm.max_pool2d"
                     ? cpu::maxPool2d(operand(op, 0), kernel[0], kernel[1],
                                      windowOf(op))
                     : cpu::avgPool2d(operand(op, 0), kernel[0], kernel[1],
                                      windowOf(op)));
    } else if (name == "dtfm.global_avg_pool") {
      set(op, 0, cpu::globalAvgPool(operand(op, 0)));
    } else if (name == "dtfm.accumulate") {
      Tensor sum = operand(op, 0);
      for (int i = 1; i < op.operands_size(); ++i) {
        const std::vector<float> &term = operand(op, i).data;
        for (size_t j = 0; j < sum.data.size(); ++j)
          sum.data[j] += term[j];
      }
      set(op, 0, std::move(sum));
    } else if (name == "dtfm.custom") {
      std::vector<const Tensor *> operands;
      for (int i = 0; i < op.operands_size(); ++i)
        operands.push_back(&operand(op, i));
      dtfm::CustomOpCall call = customCall(op, operands);
      const dtfm::CustomOpDef *def = customKernels(call.kind, false, error);
      if (!def)
        return fail(op, error);
      std::vector<dtfm::KernelTensor> inputs, results;
      std::vector<const dtfm::KernelTensor *> views;
      for (const Tensor *t : operands)
        inputs.push_back(toKernel(*t));
      for (const dtfm::KernelTensor &t : inputs)
        views.push_back(&t);
      for (const proto::PlanValue &r : op.results())
        results.push_back(toKernel(Tensor(shapeOf(r))));
      if (!def->forward(call, views, results, error))
        return fail(op, "'" + call.kind + "': " + error);
      if (results.size() != static_cast<size_t>(op.results_size()))
        return fail(op, "'" + call.kind + "' kernel changed the result count");
      for (int i = 0; i < op.results_size(); ++i) {
        if (results[i].data.size() !=
            static_cast<size_t>(Tensor(shapeOf(op.results(i))).numel()))
          return fail(op, "'" + call.kind + "' kernel resized result " +
                              std::to_string(i));
        Tensor t;
        t.shape = results[i].shape;
        t.data = std::move(results[i].data);
        set(op, i, std::move(t));
      }
    } else if (name == "dtfm.topk_compress") {
      Tensor kept, indices;
      cpu::topK(operand(op, 0), intAttr(op, "k", 1), kept, indices);
      set(op, 0, std::move(kept));
      set(op, 1, std::move(indices));
    } else if (name == "dtfm.topk_decompress") {
      set(op, 0, cpu::scatterTopK(operand(op, 0), operand(op, 1),
                                  shapeOf(op.results(0))));
    } else if (name == "dtfm.backward") {
      if (!runBackward(op, values, error))
        return fail(op, error);
    } else {
      return fail(op, "no CPU kernel for this op yet");
    }
  }
  return true;
}

void ProgramExecutor::collectGradients(int /*microBatch*/,
                                       const ValueTable &values) {
  for (const proto::PlanOp &op : program.ops()) {
    if (phaseOf(op) != "opt")
      continue;
    for (int64_t id : op.operands()) {
      auto it = values.find(id);
      if (it == values.end() || paramOfValue.count(id))
        continue;
      Tensor &sum = gradSum[id];
      if (sum.shape != it->second.shape)
        sum = Tensor(it->second.shape);
      for (int64_t j = 0; j < sum.numel(); ++j)
        sum.data[j] += it->second.data[j];
    }
  }
}

bool ProgramExecutor::finishIteration(int microBatches, const SyncFn &sync,
                                      std::string &error) {
  ValueTable values;
  auto fail = [&](const proto::PlanOp &op, const std::string &message) {
    error = op.name() + ": " + message;
    return false;
  };
  double scale = 1.0 / static_cast<double>(std::max(1, microBatches));
  for (auto &[id, sum] : gradSum) {
    for (float &x : sum.data)
      x = static_cast<float>(x * scale);
    values[id] = std::move(sum);
  }
  gradSum.clear();
  // Gradient syncs first, all in one bucket.
  std::vector<std::pair<const proto::PlanOp *, Tensor *>> synced;
  for (const proto::PlanOp &op : program.ops()) {
    if (phaseOf(op) != "opt" || op.name() != "dtfm.grad_sync")
      continue;
    auto in = values.find(op.operands(0));
    if (in == values.end())
      return fail(op, "its gradient was never computed");
    values[op.results(0).id()] = in->second;
  }
  for (const proto::PlanOp &op : program.ops())
    if (phaseOf(op) == "opt" && op.name() == "dtfm.grad_sync")
      synced.push_back({&op, &values.at(op.results(0).id())});
  if (sync && !synced.empty() && !sync(synced, error))
    return false;
  for (const proto::PlanOp &op : program.ops()) {
    if (phaseOf(op) != "opt" || op.name() == "dtfm.grad_sync")
      continue;
    OptimizerUpdate update;
    if (!readUpdate(op, paramOfValue, update, error))
      return fail(op, error);
    Tensor &param = params.at(update.parameter);
    const Tensor &grad = values.at(op.operands(1));
    OptimizerState &state = optimizer[update.parameter];
    ++state.step;
    if (update.adamw)
      cpu::adamwStep(param, grad, state.m, state.v, state.step, update.lr,
                     update.beta1, update.beta2, update.epsilon,
                     update.weightDecay);
    else
      cpu::sgdStep(param, grad, state.velocity, update.lr, update.momentum,
                   update.weightDecay);
  }
  return true;
}

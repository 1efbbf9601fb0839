//===- Executor.cpp - The phase loop, the host state, the CPU executor ----===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Executor.h"
#include "dtfm/Runtime/Checkpoints.h"
#include "dtfm/Runtime/Cpu/KernelTable.h"
#include "dtfm/Support/Hash.h"

#include <algorithm>
#include <atomic>
#include <ctime>
#include <malloc.h>
#include <random>
#include <vector>

using namespace dtfm::runtime;
using cpu::Tensor;

StageExecutor::~StageExecutor() = default;

double dtfm::runtime::threadCpuSeconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double StageExecutor::measureMemoryBandwidth() {
  // 3 x 32 MiB: beyond any CPU's last-level cache.
  constexpr size_t kElements = size_t(8) << 20;
  std::vector<float> a(kElements, 1.0f), b(kElements, 2.0f), c(kElements);
  double best = 0;
  for (int run = 0; run < 3; ++run) {
    double start = threadCpuSeconds();
    for (size_t i = 0; i < kElements; ++i)
      c[i] = a[i] + 0.5f * b[i];
    double seconds = threadCpuSeconds() - start;
    // Two arrays read, one written (the write's line fill not counted).
    if (seconds > 0)
      best = std::max(best, 3.0 * sizeof(float) * kElements / seconds);
    volatile float kept = c[kElements / 2]; // the loop's result is used
    (void)kept;
    std::swap(a, c);
  }
  return best;
}

//===----------------------------------------------------------------------===//
// Host state
//===----------------------------------------------------------------------===//

static uint64_t hashName(uint64_t seed, const std::string &name) {
  return dtfm::fnv1a(name, dtfm::kFnv1aOffset ^ seed);
}

bool HostState::initialize(const StageProgram &program, uint64_t seed,
                           const std::map<std::string, Tensor> *weights,
                           std::string &error) {
  params.clear();
  for (const ProgramOp &op : program.ops) {
    if (op.kind != OpKind::Param)
      continue;
    const std::string &name = op.attrs.name;
    // A tensor-parallel shard is the slice of the whole tensor's values.
    Tensor t(wholeShape(op));
    double scale = op.attrs.scale;
    std::mt19937_64 rng(hashName(seed, name));
    switch (op.attrs.init) {
    case ParamInit::Zeros:
      break;
    case ParamInit::Ones:
      std::fill(t.data.begin(), t.data.end(), 1.0f);
      break;
    case ParamInit::Constant:
      std::fill(t.data.begin(), t.data.end(), static_cast<float>(scale));
      break;
    case ParamInit::Normal: {
      std::normal_distribution<double> normal(0, scale);
      for (float &x : t.data)
        x = static_cast<float>(normal(rng));
      break;
    }
    case ParamInit::Uniform: {
      std::uniform_real_distribution<double> uniform(-scale, scale);
      for (float &x : t.data)
        x = static_cast<float>(uniform(rng));
      break;
    }
    case ParamInit::External: { // the plan's weights file
      auto it = weights ? weights->find(name) : decltype(weights->end()){};
      if (!weights || it == weights->end()) {
        error = "parameter '" + name +
                "' takes its values from the weights "
                "file, which " +
                (weights ? "has no tensor of that name"
                         : "the plan does not name (dtfm.weights)");
        return false;
      }
      if (it->second.shape != t.shape) {
        error = "parameter '" + name +
                "' has another shape in the weights "
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
    params[name] = programSlice(program, op, std::move(t));
  }
  optimizer.clear();
  return true;
}

bool HostState::load(const StageProgram &program, const std::string &path,
                     std::string &error) {
  std::map<std::string, Tensor> loaded;
  if (!format::readTensorFile(path, loaded, error))
    return false;
  for (const ProgramOp &op : program.ops) {
    if (op.kind != OpKind::Param)
      continue;
    const std::string &name = op.attrs.name;
    auto it = loaded.find(name);
    if (it == loaded.end()) {
      error = path + ": no parameter '" + name + "'";
      return false;
    }
    // Parameter files hold whole tensors; a shard takes its slice.
    if (it->second.shape != wholeShape(op)) {
      error = path + ": parameter '" + name + "' has the wrong shape";
      return false;
    }
    params[name] = programSlice(program, op, it->second);
  }
  optimizer.clear();
  return true;
}

std::map<std::string, Tensor> HostState::state() const {
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
    if (!s.anchor.data.empty())
      out["opt.anchor/" + name] = s.anchor;
    if (!s.outerVelocity.data.empty())
      out["opt.outer_velocity/" + name] = s.outerVelocity;
    if (!s.residual.data.empty())
      out["opt.residual/" + name] = s.residual;
    // Steps are small integers: exact in fp32.
    out["opt.step/" + name] = Tensor({1}, static_cast<float>(s.step));
  }
  return out;
}

bool HostState::restore(const StageProgram &program,
                        const std::map<std::string, Tensor> &state,
                        std::string &error) {
  std::map<std::string, Tensor> restored;
  for (const ProgramOp &op : program.ops) {
    if (op.kind != OpKind::Param)
      continue;
    const std::string &name = op.attrs.name;
    auto it = state.find("param/" + name);
    if (it == state.end() || it->second.shape != op.results[0].shape) {
      error = "no parameter '" + name + "' of the right shape";
      return false;
    }
    restored[name] = it->second;
  }
  std::map<std::string, Moments> restoredOptimizer;
  std::map<std::string, ElementRange> shards = shardedParameters(program);
  std::map<std::string, TensorParallelSlice> slices =
      tensorParallelSlices(program);
  for (const auto &[key, t] : state) {
    size_t slash = key.find('/');
    std::string kind = key.substr(0, slash), name = key.substr(slash + 1);
    if (kind == "param")
      continue;
    if (kind == "shard") {
      // Written beside a sharded parameter's moments: it must be this
      // device's shard.
      auto mine = shards.find(name);
      std::optional<ElementRange> range = decodeShard(t);
      if (mine == shards.end() || !range ||
          range->begin != mine->second.begin ||
          range->end != mine->second.end) {
        error = "state entry '" + key + "' is not this device's shard";
        return false;
      }
      continue;
    }
    if (kind == "tp") {
      // Written beside a tensor-parallel slice: it must be this device's.
      auto mine = slices.find(name);
      std::optional<TensorParallelSlice> slice = decodeSlice(t);
      if (mine == slices.end() || !slice || slice->dim != mine->second.dim ||
          slice->rank != mine->second.rank ||
          slice->degree != mine->second.degree) {
        error = "state entry '" + key + "' is not this device's slice";
        return false;
      }
      continue;
    }
    if (!restored.count(name)) {
      error = "optimizer state for unknown parameter '" + name + "'";
      return false;
    }
    Moments &s = restoredOptimizer[name];
    bool tensor = kind == "opt.m" || kind == "opt.v" ||
                  kind == "opt.velocity" || kind == "opt.anchor" ||
                  kind == "opt.outer_velocity" || kind == "opt.residual";
    // A sharded parameter's moments cover its shard, flat.
    auto shard = shards.find(name);
    bool moment = kind == "opt.m" || kind == "opt.v" || kind == "opt.velocity";
    if (tensor && moment && shard != shards.end()) {
      if (t.shape != std::vector<int64_t>{shard->second.size()}) {
        error = "state entry '" + key + "' does not have the shape of " +
                "this device's shard of its parameter (" +
                std::to_string(shard->second.size()) + " elements)";
        return false;
      }
    } else if (tensor && t.shape != restored[name].shape) {
      error = "state entry '" + key + "' does not have its parameter's shape";
      return false;
    }
    if (kind == "opt.m")
      s.m = t;
    else if (kind == "opt.v")
      s.v = t;
    else if (kind == "opt.velocity")
      s.velocity = t;
    else if (kind == "opt.anchor")
      s.anchor = t;
    else if (kind == "opt.outer_velocity")
      s.outerVelocity = t;
    else if (kind == "opt.residual")
      s.residual = t;
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

std::vector<InputSpec>
dtfm::runtime::programInputs(const StageProgram &program) {
  std::vector<InputSpec> specs;
  for (const ProgramOp &op : program.ops)
    if ((op.kind == OpKind::Input || op.kind == OpKind::Label) &&
        op.results.size() == 1) {
      ElementType type = op.results[0].type;
      bool integer = type == ElementType::I1 || type == ElementType::I32 ||
                     type == ElementType::I64;
      specs.push_back({op.attrs.name, op.results[0].shape,
                       op.kind == OpKind::Label, integer,
                       type == ElementType::I1});
    }
  return specs;
}

//===----------------------------------------------------------------------===//
// The phase loop
//===----------------------------------------------------------------------===//

static std::atomic<bool> heapPeakEnabled{false};
static std::atomic<int64_t> heapPeak{0};

int64_t dtfm::runtime::heapInUseBytes() {
  struct mallinfo2 info = ::mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
}

void dtfm::runtime::enableHeapPeak() { heapPeakEnabled = true; }

void dtfm::runtime::sampleHeapPeak() {
  if (!heapPeakEnabled)
    return;
  int64_t now = heapInUseBytes();
  int64_t seen = heapPeak.load();
  while (now > seen && !heapPeak.compare_exchange_weak(seen, now)) {
  }
}

int64_t dtfm::runtime::heapPeakBytes() { return heapPeak.load(); }

bool PhaseExecutor::runPhase(OpPhase phase, int microBatch, ValueTable &values,
                             const MicroBatch &batch, double &loss,
                             std::string &error) {
  if (!beginPhase(phase, microBatch, values, error))
    return false;
  int p = phase == OpPhase::Backward ? 1 : 0;
  const std::vector<PhaseStep> &steps = program.steps[p];
  for (size_t position = 0; position < steps.size(); ++position) {
    const ProgramOp &op = program.ops[steps[position].op];
    auto fail = [&](const std::string &message) {
      error = "op #" + std::to_string(op.index) + " " + opName(op.kind) +
              (steps[position].recompute ? " (recomputed)" : "") + ": " +
              message;
      return false;
    };
    if (!runStep(op, steps[position].recompute, microBatch, values, batch,
                 loss, error))
      return fail(error);
    sampleHeapPeak();
    for (int64_t id : lifetimes.freeAfterStep[p][position])
      releaseValue(microBatch, id, values);
  }
  return endPhase(phase, microBatch, values, loss, error);
}

bool PhaseExecutor::runStep(const ProgramOp &op, bool recompute,
                            int microBatch, ValueTable &values,
                            const MicroBatch &batch, double &loss,
                            std::string &error) {
  switch (op.kind) {
  case OpKind::Send: // the worker (or endPhase) sends
    return true;
  case OpKind::Recv: { // filled by the receive slot
    if (movesItself(op))
      return true;
    auto it = values.find(op.results[0].id);
    if (it == values.end()) {
      error = "its value was never received";
      return false;
    }
    return bindHostValue(op, microBatch, it->second, values, error);
  }
  case OpKind::Input:
  case OpKind::Label: {
    auto it = batch.find(op.attrs.name);
    if (it == batch.end()) {
      error = "no data for '" + op.attrs.name + "'";
      return false;
    }
    if (it->second.shape != op.results[0].shape) {
      error = "data for '" + it->first + "' has the wrong shape";
      return false;
    }
    return bindHostValue(op, microBatch, it->second, values, error);
  }
  default:
    break;
  }
  for (size_t i = 0; i < op.operands.size(); ++i)
    if (!hasValue(microBatch, op.operands[i], values)) {
      error = "operand " + std::to_string(i) + " was not computed in this phase";
      return false;
    }
  // A recomputed loss was counted by the forward already.
  double recomputedLoss = 0;
  if (!runOp(op, microBatch, values, recompute ? recomputedLoss : loss, error))
    return false;
  afterOp(op, microBatch, values);
  return true;
}

void PhaseExecutor::releaseSent(OpPhase phase, int microBatch,
                                ValueTable &values) {
  for (int64_t id :
       lifetimes.freeAfterSends[phase == OpPhase::Backward ? 1 : 0])
    releaseValue(microBatch, id, values);
}

bool PhaseExecutor::optimizerUpdates(
    const std::map<int64_t, std::string> &paramOfValue,
    std::vector<Update> &updates, std::string &error) const {
  updates.clear();
  std::map<int64_t, const ProgramOp *> syncOfResult;
  for (int index : program.opsOf(OpPhase::Optimizer)) {
    const ProgramOp &op = program.ops[index];
    if (op.kind == OpKind::GradSync && !op.results.empty())
      syncOfResult[op.results[0].id] = &op;
  }
  for (int index : program.opsOf(OpPhase::Optimizer)) {
    const ProgramOp &op = program.ops[index];
    if (op.kind == OpKind::GradSync)
      continue;
    auto fail = [&](const std::string &message) {
      error = std::string(opName(op.kind)) + ": " + message;
      return false;
    };
    if ((op.kind != OpKind::SgdUpdate && op.kind != OpKind::AdamwUpdate) ||
        op.operands.size() < 2)
      return fail("unexpected op in the optimizer phase");
    auto p = paramOfValue.find(op.operands[0]);
    if (p == paramOfValue.end())
      return fail("updates a value that is not a parameter");
    Update &update = updates.emplace_back(Update{&op, p->second, op.operands[1]});
    auto sync = syncOfResult.find(op.operands[1]);
    if (op.kind == OpKind::AdamwUpdate && sync != syncOfResult.end() &&
        sync->second->attrs.compression == SyncCompression::TopK)
      update.freezeSecondMomentAfter = sync->second->attrs.topkWarmup;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// The CPU executor
//===----------------------------------------------------------------------===//

std::map<std::string, Tensor> ProgramExecutor::state() const {
  std::map<std::string, Tensor> out = host.state();
  for (const auto &[name, range] : shards)
    out["shard/" + name] = encodeShard(range);
  for (const auto &[name, slice] : tensorParallelSlices(program))
    out["tp/" + name] = encodeSlice(slice);
  return out;
}

bool ProgramExecutor::saveParameters(const std::string &path,
                                     std::string &error) const {
  return format::writeTensorFile(path, host.params, error);
}

bool ProgramExecutor::bindHostValue(const ProgramOp &op, int,
                                    const Tensor &value, ValueTable &values,
                                    std::string &) {
  if (op.kind != OpKind::Recv) // received values are in place already
    values[op.results[0].id] = value;
  return true;
}

bool ProgramExecutor::runOp(const ProgramOp &op, int microBatch,
                            ValueTable &values, double &loss,
                            std::string &error) {
  if (op.kind == OpKind::Param) {
    auto it = host.params.find(op.attrs.name);
    if (it == host.params.end()) {
      error = "unknown parameter '" + op.attrs.name + "'";
      return false;
    }
    // Kernels read parameters in place (operand()); only one the worker
    // sends (a tied weight) is copied into the micro-batch's values -- once
    // per iteration, into micro-batch 0's, whose table the worker sends
    // from.
    paramOfValue[op.results[0].id] = op.attrs.name;
    auto sent = sentValues.find(op.results[0].id);
    if (sent != sentValues.end() && (!sent->second || microBatch == 0))
      values[op.results[0].id] = it->second;
    return true;
  }
  const cpu::KernelEntry &kernels =
      cpu::kernelTable()[static_cast<size_t>(op.computes)];
  cpu::GroupMember group{tensorParallelRank(program),
                         tensorParallelSum ? &tensorParallelSum : nullptr};
  if (!op.isBackward()) {
    if (!kernels.forward) {
      error = "no CPU kernel for this op";
      return false;
    }
    return kernels.forward(
               cpu::ForwardCall{op, values, host, paramOfValue, loss, group},
               error) &&
           sumOverTensorParallelGroup(op, values, error);
  }
  // The gradients of one forward op: its operands (and the gradient of its
  // result, last, unless it is the loss) in, one gradient per `wrt` out.
  if (!kernels.backward) {
    error = std::string("no CPU backward for ") + opName(op.computes);
    return false;
  }
  bool isLoss = op.computes == OpKind::CrossEntropy;
  int numOperands = static_cast<int>(op.operands.size()) - (isLoss ? 0 : 1);
  if (numOperands < 0) {
    error = "dtfm.backward without the gradient of its result";
    return false;
  }
  std::vector<const Tensor *> operands(numOperands);
  for (int i = 0; i < numOperands; ++i)
    operands[i] = &operand(op.operands[i], values);
  const Tensor *dOut = isLoss ? nullptr : &values.at(op.operands.back());
  const std::vector<int64_t> &wrt = op.attrs.wrt;
  if (wrt.size() != op.results.size()) {
    error = "dtfm.backward with " + std::to_string(wrt.size()) +
            " wrt indices for " + std::to_string(op.results.size()) +
            " results";
    return false;
  }
  std::vector<Tensor> grads(numOperands);
  std::vector<Tensor *> want(numOperands, nullptr);
  for (int64_t index : wrt) {
    if (index < 0 || index >= numOperands) {
      error = "dtfm.backward wrt index out of range";
      return false;
    }
    grads[index] = Tensor(operands[index]->shape);
    want[index] = &grads[index];
  }
  if (!kernels.backward(cpu::BackwardCall{op, operands, dOut, want, group},
                        error))
    return false;
  for (size_t k = 0; k < wrt.size(); ++k) {
    Tensor g = std::move(grads[wrt[k]]);
    g.shape = op.results[k].shape;
    values[op.results[k].id] = std::move(g);
  }
  return sumOverTensorParallelGroup(op, values, error);
}

bool ProgramExecutor::sumOverTensorParallelGroup(const ProgramOp &op,
                                                 ValueTable &values,
                                                 std::string &error) {
  // dtfm.tp_all_reduce sums its value in the forward, or with in_backward
  // its gradient in the backward; its kernels copied the operand.
  if (op.computes != OpKind::TpAllReduce ||
      op.isBackward() != op.attrs.inBackward)
    return true;
  if (!tensorParallelSum) {
    error = "no tensor-parallel group to sum over";
    return false;
  }
  Tensor &sum = values.at(op.results[0].id);
  return tensorParallelSum(sum.data.data(), sum.data.size(), error);
}

void ProgramExecutor::collect(int64_t id, int microBatch, const Tensor &value) {
  if (microBatch != collectingMicroBatch) {
    collected.clear();
    collectingMicroBatch = microBatch;
  }
  if (!collected.insert(id).second)
    return;
  Tensor &sum = gradSum[id];
  if (sum.shape != value.shape)
    sum = Tensor(value.shape);
  for (int64_t j = 0; j < sum.numel(); ++j)
    sum.data[j] += value.data[j];
  const ProgramOp *sync = gradientInputs.at(id);
  if (!ready || !sync || microBatch != streamMicroBatches - 1)
    return;
  // What finishIteration would hand to the SyncFn: the same arithmetic.
  Tensor averaged(sum.shape);
  for (int64_t j = 0; j < sum.numel(); ++j)
    averaged.data[j] = static_cast<float>(sum.data[j] * streamScale);
  ready(*sync, averaged);
}

PhaseExecutor::PhaseExecutor(const StageProgram &program)
    : program(program), lifetimes(valueLifetimes(program)) {
  for (const ParameterUpdate &u : parameterUpdates(program))
    if (u.sync)
      parameterOfSync[u.sync->index] = u.param->attrs.name;
}

ProgramExecutor::ProgramExecutor(const StageProgram &program)
    : PhaseExecutor(program), gradientInputs(runtime::gradientInputs(program)),
      shards(shardedParameters(program)),
      sentValues(runtime::sentValues(program)) {}

const Tensor &ProgramExecutor::operand(int64_t id,
                                       const ValueTable &values) const {
  auto it = values.find(id);
  if (it != values.end())
    return it->second;
  return host.params.at(paramOfValue.at(id));
}

bool ProgramExecutor::hasValue(int, int64_t id,
                               const ValueTable &values) const {
  return values.count(id) > 0 || paramOfValue.count(id) > 0;
}

void ProgramExecutor::afterOp(const ProgramOp &op, int microBatch,
                              const ValueTable &values) {
  if (op.phase != OpPhase::Backward)
    return;
  for (const ProgramValue &result : op.results)
    if (gradientInputs.count(result.id))
      collect(result.id, microBatch, values.at(result.id));
}

void ProgramExecutor::collectGradients(int microBatch,
                                       const ValueTable &values) {
  // What no op of the phase produced (a gradient received once per
  // iteration) is added here; the rest was added as it was computed.
  for (const auto &[id, sync] : gradientInputs) {
    auto it = values.find(id);
    if (it != values.end())
      collect(id, microBatch, it->second);
  }
  collectingMicroBatch = -1;
  if (microBatch == streamMicroBatches - 1)
    ready = nullptr; // armed for one iteration
}

bool ProgramExecutor::streamGradients(int microBatches, double gradientScale,
                                      GradientReadyFn fn) {
  streamMicroBatches = microBatches;
  streamScale = gradientScale;
  ready = std::move(fn);
  return true;
}

bool ProgramExecutor::finishIteration(double gradientScale, const SyncFn &sync,
                                      const SyncFn &gather,
                                      std::string &error) {
  ValueTable values;
  auto fail = [&](const ProgramOp &op, const std::string &message) {
    error = std::string(opName(op.kind)) + ": " + message;
    return false;
  };
  for (auto &[id, sum] : gradSum) {
    for (float &x : sum.data)
      x = static_cast<float>(x * gradientScale);
    values[id] = std::move(sum);
  }
  gradSum.clear();
  const std::vector<int> &optimizerOps = program.opsOf(OpPhase::Optimizer);
  // Gradient syncs by bucket; an update waits only for its gradient's
  // bucket.
  std::map<int64_t, int64_t> bucketOfResult; // sync result id -> bucket
  std::map<int64_t, const ProgramOp *> syncOfResult;
  for (int index : optimizerOps) {
    const ProgramOp &op = program.ops[index];
    if (op.kind != OpKind::GradSync)
      continue;
    syncOfResult[op.results[0].id] = &op;
    auto in = values.find(op.operands[0]);
    if (in == values.end())
      return fail(op, "its gradient was never computed");
    values[op.results[0].id] = in->second;
    // With local steps each replica steps on its own gradient.
    if (op.attrs.syncEvery < 1)
      bucketOfResult[op.results[0].id] = op.attrs.bucket;
  }
  if (!anchorLocalSteps(error))
    return false;
  std::map<int64_t, std::vector<std::pair<const ProgramOp *, Tensor *>>>
      buckets;
  for (int index : optimizerOps) {
    const ProgramOp &op = program.ops[index];
    if (op.kind == OpKind::GradSync && op.attrs.syncEvery < 1)
      buckets[op.attrs.bucket].push_back(
          {&op, &values.at(op.results[0].id)});
  }
  std::vector<Update> updates;
  if (!optimizerUpdates(paramOfValue, updates, error))
    return false;
  auto step = [&](const Update &update) {
    const ProgramOp &op = *update.op;
    auto g = values.find(update.gradient);
    if (g == values.end())
      return fail(op, "its gradient was never computed");
    Tensor &param = host.params.at(update.parameter);
    HostState::Moments &state = host.optimizer[update.parameter];
    ++state.step;
    const OpAttrs &a = op.attrs;
    cpu::ElementSlice slice;
    auto shard = shards.find(update.parameter);
    if (shard != shards.end())
      slice = {shard->second.begin, shard->second.size()};
    if (op.kind == OpKind::AdamwUpdate)
      cpu::adamwStep(param, g->second, state.m, state.v, state.step, a.lr,
                     a.beta1, a.beta2, a.epsilon, a.weightDecay,
                     update.freezeSecondMomentAfter, slice);
    else
      cpu::sgdStep(param, g->second, state.velocity, a.lr, a.momentum,
                   a.weightDecay, slice);
    return true;
  };
  auto bucketOf = [&](const Update &update) -> int64_t {
    auto it = bucketOfResult.find(update.gradient);
    return it == bucketOfResult.end() ? -1 : it->second;
  };
  // Updates that read no synced gradient, then bucket by bucket.
  for (const Update &update : updates)
    if (bucketOf(update) < 0 && !step(update))
      return false;
  for (auto &[bucket, grads] : buckets) {
    if (sync && !sync(grads, error))
      return false;
    std::vector<std::pair<const ProgramOp *, Tensor *>> shardedParams;
    for (const Update &update : updates) {
      if (bucketOf(update) != bucket)
        continue;
      if (!step(update))
        return false;
      if (shards.count(update.parameter))
        shardedParams.push_back({syncOfResult.at(update.gradient),
                                 &host.params.at(update.parameter)});
    }
    // Sharded state: each member stepped its shard; the group gathers the
    // rest.
    if (!shardedParams.empty() && gather && !gather(shardedParams, error))
      return false;
  }
  sampleHeapPeak(); // the gradients and the syncs' copies still held
  return true;
}

/// The parameters the local-step syncs' gradients update, in program order
/// (each sync sits right before its update), with the first such sync.
static std::vector<std::string>
localStepParameters(const StageProgram &program,
                    const std::map<int, std::string> &parameterOfSync,
                    const ProgramOp *&sync) {
  std::vector<std::string> names;
  sync = nullptr;
  for (int index : program.opsOf(OpPhase::Optimizer)) {
    const ProgramOp &op = program.ops[index];
    auto parameter = parameterOfSync.find(op.index);
    if (op.kind != OpKind::GradSync || op.attrs.syncEvery < 1 ||
        parameter == parameterOfSync.end())
      continue;
    if (!sync)
      sync = &op;
    names.push_back(parameter->second);
  }
  return names;
}

bool PhaseExecutor::anchorLocalSteps(std::string &error) {
  const ProgramOp *sync;
  std::vector<std::string> unanchored;
  for (const std::string &name :
       localStepParameters(program, parameterOfSync, sync))
    if (host.optimizer[name].anchor.data.empty())
      unanchored.push_back(name);
  if (unanchored.empty())
    return true;
  if (!parametersToHost(unanchored, error))
    return false;
  for (const std::string &name : unanchored)
    host.optimizer[name].anchor = host.params.at(name);
  return true;
}

bool PhaseExecutor::outerStep(const AverageFn &average, std::string &error) {
  const ProgramOp *sync;
  std::vector<std::string> names =
      localStepParameters(program, parameterOfSync, sync);
  if (names.empty())
    return true;
  if (!parametersToHost(names, error))
    return false;
  std::vector<std::pair<Tensor *, HostState::Moments *>> synced;
  size_t total = 0;
  for (const std::string &name : names) {
    Tensor &param = host.params.at(name);
    HostState::Moments &state = host.optimizer[name];
    if (state.anchor.shape != param.shape)
      state.anchor = param; // not stepped yet: nothing moved
    synced.push_back({&param, &state});
    total += param.data.size();
  }
  // Pseudo-gradients (value at the last exchange minus now), averaged.
  std::vector<float> deltas(total);
  size_t at = 0;
  for (auto [param, state] : synced)
    for (size_t i = 0; i < param->data.size(); ++i)
      deltas[at++] = state->anchor.data[i] - param->data[i];
  if (!average(deltas, error))
    return false;
  at = 0;
  for (auto [param, state] : synced) {
    Tensor delta(param->shape);
    std::copy_n(deltas.begin() + at, delta.data.size(), delta.data.begin());
    at += delta.data.size();
    cpu::nesterovOuterStep(state->anchor, delta, state->outerVelocity,
                           sync->attrs.outerLr, sync->attrs.outerMomentum);
    *param = state->anchor;
  }
  return parametersFromHost(names, error);
}

Tensor *PhaseExecutor::residualOf(const ProgramOp &sync) {
  auto param = parameterOfSync.find(sync.index);
  if (param == parameterOfSync.end())
    return nullptr;
  Tensor &residual = host.optimizer[param->second].residual;
  if (residual.shape != sync.results[0].shape)
    residual = Tensor(sync.results[0].shape);
  return &residual;
}

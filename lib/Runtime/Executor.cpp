//===- Executor.cpp - What every backend's executor shares: host state ---===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Executor.h"
#include "dtfm/Plan/Sharding.h"
#include "dtfm/Runtime/Checkpoints.h"
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

bool HostState::load(const StageProgram &program,
                     const format::TensorMap &loaded, const std::string &path,
                     std::string &error) {
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
    if (!s.outerResidual.data.empty())
      out["opt.outer_residual/" + name] = s.outerResidual;
    if (!s.outerPending.data.empty())
      out["opt.outer_pending/" + name] = s.outerPending;
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
    else if (kind == "opt.outer_residual")
      s.outerResidual = t;
    else if (kind == "opt.outer_pending")
      s.outerPending = t;
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
  // What each value indexes when an embedding's ids or a loss's labels.
  std::map<int64_t, std::vector<int64_t>> shapeOf;
  std::map<int64_t, int64_t> limitOf;
  for (const ProgramOp &op : program.ops) {
    for (const auto &result : op.results)
      shapeOf[result.id] = result.shape;
    auto shape = [&](size_t operand) -> const std::vector<int64_t> * {
      auto it = op.operands.size() > operand
                    ? shapeOf.find(op.operands[operand])
                    : shapeOf.end();
      return it == shapeOf.end() || it->second.empty() ? nullptr
                                                       : &it->second;
    };
    if (op.kind == OpKind::Embedding && shape(1))
      limitOf[op.operands[0]] = embeddingRowCount(op, shape(1)->front());
    if (op.kind == OpKind::CrossEntropy && shape(0))
      limitOf[op.operands[1]] = lossLabelCount(op, shape(0)->back());
  }
  std::vector<InputSpec> specs;
  for (const ProgramOp &op : program.ops)
    if ((op.kind == OpKind::Input || op.kind == OpKind::Label) &&
        op.results.size() == 1) {
      ElementType type = op.results[0].type;
      bool integer = type == ElementType::I1 || type == ElementType::I32 ||
                     type == ElementType::I64;
      auto limit = limitOf.find(op.results[0].id);
      specs.push_back({op.attrs.name, op.results[0].shape,
                       op.kind == OpKind::Label, integer,
                       type == ElementType::I1,
                       limit == limitOf.end() ? 0 : limit->second});
    }
  return specs;
}

//===----------------------------------------------------------------------===//
// The heap
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

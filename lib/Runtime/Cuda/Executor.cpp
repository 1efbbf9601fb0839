//===- Executor.cpp - Run a device program on a GPU -----------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Cuda/Executor.h"

#include "../PlanOps.h"
#include "dtfm/Runtime/Cuda/Attention.h"
#include "dtfm/Runtime/Cuda/Device.h"
#include "dtfm/Runtime/Cuda/IndexMaps.h"
#include "dtfm/Runtime/Cuda/Kernels.h"

#include "plan.pb.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::runtime::planops;
using cpu::Tensor;

namespace {

using ShapeVec = std::vector<int64_t>;

int64_t numelOf(const ShapeVec &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string spell(const ShapeVec &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Whether `operand` repeats over `out`: equal to its trailing dimensions
/// once leading ones are dropped (what addRepeated / sumRepeated compute).
bool repeatsOver(ShapeVec operand, const ShapeVec &out) {
  while (!operand.empty() && operand.front() == 1 &&
         numelOf(operand) != numelOf(out))
    operand.erase(operand.begin());
  if (operand.size() > out.size())
    return numelOf(operand) == numelOf(out);
  return std::equal(operand.rbegin(), operand.rend(), out.rbegin());
}

/// Forwards with a CUDA backward (every one has a CUDA forward too).
const std::set<std::string> &backwardOps() {
  static const std::set<std::string> ops = {"dtfm.embedding",
                                            "dtfm.add",
                                            "dtfm.sub",
                                            "dtfm.mul",
                                            "dtfm.div",
                                            "dtfm.sqrt",
                                            "dtfm.tanh",
                                            "dtfm.erf",
                                            "dtfm.exp",
                                            "dtfm.pow",
                                            "dtfm.reduce_mean",
                                            "dtfm.concat",
                                            "dtfm.slice",
                                            "dtfm.transpose",
                                            "dtfm.gather",
                                            "dtfm.where",
                                            "dtfm.linear",
                                            "dtfm.matmul",
                                            "dtfm.layernorm",
                                            "dtfm.gelu",
                                            "dtfm.relu",
                                            "dtfm.softmax",
                                            "dtfm.causal_attention",
                                            "dtfm.reshape",
                                            "dtfm.flatten",
                                            "dtfm.cross_entropy",
                                            "dtfm.conv2d",
                                            "dtfm.batchnorm",
                                            "dtfm.max_pool2d",
                                            "dtfm.avg_pool2d",
                                            "dtfm.global_avg_pool"};
  return ops;
}

/// Ops with a CUDA forward.
const std::set<std::string> &forwardOps() {
  static const std::set<std::string> ops = [] {
    std::set<std::string> all = backwardOps();
    for (const char *name :
         {"dtfm.param", "dtfm.input", "dtfm.label", "dtfm.constant",
          "dtfm.recv", "dtfm.send", "dtfm.accumulate", "dtfm.topk_compress",
          "dtfm.topk_decompress", "dtfm.backward", "dtfm.grad_sync",
          "dtfm.sgd_update", "dtfm.adamw_update"})
      all.insert(name);
    return all;
  }();
  return ops;
}

std::optional<cuda::BinaryOp> binaryOpOf(const std::string &name) {
  if (name == "dtfm.add")
    return cuda::BinaryOp::Add;
  if (name == "dtfm.sub")
    return cuda::BinaryOp::Sub;
  if (name == "dtfm.mul")
    return cuda::BinaryOp::Mul;
  if (name == "dtfm.div")
    return cuda::BinaryOp::Div;
  return std::nullopt;
}

std::optional<cuda::UnaryOp> unaryOpOf(const std::string &name) {
  if (name == "dtfm.sqrt")
    return cuda::UnaryOp::Sqrt;
  if (name == "dtfm.tanh")
    return cuda::UnaryOp::Tanh;
  if (name == "dtfm.erf")
    return cuda::UnaryOp::Erf;
  if (name == "dtfm.exp")
    return cuda::UnaryOp::Exp;
  if (name == "dtfm.pow")
    return cuda::UnaryOp::Pow;
  return std::nullopt;
}

/// The dimensions after the first two (global average pooling).
std::vector<int64_t> spatialAxes(const ShapeVec &shape) {
  std::vector<int64_t> axes;
  for (size_t d = 2; d < shape.size(); ++d)
    axes.push_back(static_cast<int64_t>(d));
  return axes;
}

cuda::ConvGeometry convGeometry(const proto::PlanOp &op, const ShapeVec &x,
                                const ShapeVec &w, const ShapeVec &out) {
  cpu::Window window = windowOf(op);
  cuda::ConvGeometry g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.o = w[0], g.kh = w[2], g.kw = w[3];
  g.ho = out[2], g.wo = out[3];
  g.groups = intAttr(op, "groups", 1);
  g.strideH = window.strideH, g.strideW = window.strideW;
  g.padTop = window.padTop, g.padLeft = window.padLeft;
  g.dilationH = window.dilationH, g.dilationW = window.dilationW;
  return g;
}

cuda::PoolGeometry poolGeometry(const proto::PlanOp &op, const ShapeVec &x,
                                const ShapeVec &out) {
  cpu::Window window = windowOf(op);
  std::vector<int64_t> kernel = intsAttr(op, "kernel", {1, 1});
  cuda::PoolGeometry g;
  g.planes = x[0] * x[1], g.h = x[2], g.w = x[3];
  g.ho = out[2], g.wo = out[3];
  g.kh = kernel[0], g.kw = kernel[1];
  g.strideH = window.strideH, g.strideW = window.strideW;
  g.padTop = window.padTop, g.padLeft = window.padLeft;
  return g;
}

/// Column matrices of one convolution chunk stay under 256 MB.
constexpr int64_t kColumnFloats = int64_t(1) << 26;

/// A device tensor: fp32, row-major; buffers are shared by views
/// (reshape) and returned to the executor's pool when the last one goes.
struct DTensor {
  ShapeVec shape;
  std::shared_ptr<float> buffer;
  float *data() const { return buffer.get(); }
  int64_t numel() const { return numelOf(shape); }
};

/// Device memory reused by size: the same shapes come back every
/// micro-batch, and cudaMalloc / cudaFree synchronise the device.
class Pool {
public:
  ~Pool() {
    for (auto &[bytes, list] : free)
      for (void *p : list)
        cudaFree(p);
  }
  float *take(size_t bytes) {
    auto it = free.find(bytes);
    if (it != free.end() && !it->second.empty()) {
      void *p = it->second.back();
      it->second.pop_back();
      return static_cast<float *>(p);
    }
    void *p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      cudaGetLastError();
      // Give the cached blocks back and try once more.
      for (auto &[size, list] : free)
        for (void *q : list)
          cudaFree(q);
      free.clear();
      if (cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
      }
    }
    return static_cast<float *>(p);
  }
  void give(float *p, size_t bytes) { free[bytes].push_back(p); }

private:
  std::map<size_t, std::vector<void *>> free;
};

class CudaExecutor : public StageExecutor {
public:
  CudaExecutor(const proto::DeviceProgram &program, int device,
               bool planPrecision)
      : program(program), device(device), planPrecision(planPrecision),
        host(program), pool(std::make_shared<Pool>()) {}
  ~CudaExecutor() override;

  bool setUp(std::string &error);

  bool initialize(uint64_t seed, std::string &error,
                  const std::map<std::string, Tensor> *weights) override {
    return host.initialize(seed, error, weights) && fromHost(error);
  }
  bool loadParameters(const std::string &path, std::string &error) override {
    return host.loadParameters(path, error) && fromHost(error);
  }
  bool saveParameters(const std::string &path,
                      std::string &error) const override {
    return format::writeTensorFile(path, parameters(), error);
  }
  std::vector<InputSpec> inputs() const override { return host.inputs(); }
  std::map<std::string, Tensor> state() const override;
  bool restoreState(const std::map<std::string, Tensor> &state,
                    std::string &error) override {
    return host.restoreState(state, error) && fromHost(error);
  }
  bool runPhase(const std::string &phase, int microBatch, ValueTable &values,
                const MicroBatch &batch, double &loss,
                std::string &error) override;
  void collectGradients(int microBatch, const ValueTable &values) override;
  bool finishIteration(int microBatches, const SyncFn &sync,
                       std::string &error) override;
  std::map<std::string, Tensor> parameters() const override;
  bool connectGroup(const std::vector<int> &members, int position,
                    const ShareFn &share, std::string &error) override;
  bool connectPeers(int rank, const std::map<int, int> &linkOps,
                    const ShareFn &share, std::set<int> &taken,
                    std::string &error) override;

private:
  /// "<host>/<PCI bus id>" of this executor's GPU.
  bool gpuIdentity(std::string &identity, std::string &error) const;
  /// The phase's dtfm.recv / dtfm.send ops on NCCL links, by peer then tag
  /// (the order both ends post them in).
  std::vector<std::pair<int, const proto::PlanOp *>>
  linkedOps(const std::string &name, const std::string &phase) const;
  /// Releases the buffers of sends the send stream has finished.
  void reapSends();
  cudaStream_t receiveStream() const { return streams[0]; }
  cudaStream_t computeStream() const { return streams[1]; }
  cudaStream_t sendStream() const { return streams[2]; }
  /// Makes `waiter` wait for what `signaller` has queued so far.
  bool order(cudaStream_t signaller, cudaStream_t waiter, std::string &error);
  bool allocate(const ShapeVec &shape, bool zero, DTensor &out,
                std::string &error);
  bool upload(const Tensor &t, cudaStream_t stream, DTensor &out,
              std::string &error);
  /// Copies to the host on `stream` and waits for it.
  bool download(const DTensor &t, cudaStream_t stream, Tensor &out,
                std::string &error) const;
  /// Parameters and optimizer state from the host executor's.
  bool fromHost(std::string &error);
  /// Op `opIndex` of the program.
  bool runForward(int opIndex, const proto::PlanOp &op,
                  std::map<int64_t, DTensor> &table,
                  std::vector<const DTensor *> &losses, std::string &error);
  bool runBackward(const proto::PlanOp &op, std::map<int64_t, DTensor> &table,
                   std::string &error);
  bool checkLaunch(std::string &error) const;
  /// The type op's matmuls multiply in: the plan's type of its result
  /// (fp16/bf16 on tensor cores, accumulating in fp32), or fp32 when the
  /// run asked for fp32 products or the plan is fp32.
  cuda::ElementType productType(const proto::PlanOp &op) const;
  /// c (fp32) = the product `shape` of a and b (fp32 tensors); in a half
  /// type they are rounded into scratch first, each tensor once per op
  /// (`rounded`).
  bool multiply(cuda::MatmulShape shape, cuda::ElementType type,
                const DTensor &a, const DTensor &b, float *c,
                std::map<const float *, DTensor> &rounded, std::string &error);
  /// Fails naming the first gather of the phase that met a bad index.
  bool checkGathers(std::string &error);

  const proto::DeviceProgram &program;
  int device;
  bool planPrecision;
  /// Initializers, parameter files and the state's format, on the host.
  ProgramExecutor host;
  std::shared_ptr<Pool> pool;
  cudaStream_t streams[3] = {nullptr, nullptr, nullptr};
  std::unique_ptr<cuda::Matmul> matmul;

  std::map<std::string, DTensor> params;
  std::map<int64_t, std::string> paramOfValue;
  struct OptimizerState {
    DTensor m, v, velocity;
    int64_t step = 0;
  };
  std::map<std::string, OptimizerState> optimizer;
  /// Values of the micro-batches in flight (forward results kept for the
  /// backward), by micro-batch and value id.
  std::map<int, std::map<int64_t, DTensor>> live;
  std::map<int64_t, DTensor> gradSum;
  /// The data-parallel group's NCCL communicator (null: gradients go
  /// through the worker's transport).
  ncclComm_t comm = nullptr;
  int groupSize = 1;
  /// Pipeline links on NCCL, by peer rank: one communicator per direction
  /// (the sender is its rank 0), so that activations going one way never
  /// queue behind gradients coming the other.
  std::map<int, ncclComm_t> sendComms, recvComms;
  std::map<int, int> peerOfOp; ///< linked send/recv op index -> peer rank
  /// One int per op: set by a dtfm.gather that met an index out of range.
  DTensor gatherFlags;
  /// The dtfm.gather ops of the phase running, with the size of the axis
  /// they index (their flags are read at its end).
  std::vector<std::pair<int, int64_t>> gathered;
  /// Values being sent, kept alive until their send completes.
  std::vector<std::pair<cudaEvent_t, std::vector<DTensor>>> pendingSends;
};

bool cudaFailed(cudaError_t status, const std::string &what,
                std::string &error) {
  if (status == cudaSuccess)
    return false;
  error = what + ": " + cudaGetErrorString(status);
  cudaGetLastError();
  return true;
}

CudaExecutor::~CudaExecutor() {
  cudaSetDevice(device);
  for (cudaStream_t s : streams)
    if (s)
      cudaStreamSynchronize(s);
  live.clear();
  gradSum.clear();
  params.clear();
  optimizer.clear();
  matmul.reset();
  reapSends();
  for (auto &[event, held] : pendingSends)
    cudaEventDestroy(event);
  pendingSends.clear();
  if (comm)
    ncclCommDestroy(comm);
  for (auto *comms : {&sendComms, &recvComms})
    for (auto &[peer, c] : *comms)
      ncclCommDestroy(c);
  for (cudaStream_t s : streams)
    if (s)
      cudaStreamDestroy(s);
}

bool CudaExecutor::setUp(std::string &error) {
  if (cudaFailed(cudaSetDevice(device),
                 "selecting CUDA device " + std::to_string(device), error))
    return false;
  for (cudaStream_t &s : streams)
    if (cudaFailed(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                   "creating a CUDA stream", error))
      return false;
  matmul = std::make_unique<cuda::Matmul>();
  return true;
}

bool CudaExecutor::checkGathers(std::string &error) {
  std::vector<int> flags(program.ops_size(), 0);
  if (cudaFailed(cudaMemcpyAsync(flags.data(), gatherFlags.data(),
                                 flags.size() * sizeof(int),
                                 cudaMemcpyDeviceToHost, computeStream()),
                 "reading the gather flags", error) ||
      cudaFailed(cudaStreamSynchronize(computeStream()), "waiting for the GPU",
                 error))
    return false;
  std::vector<std::pair<int, int64_t>> ran;
  ran.swap(gathered);
  for (auto [index, size] : ran) {
    if (!flags[index])
      continue;
    int64_t axis = intAttr(program.ops(index), "axis", 0);
    error = "op #" + std::to_string(index) +
            " dtfm.gather: an index outside [" + std::to_string(-size) + ", " +
            std::to_string(size) + ") on axis " + std::to_string(axis);
    cudaMemsetAsync(gatherFlags.data(), 0, flags.size() * sizeof(int),
                    computeStream());
    return false;
  }
  return true;
}

cuda::ElementType CudaExecutor::productType(const proto::PlanOp &op) const {
  if (!planPrecision || op.results_size() == 0)
    return cuda::ElementType::F32;
  const std::string &dtype = op.results(0).dtype();
  return dtype == "f16"    ? cuda::ElementType::F16
         : dtype == "bf16" ? cuda::ElementType::BF16
                           : cuda::ElementType::F32;
}

bool CudaExecutor::multiply(cuda::MatmulShape shape, cuda::ElementType type,
                            const DTensor &a, const DTensor &b, float *c,
                            std::map<const float *, DTensor> &rounded,
                            std::string &error) {
  if (type == cuda::ElementType::F32)
    return matmul->run(shape, a.data(), b.data(), c, computeStream(), error);
  auto half = [&](const DTensor &t) -> const void * {
    auto it = rounded.find(t.data());
    if (it != rounded.end())
      return it->second.data();
    DTensor h;
    if (!allocate({(t.numel() + 1) / 2}, false, h, error))
      return nullptr;
    cuda::roundToHalf(t.data(), reinterpret_cast<uint16_t *>(h.data()),
                      t.numel(), type == cuda::ElementType::BF16,
                      computeStream());
    return rounded.emplace(t.data(), std::move(h)).first->second.data();
  };
  const void *ha = half(a), *hb = half(b);
  if (!ha || !hb)
    return false;
  shape.type = type;
  shape.floatOutput = true;
  return matmul->run(shape, ha, hb, c, computeStream(), error);
}

bool CudaExecutor::checkLaunch(std::string &error) const {
  return !cudaFailed(cudaGetLastError(), "CUDA kernel launch", error);
}

bool CudaExecutor::connectGroup(const std::vector<int> &members, int position,
                                const ShareFn &share, std::string &error) {
  if (cudaFailed(cudaSetDevice(device), "selecting the CUDA device", error))
    return false;
  // NCCL takes one rank per GPU: where members share a GPU (several workers
  // on one device), every member sees it and all keep the transport.
  std::string mine;
  if (!gpuIdentity(mine, error))
    return false;
  if (!share("gpu." + std::to_string(position), mine, true, error))
    return false;
  std::set<std::string> gpus;
  for (size_t i = 0; i < members.size(); ++i) {
    std::string theirs;
    if (!share("gpu." + std::to_string(i), theirs, false, error))
      return false;
    gpus.insert(theirs);
  }
  if (gpus.size() != members.size())
    return true;
  ncclUniqueId id;
  std::string bytes;
  if (position == 0) {
    ncclResult_t status = ncclGetUniqueId(&id);
    if (status != ncclSuccess) {
      error = std::string("NCCL unique id: ") + ncclGetErrorString(status);
      return false;
    }
    bytes.assign(reinterpret_cast<const char *>(&id), sizeof id);
    if (!share("nccl-id", bytes, true, error))
      return false;
  } else {
    if (!share("nccl-id", bytes, false, error))
      return false;
    if (bytes.size() != sizeof id) {
      error = "malformed NCCL unique id in the rendezvous store";
      return false;
    }
    std::memcpy(&id, bytes.data(), sizeof id);
  }
  ncclResult_t status =
      ncclCommInitRank(&comm, static_cast<int>(members.size()), id, position);
  if (status != ncclSuccess) {
    comm = nullptr;
    error = std::string("NCCL communicator of the data-parallel group: ") +
            ncclGetErrorString(status);
    return false;
  }
  groupSize = static_cast<int>(members.size());
  return true;
}

bool CudaExecutor::gpuIdentity(std::string &identity,
                               std::string &error) const {
  char bus[32] = {0}, host[256] = {0};
  if (cudaFailed(cudaDeviceGetPCIBusId(bus, sizeof bus, device),
                 "reading the GPU's PCI bus id", error))
    return false;
  ::gethostname(host, sizeof host - 1);
  identity = std::string(host) + "/" + bus;
  return true;
}

bool CudaExecutor::connectPeers(int rank, const std::map<int, int> &linkOps,
                                const ShareFn &share, std::set<int> &taken,
                                std::string &error) {
  if (linkOps.empty())
    return true;
  if (cudaFailed(cudaSetDevice(device), "selecting the CUDA device", error))
    return false;
  std::string mine;
  if (!gpuIdentity(mine, error) ||
      !share("gpu." + std::to_string(rank), mine, true, error))
    return false;
  // Both ends see both identities, so they agree on which links take NCCL:
  // those between distinct GPUs.
  std::set<int> peers;
  for (const auto &[op, peer] : linkOps)
    peers.insert(peer);
  std::vector<int> linked;
  for (int peer : peers) {
    std::string theirs;
    if (!share("gpu." + std::to_string(peer), theirs, false, error))
      return false;
    if (theirs != mine)
      linked.push_back(peer);
  }
  if (linked.empty())
    return true;
  // The sender of each direction makes its unique id; every worker
  // publishes its own before looking up its peers'.
  auto key = [](int from, int to) {
    return "nccl." + std::to_string(from) + "-" + std::to_string(to);
  };
  std::map<int, ncclUniqueId> outgoing, incoming;
  for (int peer : linked) {
    ncclUniqueId id;
    ncclResult_t status = ncclGetUniqueId(&id);
    if (status != ncclSuccess) {
      error = std::string("NCCL unique id: ") + ncclGetErrorString(status);
      return false;
    }
    std::string bytes(reinterpret_cast<const char *>(&id), sizeof id);
    if (!share(key(rank, peer), bytes, true, error))
      return false;
    outgoing[peer] = id;
  }
  for (int peer : linked) {
    std::string bytes;
    if (!share(key(peer, rank), bytes, false, error))
      return false;
    if (bytes.size() != sizeof(ncclUniqueId)) {
      error = "malformed NCCL unique id in the rendezvous store";
      return false;
    }
    std::memcpy(&incoming[peer], bytes.data(), sizeof(ncclUniqueId));
  }
  // All communicators at once: each initialisation waits for its peer, and
  // grouped they cannot wait for one another in a cycle.
  ncclGroupStart();
  for (int peer : linked) {
    ncclCommInitRank(&sendComms[peer], 2, outgoing[peer], 0);
    ncclCommInitRank(&recvComms[peer], 2, incoming[peer], 1);
  }
  ncclResult_t status = ncclGroupEnd();
  if (status != ncclSuccess) {
    error = std::string("NCCL communicators of the pipeline links: ") +
            ncclGetErrorString(status);
    return false;
  }
  for (const auto &[op, peer] : linkOps)
    if (sendComms.count(peer))
      peerOfOp[op] = peer;
  taken.insert(linked.begin(), linked.end());
  return true;
}

std::vector<std::pair<int, const proto::PlanOp *>>
CudaExecutor::linkedOps(const std::string &name,
                        const std::string &phase) const {
  std::vector<std::tuple<int, int64_t, const proto::PlanOp *>> found;
  int index = -1;
  for (const proto::PlanOp &op : program.ops()) {
    ++index;
    auto peer = peerOfOp.find(index);
    if (op.name() == name && phaseOf(op) == phase && peer != peerOfOp.end())
      found.emplace_back(peer->second, intAttr(op, "tag", 0), &op);
  }
  std::sort(found.begin(), found.end(), [](const auto &a, const auto &b) {
    return std::make_pair(std::get<0>(a), std::get<1>(a)) <
           std::make_pair(std::get<0>(b), std::get<1>(b));
  });
  std::vector<std::pair<int, const proto::PlanOp *>> ordered;
  for (const auto &[peer, tag, op] : found)
    ordered.emplace_back(peer, op);
  return ordered;
}

void CudaExecutor::reapSends() {
  auto done = std::remove_if(pendingSends.begin(), pendingSends.end(),
                             [](auto &pending) {
                               if (cudaEventQuery(pending.first) != cudaSuccess)
                                 return false;
                               cudaEventDestroy(pending.first);
                               return true;
                             });
  pendingSends.erase(done, pendingSends.end());
  cudaGetLastError(); // cudaErrorNotReady is not an error here
}

bool CudaExecutor::order(cudaStream_t signaller, cudaStream_t waiter,
                         std::string &error) {
  cudaEvent_t event;
  if (cudaFailed(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                 "creating a CUDA event", error))
    return false;
  bool ok = !cudaFailed(cudaEventRecord(event, signaller),
                        "recording a CUDA event", error) &&
            !cudaFailed(cudaStreamWaitEvent(waiter, event, 0),
                        "waiting for a CUDA event", error);
  // Released once the event completes.
  cudaEventDestroy(event);
  return ok;
}

bool CudaExecutor::allocate(const ShapeVec &shape, bool zero, DTensor &out,
                            std::string &error) {
  size_t bytes =
      static_cast<size_t>(std::max<int64_t>(1, numelOf(shape))) * sizeof(float);
  bytes = (bytes + 511) / 512 * 512;
  float *p = pool->take(bytes);
  if (!p) {
    error = "out of GPU memory allocating " + std::to_string(bytes) +
            " bytes for a " + spell(shape) + " tensor";
    return false;
  }
  std::weak_ptr<Pool> owner = pool;
  out.shape = shape;
  out.buffer = std::shared_ptr<float>(p, [owner, bytes](float *q) {
    if (auto alive = owner.lock())
      alive->give(q, bytes);
    else
      cudaFree(q);
  });
  if (zero)
    return !cudaFailed(
        cudaMemsetAsync(p, 0, numelOf(shape) * sizeof(float), computeStream()),
        "clearing a GPU tensor", error);
  return true;
}

bool CudaExecutor::upload(const Tensor &t, cudaStream_t stream, DTensor &out,
                          std::string &error) {
  if (!allocate(t.shape, false, out, error))
    return false;
  return !cudaFailed(cudaMemcpyAsync(out.data(), t.data.data(),
                                     t.data.size() * sizeof(float),
                                     cudaMemcpyHostToDevice, stream),
                     "copying to the GPU", error);
}

bool CudaExecutor::download(const DTensor &t, cudaStream_t stream, Tensor &out,
                            std::string &error) const {
  out = Tensor(t.shape);
  return !cudaFailed(cudaMemcpyAsync(out.data.data(), t.data(),
                                     out.data.size() * sizeof(float),
                                     cudaMemcpyDeviceToHost, stream),
                     "copying from the GPU", error) &&
         !cudaFailed(cudaStreamSynchronize(stream), "waiting for the GPU",
                     error);
}

bool CudaExecutor::fromHost(std::string &error) {
  if (cudaFailed(cudaSetDevice(device), "selecting the CUDA device", error))
    return false;
  params.clear();
  optimizer.clear();
  for (const auto &[key, t] : host.state()) {
    size_t slash = key.find('/');
    std::string kind = key.substr(0, slash), name = key.substr(slash + 1);
    if (kind == "opt.step") {
      optimizer[name].step = static_cast<int64_t>(t.data.at(0));
      continue;
    }
    DTensor d;
    if (!upload(t, computeStream(), d, error))
      return false;
    if (kind == "param")
      params[name] = std::move(d);
    else if (kind == "opt.m")
      optimizer[name].m = std::move(d);
    else if (kind == "opt.v")
      optimizer[name].v = std::move(d);
    else if (kind == "opt.velocity")
      optimizer[name].velocity = std::move(d);
  }
  return !cudaFailed(cudaStreamSynchronize(computeStream()),
                     "copying parameters to the GPU", error);
}

std::map<std::string, Tensor> CudaExecutor::parameters() const {
  std::map<std::string, Tensor> out;
  std::string error;
  cudaSetDevice(device);
  for (const auto &[name, t] : params)
    download(t, computeStream(), out[name], error);
  return out;
}

std::map<std::string, Tensor> CudaExecutor::state() const {
  std::map<std::string, Tensor> out;
  std::string error;
  cudaSetDevice(device);
  for (const auto &[name, t] : params)
    download(t, computeStream(), out["param/" + name], error);
  for (const auto &[name, s] : optimizer) {
    if (s.m.buffer)
      download(s.m, computeStream(), out["opt.m/" + name], error);
    if (s.v.buffer)
      download(s.v, computeStream(), out["opt.v/" + name], error);
    if (s.velocity.buffer)
      download(s.velocity, computeStream(), out["opt.velocity/" + name], error);
    out["opt.step/" + name] = Tensor({1}, static_cast<float>(s.step));
  }
  return out;
}

bool CudaExecutor::runPhase(const std::string &phase, int microBatch,
                            ValueTable &values, const MicroBatch &batch,
                            double &loss, std::string &error) {
  if (cudaFailed(cudaSetDevice(device), "selecting the CUDA device", error))
    return false;
  std::map<int64_t, DTensor> &table = live[microBatch];
  reapSends();
  // Pooled buffers may still be read by queued compute work: the receive
  // stream's copies into them start after it.
  if (!order(computeStream(), receiveStream(), error))
    return false;
  std::vector<const DTensor *> losses;
  bool received = false, computedSinceMark = false;
  // Values from NCCL-linked peers: every receive of the phase posted first,
  // in the order the peer sends them.
  for (const auto &[peer, op] : linkedOps("dtfm.recv", phase)) {
    DTensor d;
    if (!allocate(shapeOf(op->results(0)), false, d, error))
      return false;
    ncclResult_t status =
        ncclRecv(d.data(), static_cast<size_t>(d.numel()), ncclFloat, 0,
                 recvComms.at(peer), receiveStream());
    if (status != ncclSuccess) {
      error = std::string("dtfm.recv over NCCL: ") + ncclGetErrorString(status);
      return false;
    }
    table[op->results(0).id()] = std::move(d);
    received = true;
  }
  int index = -1;
  for (const proto::PlanOp &op : program.ops()) {
    ++index;
    const std::string &name = op.name();
    if (phaseOf(op) != phase || name == "dtfm.send" || peerOfOp.count(index))
      continue;
    auto fail = [&](const std::string &message) {
      error = "op #" + std::to_string(index) + " " + name + ": " + message;
      return false;
    };
    if (name == "dtfm.recv" || name == "dtfm.input" || name == "dtfm.label") {
      if (computedSinceMark) {
        if (!order(computeStream(), receiveStream(), error))
          return false;
        computedSinceMark = false;
      }
      const Tensor *source = nullptr;
      if (name == "dtfm.recv") {
        auto it = values.find(op.results(0).id());
        if (it == values.end())
          return fail("its value was never received");
        source = &it->second;
      } else {
        auto it = batch.find(stringAttr(op, "name"));
        if (it == batch.end())
          return fail("no data for '" + stringAttr(op, "name") + "'");
        if (it->second.shape != shapeOf(op.results(0)))
          return fail("data for '" + it->first + "' has the wrong shape");
        source = &it->second;
      }
      DTensor d;
      if (!upload(*source, receiveStream(), d, error))
        return fail(error);
      d.shape = shapeOf(op.results(0));
      table[op.results(0).id()] = std::move(d);
      received = true;
      continue;
    }
    if (received) { // the compute stream waits for the copies so far
      if (!order(receiveStream(), computeStream(), error))
        return false;
      received = false;
    }
    for (int i = 0; i < op.operands_size(); ++i)
      if (!table.count(op.operands(i)))
        return fail("operand " + std::to_string(i) +
                    " was not computed in this phase");
    computedSinceMark = true;
    bool ok = name == "dtfm.backward"
                  ? runBackward(op, table, error)
                  : runForward(index, op, table, losses, error);
    if (!ok || !checkLaunch(error))
      return fail(error);
  }
  if (received && !order(receiveStream(), computeStream(), error))
    return false;
  // Values to send, out on the send stream once computed: to NCCL-linked
  // peers directly (the buffers held until the stream is past them), to the
  // others through the host.
  if (!order(computeStream(), sendStream(), error))
    return false;
  std::vector<DTensor> sending;
  for (const auto &[peer, op] : linkedOps("dtfm.send", phase)) {
    auto it = table.find(op->operands(0));
    if (it == table.end()) {
      error = "dtfm.send: its value was not computed in this phase";
      return false;
    }
    ncclResult_t status =
        ncclSend(it->second.data(), static_cast<size_t>(it->second.numel()),
                 ncclFloat, 1, sendComms.at(peer), sendStream());
    if (status != ncclSuccess) {
      error = std::string("dtfm.send over NCCL: ") + ncclGetErrorString(status);
      return false;
    }
    sending.push_back(it->second);
  }
  if (!sending.empty()) {
    cudaEvent_t sent;
    if (cudaFailed(cudaEventCreateWithFlags(&sent, cudaEventDisableTiming),
                   "creating a CUDA event", error))
      return false;
    if (cudaFailed(cudaEventRecord(sent, sendStream()),
                   "recording a CUDA event", error)) {
      cudaEventDestroy(sent);
      return false;
    }
    pendingSends.emplace_back(sent, std::move(sending));
  }
  index = -1;
  for (const proto::PlanOp &op : program.ops()) {
    ++index;
    if (op.name() != "dtfm.send" || phaseOf(op) != phase ||
        peerOfOp.count(index))
      continue;
    auto it = table.find(op.operands(0));
    if (it == table.end()) {
      error = "dtfm.send: its value was not computed in this phase";
      return false;
    }
    if (!download(it->second, sendStream(), values[op.operands(0)], error))
      return false;
  }
  if (!gathered.empty() && !checkGathers(error))
    return false;
  for (const DTensor *l : losses) {
    Tensor value;
    if (!download(*l, computeStream(), value, error))
      return false;
    loss += value.data.at(0);
  }
  return true;
}

bool CudaExecutor::runForward(int opIndex, const proto::PlanOp &op,
                              std::map<int64_t, DTensor> &table,
                              std::vector<const DTensor *> &losses,
                              std::string &error) {
  const std::string &name = op.name();
  cudaStream_t stream = computeStream();
  auto in = [&](int i) -> const DTensor & { return table.at(op.operands(i)); };
  ShapeVec shape = op.results_size() ? shapeOf(op.results(0)) : ShapeVec{};
  DTensor out;
  auto fresh = [&](bool zero) { return allocate(shape, zero, out, error); };
  auto set = [&](int i, DTensor t) {
    t.shape = shapeOf(op.results(i));
    table[op.results(i).id()] = std::move(t);
    return true;
  };

  if (name == "dtfm.param") {
    std::string p = stringAttr(op, "name");
    auto it = params.find(p);
    if (it == params.end()) {
      error = "unknown parameter '" + p + "'";
      return false;
    }
    paramOfValue[op.results(0).id()] = p;
    return set(0, it->second);
  }
  if (name == "dtfm.constant") {
    Tensor t(shape);
    std::vector<int64_t> elements = intsAttr(op, "values", {});
    if (static_cast<int64_t>(elements.size()) != t.numel()) {
      error = "has the wrong number of values";
      return false;
    }
    std::copy(elements.begin(), elements.end(), t.data.begin());
    if (!upload(t, stream, out, error))
      return false;
    return set(0, std::move(out));
  }
  if (name == "dtfm.reshape" || name == "dtfm.flatten")
    return set(0, in(0));
  if (name == "dtfm.embedding") {
    const DTensor &ids = in(0), &weights = in(1);
    if (!fresh(false))
      return false;
    cuda::embedding(ids.data(), weights.data(), out.data(), ids.numel(),
                    weights.shape.back(), stream);
    return set(0, std::move(out));
  }
  if (std::optional<cuda::BinaryOp> binary = binaryOpOf(name)) {
    const DTensor &a = in(0), &b = in(1);
    if (!fresh(false))
      return false;
    if (name == "dtfm.add" && repeatsOver(a.shape, shape) &&
        repeatsOver(b.shape, shape)) // a bias, a position table: no views
      cuda::addRepeated(a.data(), a.numel(), b.data(), b.numel(), out.data(),
                        out.numel(), stream);
    else
      cuda::binaryStrided(
          *binary, a.data(), cuda::broadcastView(a.shape, shape), b.data(),
          cuda::broadcastView(b.shape, shape), out.data(), stream);
    return set(0, std::move(out));
  }
  if (std::optional<cuda::UnaryOp> math = unaryOpOf(name)) {
    if (!fresh(false))
      return false;
    cuda::unary(*math, in(0).data(), out.data(), out.numel(),
                floatAttr(op, "exponent", 1), stream);
    return set(0, std::move(out));
  }
  if (name == "dtfm.reduce_mean" || name == "dtfm.global_avg_pool") {
    const DTensor &x = in(0);
    cuda::MeanShape m = cuda::meanShape(x.shape, name == "dtfm.reduce_mean"
                                                     ? intsAttr(op, "axes", {})
                                                     : spatialAxes(x.shape));
    if (!fresh(false))
      return false;
    const float *operands[3] = {x.data(), nullptr, nullptr};
    cuda::reduceStrided(
        cuda::ReduceTerm::Value, operands,
        cuda::reductionOnto(m.kept, x.shape, {cuda::contiguousView(x.shape)}),
        out.data(), 1.0f / static_cast<float>(m.count), false, stream);
    return set(0, std::move(out));
  }
  if (name == "dtfm.transpose") {
    if (!fresh(false))
      return false;
    cuda::copyStrided(
        in(0).data(), cuda::permutedView(in(0).shape, intsAttr(op, "perm", {})),
        out.data(), cuda::contiguousView(shape), 1.0f, false, stream);
    return set(0, std::move(out));
  }
  if (name == "dtfm.slice") {
    if (!fresh(false))
      return false;
    cuda::copyStrided(
        in(0).data(),
        cuda::sliceView(in(0).shape, shape, intsAttr(op, "starts", {}),
                        intsAttr(op, "steps", {})),
        out.data(), cuda::contiguousView(shape), 1.0f, false, stream);
    return set(0, std::move(out));
  }
  if (name == "dtfm.concat") {
    int64_t axis = intAttr(op, "axis", 0), begin = 0;
    if (!fresh(false))
      return false;
    for (int i = 0; i < op.operands_size(); ++i) {
      const DTensor &part = in(i);
      cuda::copyStrided(part.data(), cuda::contiguousView(part.shape),
                        out.data(),
                        cuda::axisBlockView(shape, axis, begin, part.shape),
                        1.0f, false, stream);
      begin += part.shape[axis];
    }
    return set(0, std::move(out));
  }
  if (name == "dtfm.gather") {
    const DTensor &x = in(0), &indices = in(1);
    if (!fresh(false))
      return false;
    if (!gatherFlags.buffer &&
        !allocate({program.ops_size()}, true, gatherFlags, error))
      return false;
    cuda::GatherGeometry g =
        cuda::gatherGeometry(x.shape, intAttr(op, "axis", 0), indices.numel());
    cuda::gather(x.data(), indices.data(), g, out.data(),
                 reinterpret_cast<int *>(gatherFlags.data()) + opIndex, stream);
    gathered.emplace_back(opIndex, g.size);
    return set(0, std::move(out));
  }
  if (name == "dtfm.where") {
    const DTensor &c = in(0), &a = in(1), &b = in(2);
    if (!fresh(false))
      return false;
    cuda::whereStrided(c.data(), cuda::broadcastView(c.shape, shape), a.data(),
                       cuda::broadcastView(a.shape, shape), b.data(),
                       cuda::broadcastView(b.shape, shape), out.data(), stream);
    return set(0, std::move(out));
  }
  if (name == "dtfm.conv2d") {
    const DTensor &x = in(0), &w = in(1);
    cuda::ConvGeometry g = convGeometry(op, x.shape, w.shape, shape);
    int64_t rows = g.columnRows(), spatial = g.spatial();
    int64_t perChunk = std::clamp<int64_t>(
        kColumnFloats / std::max<int64_t>(1, rows * spatial), 1, g.n);
    DTensor columns;
    if (!fresh(false) ||
        !allocate({perChunk * rows * spatial}, false, columns, error))
      return false;
    for (int64_t first = 0; first < g.n; first += perChunk) {
      int64_t images = std::min(perChunk, g.n - first);
      for (int64_t group = 0; group < g.groups; ++group) {
        cuda::im2col(x.data(), g, first, images, group, columns.data(), stream);
        // out[image][group's filters] = filters [og, rows] x columns[image]
        cuda::MatmulShape s;
        s.m = g.filtersPerGroup();
        s.n = spatial;
        s.k = rows;
        s.batch = images;
        s.strideA = 0;
        s.strideB = rows * spatial;
        s.strideC = g.o * spatial;
        if (!matmul->run(s, w.data() + group * g.filtersPerGroup() * rows,
                         columns.data(),
                         out.data() +
                             (first * g.o + group * g.filtersPerGroup()) *
                                 spatial,
                         stream, error))
          return false;
      }
    }
    if (op.operands_size() > 2)
      cuda::binaryStrided(cuda::BinaryOp::Add, out.data(),
                          cuda::contiguousView(shape), in(2).data(),
                          cuda::broadcastView({g.o, 1, 1}, shape), out.data(),
                          stream);
    return set(0, std::move(out));
  }
  if (name == "dtfm.batchnorm") {
    const DTensor &x = in(0);
    int64_t n = x.shape[0], c = x.shape[1], inner = x.numel() / (n * c);
    DTensor mean, variance;
    if (!fresh(false) || !allocate({c}, false, mean, error) ||
        !allocate({c}, false, variance, error))
      return false;
    cuda::batchNorm(x.data(), in(1).data(), in(2).data(), out.data(),
                    mean.data(), variance.data(), n, c, inner,
                    static_cast<float>(floatAttr(op, "epsilon", 1e-5)), stream);
    // The running statistics are frozen parameters, updated in place.
    auto running = [&](int i) -> float * {
      auto p = op.operands_size() > i ? paramOfValue.find(op.operands(i))
                                      : paramOfValue.end();
      return p == paramOfValue.end() ? nullptr : params.at(p->second).data();
    };
    cuda::batchNormRunningStats(
        running(3), running(4), mean.data(), variance.data(), c, n * inner,
        static_cast<float>(floatAttr(op, "momentum", 0.1)), stream);
    return set(0, std::move(out));
  }
  if (name == "dtfm.max_pool2d" || name == "dtfm.avg_pool2d") {
    if (!fresh(false))
      return false;
    cuda::PoolGeometry g = poolGeometry(op, in(0).shape, shape);
    if (name == "dtfm.max_pool2d")
      cuda::maxPool2d(in(0).data(), g, out.data(), stream);
    else
      cuda::avgPool2d(in(0).data(), g, out.data(), stream);
    return set(0, std::move(out));
  }
  if (name == "dtfm.accumulate") {
    if (!fresh(false))
      return false;
    if (cudaFailed(cudaMemcpyAsync(out.data(), in(0).data(),
                                   out.numel() * sizeof(float),
                                   cudaMemcpyDeviceToDevice, stream),
                   "copying on the GPU", error))
      return false;
    for (int i = 1; i < op.operands_size(); ++i)
      cuda::accumulate(in(i).data(), out.data(), out.numel(), stream);
    return set(0, std::move(out));
  }
  if (name == "dtfm.linear" || name == "dtfm.matmul") {
    const DTensor &lhs = in(0), &rhs = in(1);
    bool transposeRhs = name == "dtfm.matmul" && unitAttr(op, "transpose_rhs");
    cuda::MatmulShape m;
    m.transB = transposeRhs;
    int64_t k = lhs.shape.back();
    m.k = k;
    m.n = transposeRhs ? rhs.shape[rhs.shape.size() - 2] : rhs.shape.back();
    if (rhs.shape.size() == 2) {
      m.m = lhs.numel() / k;
    } else { // batched over the leading dimensions
      m.m = lhs.shape[lhs.shape.size() - 2];
      m.batch = lhs.numel() / (m.m * k);
      m.strideA = m.m * k;
      m.strideB = k * m.n;
      m.strideC = m.m * m.n;
    }
    std::map<const float *, DTensor> rounded;
    if (!fresh(false) ||
        !multiply(m, productType(op), lhs, rhs, out.data(), rounded, error))
      return false;
    if (name == "dtfm.linear" && op.operands_size() > 2)
      cuda::addRepeated(out.data(), out.numel(), in(2).data(), in(2).numel(),
                        out.data(), out.numel(), stream);
    return set(0, std::move(out));
  }
  if (name == "dtfm.layernorm") {
    const DTensor &x = in(0);
    int64_t d = x.shape.back(), rows = x.numel() / d;
    DTensor mean, rstd;
    if (!fresh(false) || !allocate({rows}, false, mean, error) ||
        !allocate({rows}, false, rstd, error))
      return false;
    cuda::layerNorm(x.data(), in(1).data(), in(2).data(), out.data(),
                    mean.data(), rstd.data(), rows, d,
                    static_cast<float>(floatAttr(op, "epsilon", 1e-5)), stream);
    return set(0, std::move(out));
  }
  if (name == "dtfm.gelu" || name == "dtfm.relu") {
    if (!fresh(false))
      return false;
    if (name == "dtfm.gelu")
      cuda::gelu(in(0).data(), out.data(), out.numel(),
                 unitAttr(op, "tanh_approximation"), stream);
    else
      cuda::relu(in(0).data(), out.data(), out.numel(), stream);
    return set(0, std::move(out));
  }
  if (name == "dtfm.softmax") {
    int64_t d = in(0).shape.back();
    if (!fresh(false))
      return false;
    cuda::softmax(in(0).data(), out.data(), out.numel() / d, d, stream);
    return set(0, std::move(out));
  }
  if (name == "dtfm.causal_attention") {
    const DTensor &q = in(0);
    cuda::AttentionShape a{q.shape[0], q.shape[1], q.shape[2],
                           intAttr(op, "num_heads", 1)};
    DTensor probs, scratch;
    if (!fresh(true) ||
        !allocate({a.batch * a.heads * a.seq * a.seq}, false, probs, error) ||
        !allocate({a.scratchFloats()}, false, scratch, error))
      return false;
    if (!cuda::causalAttention(*matmul, a, q.data(), in(1).data(), in(2).data(),
                               out.data(), probs.data(), scratch.data(), stream,
                               error))
      return false;
    return set(0, std::move(out));
  }
  if (name == "dtfm.cross_entropy") {
    const DTensor &logits = in(0);
    int64_t classes = logits.shape.back(), rows = logits.numel() / classes;
    DTensor probs;
    if (!fresh(false) || !allocate(logits.shape, false, probs, error))
      return false;
    cuda::crossEntropy(logits.data(), in(1).data(), probs.data(), out.data(),
                       rows, classes, stream);
    set(0, std::move(out));
    losses.push_back(&table.at(op.results(0).id()));
    return true;
  }
  if (name == "dtfm.topk_compress") {
    const DTensor &x = in(0);
    int64_t k = intAttr(op, "k", 1);
    DTensor kept, indices, workspace;
    int64_t workFloats = static_cast<int64_t>(
        (cuda::topKWorkspaceBytes(x.numel()) + sizeof(float) - 1) /
        sizeof(float));
    if (!allocate(shapeOf(op.results(0)), false, kept, error) ||
        !allocate(shapeOf(op.results(1)), false, indices, error) ||
        !allocate({workFloats}, false, workspace, error))
      return false;
    cuda::topK(x.data(), x.numel(), k, kept.data(), indices.data(),
               workspace.data(), stream);
    set(0, std::move(kept));
    return set(1, std::move(indices));
  }
  if (name == "dtfm.topk_decompress") {
    if (!fresh(false))
      return false;
    cuda::scatterTopK(in(0).data(), in(1).data(), in(0).numel(), out.data(),
                      out.numel(), stream);
    return set(0, std::move(out));
  }
  error = "no CUDA kernel for this op";
  return false;
}

bool CudaExecutor::runBackward(const proto::PlanOp &op,
                               std::map<int64_t, DTensor> &table,
                               std::string &error) {
  std::string forward = stringAttr(op, "forward");
  std::vector<int64_t> wrt = intsAttr(op, "wrt", {});
  bool isLoss = forward == "dtfm.cross_entropy";
  int numOperands = op.operands_size() - (isLoss ? 0 : 1);
  cudaStream_t stream = computeStream();
  auto in = [&](int i) -> const DTensor & { return table.at(op.operands(i)); };
  const DTensor *dOut = isLoss ? nullptr : &in(op.operands_size() - 1);
  std::vector<DTensor> grads(numOperands);
  for (int64_t index : wrt) {
    if (index < 0 || index >= numOperands) {
      error = "dtfm.backward wrt index out of range";
      return false;
    }
    if (!allocate(in(index).shape, true, grads[index], error))
      return false;
  }
  auto at = [&](int i) -> float * {
    return i < numOperands ? grads[i].data() : nullptr;
  };
  // Recomputed forward values (as the CPU backward does).
  DTensor scratch, extra;

  if (forward == "dtfm.linear" || forward == "dtfm.matmul") {
    const DTensor &lhs = in(0), &rhs = in(1);
    bool transposeRhs =
        forward == "dtfm.matmul" && unitAttr(op, "transpose_rhs");
    int64_t k = lhs.shape.back();
    int64_t n =
        transposeRhs ? rhs.shape[rhs.shape.size() - 2] : rhs.shape.back();
    bool batched = rhs.shape.size() > 2;
    int64_t m = batched ? lhs.shape[lhs.shape.size() - 2] : lhs.numel() / k;
    int64_t batch = batched ? lhs.numel() / (m * k) : 1;
    cuda::ElementType type = productType(op);
    std::map<const float *, DTensor> rounded;
    auto strided = [&](cuda::MatmulShape s, int64_t sa, int64_t sb,
                       int64_t sc) {
      if (batched) {
        s.batch = batch;
        s.strideA = sa;
        s.strideB = sb;
        s.strideC = sc;
      }
      s.accumulate = true;
      return s;
    };
    if (at(0)) { // dLhs[m,k] += dOut[m,n] op(rhs)^T
      cuda::MatmulShape s;
      s.transB = !transposeRhs;
      s.m = m;
      s.n = k;
      s.k = n;
      if (!multiply(strided(s, m * n, k * n, m * k), type, *dOut, rhs, at(0),
                    rounded, error))
        return false;
    }
    if (at(1)) {
      cuda::MatmulShape s;
      s.transA = true;
      if (!transposeRhs) { // dRhs[k,n] += lhs^T dOut
        s.m = k;
        s.n = n;
        s.k = m;
        if (!multiply(strided(s, m * k, m * n, k * n), type, lhs, *dOut, at(1),
                      rounded, error))
          return false;
      } else { // dRhs[n,k] += dOut^T lhs
        s.m = n;
        s.n = k;
        s.k = m;
        if (!multiply(strided(s, m * n, m * k, n * k), type, *dOut, lhs, at(1),
                      rounded, error))
          return false;
      }
    }
    if (forward == "dtfm.linear" && numOperands > 2 && at(2))
      cuda::sumRepeated(dOut->data(), dOut->numel(), at(2), in(2).numel(),
                        stream);
  } else if (binaryOpOf(forward)) {
    // d(a op b): each side's term summed over the dimensions it repeats
    // along.
    const ShapeVec &out = dOut->shape;
    for (int i = 0; i < 2; ++i) {
      if (!at(i))
        continue;
      const DTensor &self = in(i), &other = in(1 - i);
      bool plainSum =
          forward == "dtfm.add" || (forward == "dtfm.sub" && i == 0);
      if (plainSum && repeatsOver(self.shape, out)) {
        cuda::sumRepeated(dOut->data(), dOut->numel(), at(i), self.numel(),
                          stream);
        continue;
      }
      cuda::ReduceTerm term = cuda::ReduceTerm::Value;
      const float *operands[3] = {dOut->data(), nullptr, nullptr};
      std::vector<cuda::StridedView> views = {
          cuda::broadcastView(dOut->shape, out)};
      float alpha = forward == "dtfm.sub" && i == 1 ? -1.0f : 1.0f;
      if (forward == "dtfm.mul") {
        term = cuda::ReduceTerm::Product;
        operands[1] = other.data();
        views.push_back(cuda::broadcastView(other.shape, out));
      } else if (forward == "dtfm.div") {
        const DTensor &a = in(0), &b = in(1);
        term = i == 0 ? cuda::ReduceTerm::Quotient
                      : cuda::ReduceTerm::DivisorGradient;
        operands[1] = i == 0 ? b.data() : a.data();
        views.push_back(cuda::broadcastView(i == 0 ? b.shape : a.shape, out));
        if (i == 1) {
          operands[2] = b.data();
          views.push_back(cuda::broadcastView(b.shape, out));
        }
      }
      cuda::reduceStrided(term, operands,
                          cuda::reductionOnto(self.shape, out, views), at(i),
                          alpha, true, stream);
    }
  } else if (std::optional<cuda::UnaryOp> math = unaryOpOf(forward)) {
    if (at(0))
      cuda::unaryBackward(*math, in(0).data(), dOut->data(), at(0),
                          in(0).numel(), floatAttr(op, "exponent", 1), stream);
  } else if (forward == "dtfm.reduce_mean" ||
             forward == "dtfm.global_avg_pool") {
    // dx += dOut spread evenly over the elements each mean averaged.
    const DTensor &x = in(0);
    cuda::MeanShape m = cuda::meanShape(x.shape, forward == "dtfm.reduce_mean"
                                                     ? intsAttr(op, "axes", {})
                                                     : spatialAxes(x.shape));
    if (at(0))
      cuda::copyStrided(dOut->data(), cuda::broadcastView(m.kept, x.shape),
                        at(0), cuda::contiguousView(x.shape),
                        1.0f / static_cast<float>(m.count), true, stream);
  } else if (forward == "dtfm.transpose") {
    if (at(0))
      cuda::copyStrided(
          dOut->data(), cuda::contiguousView(dOut->shape), at(0),
          cuda::permutedView(in(0).shape, intsAttr(op, "perm", {})), 1.0f, true,
          stream);
  } else if (forward == "dtfm.slice") {
    if (at(0))
      cuda::copyStrided(dOut->data(), cuda::contiguousView(dOut->shape), at(0),
                        cuda::sliceView(in(0).shape, dOut->shape,
                                        intsAttr(op, "starts", {}),
                                        intsAttr(op, "steps", {})),
                        1.0f, true, stream);
  } else if (forward == "dtfm.concat") {
    int64_t axis = intAttr(op, "axis", 0), begin = 0;
    for (int i = 0; i < numOperands; ++i) {
      if (at(i))
        cuda::copyStrided(
            dOut->data(),
            cuda::axisBlockView(dOut->shape, axis, begin, in(i).shape), at(i),
            cuda::contiguousView(in(i).shape), 1.0f, true, stream);
      begin += in(i).shape[axis];
    }
  } else if (forward == "dtfm.gather") {
    if (at(0))
      cuda::gatherBackward(in(1).data(), dOut->data(),
                           cuda::gatherGeometry(in(0).shape,
                                                intAttr(op, "axis", 0),
                                                in(1).numel()),
                           at(0), stream);
  } else if (forward == "dtfm.where") {
    const DTensor &condition = in(0);
    const ShapeVec &out = dOut->shape;
    for (int i = 1; i < 3; ++i) {
      if (!at(i))
        continue;
      const float *operands[3] = {dOut->data(), condition.data(), nullptr};
      cuda::reduceStrided(
          i == 1 ? cuda::ReduceTerm::WhereTrue : cuda::ReduceTerm::WhereFalse,
          operands,
          cuda::reductionOnto(in(i).shape, out,
                              {cuda::contiguousView(out),
                               cuda::broadcastView(condition.shape, out)}),
          at(i), 1.0f, true, stream);
    }
  } else if (forward == "dtfm.conv2d") {
    const DTensor &x = in(0), &w = in(1);
    cuda::ConvGeometry g = convGeometry(op, x.shape, w.shape, dOut->shape);
    int64_t rows = g.columnRows(), spatial = g.spatial(),
            og = g.filtersPerGroup();
    int64_t perChunk = std::clamp<int64_t>(
        kColumnFloats / std::max<int64_t>(1, rows * spatial), 1, g.n);
    DTensor columns, dcolumns;
    if ((at(1) &&
         !allocate({perChunk * rows * spatial}, false, columns, error)) ||
        (at(0) &&
         !allocate({perChunk * rows * spatial}, false, dcolumns, error)))
      return false;
    for (int64_t first = 0; first < g.n && (at(0) || at(1));
         first += perChunk) {
      int64_t images = std::min(perChunk, g.n - first);
      for (int64_t group = 0; group < g.groups; ++group) {
        const float *filters = w.data() + group * og * rows;
        const float *grads =
            dOut->data() + (first * g.o + group * og) * spatial;
        if (at(1)) { // dW [og, rows] += dOut[image] [og, spatial] columns^T
          cuda::im2col(x.data(), g, first, images, group, columns.data(),
                       stream);
          for (int64_t image = 0; image < images; ++image) {
            cuda::MatmulShape s;
            s.transB = true;
            s.m = og;
            s.n = rows;
            s.k = spatial;
            s.accumulate = true;
            if (!matmul->run(s, grads + image * g.o * spatial,
                             columns.data() + image * rows * spatial,
                             at(1) + group * og * rows, stream, error))
              return false;
          }
        }
        if (at(0)) { // dcolumns[image] = W^T [rows, og] dOut[image]
          cuda::MatmulShape s;
          s.transA = true;
          s.m = rows;
          s.n = spatial;
          s.k = og;
          s.batch = images;
          s.strideA = 0;
          s.strideB = g.o * spatial;
          s.strideC = rows * spatial;
          if (!matmul->run(s, filters, grads, dcolumns.data(), stream, error))
            return false;
          cuda::col2im(dcolumns.data(), g, first, images, group, at(0), stream);
        }
      }
    }
    if (numOperands > 2 && at(2)) {
      const float *operands[3] = {dOut->data(), nullptr, nullptr};
      cuda::reduceStrided(
          cuda::ReduceTerm::Value, operands,
          cuda::reductionOnto({g.o, 1, 1}, dOut->shape,
                              {cuda::contiguousView(dOut->shape)}),
          at(2), 1.0f, true, stream);
    }
  } else if (forward == "dtfm.batchnorm") {
    const DTensor &x = in(0);
    int64_t n = x.shape[0], c = x.shape[1], inner = x.numel() / (n * c);
    cuda::batchNormBackward(
        x.data(), in(1).data(), dOut->data(), at(0), at(1), at(2), n, c, inner,
        static_cast<float>(floatAttr(op, "epsilon", 1e-5)), stream);
  } else if (forward == "dtfm.max_pool2d" || forward == "dtfm.avg_pool2d") {
    if (at(0)) {
      cuda::PoolGeometry g = poolGeometry(op, in(0).shape, dOut->shape);
      if (forward == "dtfm.max_pool2d")
        cuda::maxPool2dBackward(in(0).data(), dOut->data(), g, at(0), stream);
      else
        cuda::avgPool2dBackward(dOut->data(), g, at(0), stream);
    }
  } else if (forward == "dtfm.layernorm") {
    const DTensor &x = in(0);
    int64_t d = x.shape.back(), rows = x.numel() / d;
    DTensor mean, rstd;
    if (!allocate(x.shape, false, scratch, error) ||
        !allocate({rows}, false, mean, error) ||
        !allocate({rows}, false, rstd, error))
      return false;
    cuda::layerNorm(x.data(), in(1).data(), in(2).data(), scratch.data(),
                    mean.data(), rstd.data(), rows, d,
                    static_cast<float>(floatAttr(op, "epsilon", 1e-5)), stream);
    cuda::layerNormBackward(x.data(), in(1).data(), mean.data(), rstd.data(),
                            dOut->data(), at(0), at(1), at(2), rows, d, stream);
  } else if (forward == "dtfm.gelu") {
    if (at(0))
      cuda::geluBackward(in(0).data(), dOut->data(), at(0), in(0).numel(),
                         unitAttr(op, "tanh_approximation"), stream);
  } else if (forward == "dtfm.relu") {
    if (at(0)) {
      if (!allocate(in(0).shape, false, scratch, error))
        return false;
      cuda::relu(in(0).data(), scratch.data(), in(0).numel(), stream);
      cuda::reluBackward(scratch.data(), dOut->data(), at(0), in(0).numel(),
                         stream);
    }
  } else if (forward == "dtfm.softmax") {
    if (at(0)) {
      int64_t d = in(0).shape.back(), rows = in(0).numel() / d;
      if (!allocate(in(0).shape, false, scratch, error))
        return false;
      cuda::softmax(in(0).data(), scratch.data(), rows, d, stream);
      cuda::softmaxBackward(scratch.data(), dOut->data(), at(0), rows, d,
                            stream);
    }
  } else if (forward == "dtfm.causal_attention") {
    const DTensor &q = in(0);
    cuda::AttentionShape a{q.shape[0], q.shape[1], q.shape[2],
                           intAttr(op, "num_heads", 1)};
    DTensor out, probs;
    if (!allocate(q.shape, true, out, error) ||
        !allocate({a.batch * a.heads * a.seq * a.seq}, false, probs, error) ||
        !allocate({a.scratchFloats()}, false, scratch, error))
      return false;
    if (!cuda::causalAttention(*matmul, a, q.data(), in(1).data(), in(2).data(),
                               out.data(), probs.data(), scratch.data(), stream,
                               error) ||
        !cuda::causalAttentionBackward(
            *matmul, a, q.data(), in(1).data(), in(2).data(), probs.data(),
            dOut->data(), at(0), at(1), at(2), scratch.data(), stream, error))
      return false;
  } else if (forward == "dtfm.embedding") {
    if (at(1))
      cuda::embeddingBackward(in(0).data(), dOut->data(), at(1), in(0).numel(),
                              in(1).shape.back(), stream);
  } else if (forward == "dtfm.cross_entropy") {
    const DTensor &logits = in(0);
    int64_t classes = logits.shape.back(), rows = logits.numel() / classes;
    if (!allocate(logits.shape, false, scratch, error) ||
        !allocate({1}, false, extra, error))
      return false;
    cuda::crossEntropy(logits.data(), in(1).data(), scratch.data(),
                       extra.data(), rows, classes, stream);
    if (at(0))
      cuda::crossEntropyBackward(scratch.data(), in(1).data(), at(0), rows,
                                 classes, 1.0f, stream);
  } else if (forward == "dtfm.reshape" || forward == "dtfm.flatten") {
    if (at(0))
      cuda::accumulate(dOut->data(), at(0), dOut->numel(), stream);
  } else {
    error = "no CUDA backward for " + forward;
    return false;
  }
  for (size_t k = 0; k < wrt.size(); ++k) {
    DTensor g = std::move(grads[wrt[k]]);
    g.shape = shapeOf(op.results(k));
    table[op.results(k).id()] = std::move(g);
  }
  return true;
}

void CudaExecutor::collectGradients(int microBatch, const ValueTable &) {
  cudaSetDevice(device);
  auto found = live.find(microBatch);
  if (found == live.end())
    return;
  std::map<int64_t, DTensor> &table = found->second;
  std::string error;
  for (const proto::PlanOp &op : program.ops()) {
    if (phaseOf(op) != "opt")
      continue;
    for (int64_t id : op.operands()) {
      auto it = table.find(id);
      if (it == table.end() || paramOfValue.count(id))
        continue;
      DTensor &sum = gradSum[id];
      if (sum.shape != it->second.shape &&
          !allocate(it->second.shape, true, sum, error))
        continue; // finishIteration reports the missing gradient
      cuda::accumulate(it->second.data(), sum.data(), sum.numel(),
                       computeStream());
    }
  }
  live.erase(found);
}

bool CudaExecutor::finishIteration(int microBatches, const SyncFn &sync,
                                   std::string &error) {
  if (cudaFailed(cudaSetDevice(device), "selecting the CUDA device", error))
    return false;
  cudaStream_t stream = computeStream();
  auto fail = [&](const proto::PlanOp &op, const std::string &message) {
    error = op.name() + ": " + message;
    return false;
  };
  std::map<int64_t, DTensor> values;
  float scale = static_cast<float>(1.0 / std::max(1, microBatches));
  for (auto &[id, sum] : gradSum) {
    cuda::scale(sum.data(), sum.numel(), scale, stream);
    values[id] = std::move(sum);
  }
  gradSum.clear();
  // Gradient syncs, in one bucket through the host (the worker's
  // transport), then back to the device.
  std::vector<const proto::PlanOp *> syncs;
  for (const proto::PlanOp &op : program.ops()) {
    if (phaseOf(op) != "opt" || op.name() != "dtfm.grad_sync")
      continue;
    auto in = values.find(op.operands(0));
    if (in == values.end())
      return fail(op, "its gradient was never computed");
    values[op.results(0).id()] = in->second;
    syncs.push_back(&op);
  }
  if (comm && !syncs.empty()) { // on the device, averaged in place
    ncclGroupStart();
    for (const proto::PlanOp *op : syncs) {
      DTensor &g = values.at(op->results(0).id());
      ncclResult_t status =
          ncclAllReduce(g.data(), g.data(), static_cast<size_t>(g.numel()),
                        ncclFloat, ncclSum, comm, stream);
      if (status != ncclSuccess) {
        ncclGroupEnd();
        error = std::string("gradient allreduce (NCCL): ") +
                ncclGetErrorString(status);
        return false;
      }
    }
    ncclResult_t status = ncclGroupEnd();
    if (status != ncclSuccess) {
      error = std::string("gradient allreduce (NCCL): ") +
              ncclGetErrorString(status);
      return false;
    }
    for (const proto::PlanOp *op : syncs) {
      DTensor &g = values.at(op->results(0).id());
      cuda::scale(g.data(), g.numel(), 1.0f / static_cast<float>(groupSize),
                  stream);
    }
  } else if (sync && !syncs.empty()) {
    std::vector<Tensor> hostGrads(syncs.size());
    std::vector<std::pair<const proto::PlanOp *, Tensor *>> synced;
    for (size_t i = 0; i < syncs.size(); ++i) {
      if (!download(values.at(syncs[i]->results(0).id()), stream, hostGrads[i],
                    error))
        return false;
      synced.push_back({syncs[i], &hostGrads[i]});
    }
    if (!sync(synced, error))
      return false;
    for (size_t i = 0; i < syncs.size(); ++i) {
      DTensor d;
      if (!upload(hostGrads[i], stream, d, error))
        return false;
      values[syncs[i]->results(0).id()] = std::move(d);
    }
  }
  for (const proto::PlanOp &op : program.ops()) {
    if (phaseOf(op) != "opt" || op.name() == "dtfm.grad_sync")
      continue;
    OptimizerUpdate update;
    if (!readUpdate(op, paramOfValue, update, error))
      return fail(op, error);
    DTensor &param = params.at(update.parameter);
    auto grad = values.find(op.operands(1));
    if (grad == values.end())
      return fail(op, "its gradient was never computed");
    OptimizerState &state = optimizer[update.parameter];
    ++state.step;
    auto f = [](double x) { return static_cast<float>(x); };
    if (update.adamw) {
      if ((!state.m.buffer && !allocate(param.shape, true, state.m, error)) ||
          (!state.v.buffer && !allocate(param.shape, true, state.v, error)))
        return false;
      cuda::adamwStep(param.data(), grad->second.data(), state.m.data(),
                      state.v.data(), param.numel(), state.step, f(update.lr),
                      f(update.beta1), f(update.beta2), f(update.epsilon),
                      f(update.weightDecay), stream);
    } else {
      if (!state.velocity.buffer &&
          !allocate(param.shape, true, state.velocity, error))
        return false;
      cuda::sgdStep(param.data(), grad->second.data(), state.velocity.data(),
                    param.numel(), f(update.lr), f(update.momentum),
                    f(update.weightDecay), stream);
    }
    if (!checkLaunch(error))
      return fail(op, error);
  }
  return !cudaFailed(cudaStreamSynchronize(stream), "the optimizer step",
                     error);
}

} // namespace

bool dtfm::runtime::cuda::supportsProgram(const proto::DeviceProgram &program,
                                          std::string &reason) {
  std::map<int64_t, ShapeVec> shapes;
  for (const proto::PlanOp &op : program.ops())
    for (const proto::PlanValue &v : op.results())
      shapes[v.id()] = shapeOf(v);
  auto shapeOfOperand = [&](const proto::PlanOp &op, int i) {
    auto it = shapes.find(op.operands(i));
    return it == shapes.end() ? ShapeVec{} : it->second;
  };
  int index = -1;
  for (const proto::PlanOp &op : program.ops()) {
    ++index;
    std::string where = "op #" + std::to_string(index) + " " + op.name();
    const std::string &name = op.name();
    if (!forwardOps().count(name)) {
      reason = where + " has no CUDA kernel";
      return false;
    }
    std::string kind =
        name == "dtfm.backward" ? stringAttr(op, "forward") : name;
    if (name == "dtfm.backward" && !backwardOps().count(kind)) {
      reason = where + " of " + kind + " has no CUDA kernel";
      return false;
    }
    for (int i = 0; i < op.operands_size(); ++i)
      if (shapeOfOperand(op, i).size() > static_cast<size_t>(cuda::kMaxRank)) {
        reason = where + ": operand " + std::to_string(i) + " of rank " +
                 std::to_string(shapeOfOperand(op, i).size()) +
                 " (the CUDA kernels take up to " +
                 std::to_string(cuda::kMaxRank) + ")";
        return false;
      }
    if (kind == "dtfm.softmax") {
      int64_t axis = intAttr(op, "axis", -1);
      int64_t rank = static_cast<int64_t>(shapeOfOperand(op, 0).size());
      if (axis != -1 && axis != rank - 1) {
        reason = where + ": only the last axis has a CUDA kernel";
        return false;
      }
    }
    if (kind == "dtfm.matmul" && op.operands_size() >= 2) {
      ShapeVec lhs = shapeOfOperand(op, 0), rhs = shapeOfOperand(op, 1);
      if (rhs.size() > 2 &&
          (lhs.size() != rhs.size() ||
           !std::equal(lhs.begin(), lhs.end() - 2, rhs.begin()))) {
        reason = where + ": batched " + spell(lhs) + " x " + spell(rhs) +
                 " with broadcast batch dimensions has no CUDA kernel";
        return false;
      }
    }
  }
  return true;
}

std::unique_ptr<StageExecutor>
dtfm::runtime::cuda::makeCudaExecutor(const proto::DeviceProgram &program,
                                      int device, bool planPrecisionMatmuls,
                                      std::string &error) {
  auto executor =
      std::make_unique<CudaExecutor>(program, device, planPrecisionMatmuls);
  if (!executor->setUp(error))
    return nullptr;
  return executor;
}

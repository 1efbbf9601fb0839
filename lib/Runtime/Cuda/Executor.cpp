//===- Executor.cpp - Run a device program on a GPU -----------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Cuda/Executor.h"

#include "dtfm/Runtime/Cuda/Attention.h"
#include "dtfm/Runtime/Cuda/Device.h"
#include "dtfm/Runtime/Cuda/IndexMaps.h"
#include "dtfm/Runtime/Cuda/Kernels.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

using namespace dtfm;
using namespace dtfm::runtime;
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

/// The elementwise kernels' operation of an op kind.
std::optional<cuda::BinaryOp> binaryOpOf(OpKind kind) {
  switch (kind) {
  case OpKind::Add:
    return cuda::BinaryOp::Add;
  case OpKind::Sub:
    return cuda::BinaryOp::Sub;
  case OpKind::Mul:
    return cuda::BinaryOp::Mul;
  case OpKind::Div:
    return cuda::BinaryOp::Div;
  default:
    return std::nullopt;
  }
}

std::optional<cuda::UnaryOp> unaryOpOf(OpKind kind) {
  switch (kind) {
  case OpKind::Sqrt:
    return cuda::UnaryOp::Sqrt;
  case OpKind::Tanh:
    return cuda::UnaryOp::Tanh;
  case OpKind::Erf:
    return cuda::UnaryOp::Erf;
  case OpKind::Exp:
    return cuda::UnaryOp::Exp;
  case OpKind::Pow:
    return cuda::UnaryOp::Pow;
  default:
    return std::nullopt;
  }
}

/// The dimensions after the first two (global average pooling).
std::vector<int64_t> spatialAxes(const ShapeVec &shape) {
  std::vector<int64_t> axes;
  for (size_t d = 2; d < shape.size(); ++d)
    axes.push_back(static_cast<int64_t>(d));
  return axes;
}

cuda::ConvGeometry convGeometry(const ProgramOp &op, const ShapeVec &x,
                                const ShapeVec &w, const ShapeVec &out) {
  const cpu::Window &window = op.attrs.window;
  cuda::ConvGeometry g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.o = w[0], g.kh = w[2], g.kw = w[3];
  g.ho = out[2], g.wo = out[3];
  g.groups = op.attrs.groups;
  g.strideH = window.strideH, g.strideW = window.strideW;
  g.padTop = window.padTop, g.padLeft = window.padLeft;
  g.dilationH = window.dilationH, g.dilationW = window.dilationW;
  return g;
}

cuda::PoolGeometry poolGeometry(const ProgramOp &op, const ShapeVec &x,
                                const ShapeVec &out) {
  const cpu::Window &window = op.attrs.window;
  const std::array<int64_t, 2> &kernel = op.attrs.kernel;
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

/// What a CUDA forward kernel sees: the op, the micro-batch's device
/// values, the compute stream, and its first result's shape and buffer.
struct ForwardCall {
  const ProgramOp &op;
  std::map<int64_t, DTensor> &table;
  cudaStream_t stream;
  ShapeVec shape;
  DTensor out;

  const DTensor &in(int i) const { return table.at(op.operands[i]); }
  int numOperands() const { return static_cast<int>(op.operands.size()); }
  bool set(int i, DTensor t) {
    t.shape = op.results[i].shape;
    table[op.results[i].id] = std::move(t);
    return true;
  }
};

/// What a CUDA backward kernel sees: the forward's operands, the gradient
/// of its result (null for the loss), the operands' gradients to add to
/// (null where not wanted), and scratch tensors kept until it returns.
struct BackwardCall {
  const ProgramOp &op;
  std::map<int64_t, DTensor> &table;
  cudaStream_t stream;
  int numOperands;
  const DTensor *dOut;
  std::vector<DTensor> &grads;
  DTensor scratch, extra; // recomputed forward values

  const DTensor &in(int i) const { return table.at(op.operands[i]); }
  float *at(int i) const { return i < numOperands ? grads[i].data() : nullptr; }
};

class CudaExecutor;

/// The CUDA backend's kernels, indexed by op kind (null: no CUDA kernel).
struct CudaKernels {
  bool (CudaExecutor::*forward)(ForwardCall &, std::string &) = nullptr;
  bool (CudaExecutor::*backward)(BackwardCall &, std::string &) = nullptr;
};

class CudaExecutor : public PhaseExecutor {
public:
  CudaExecutor(const StageProgram &program, int device, bool planPrecision)
      : PhaseExecutor(program), device(device), planPrecision(planPrecision),
        pool(std::make_shared<Pool>()) {}
  ~CudaExecutor() override;

  bool setUp(std::string &error);

  bool initialize(uint64_t seed, std::string &error,
                  const std::map<std::string, Tensor> *weights) override {
    return host.initialize(program, seed, weights, error) && fromHost(error);
  }
  bool loadParameters(const std::string &path, std::string &error) override {
    return host.load(program, path, error) && fromHost(error);
  }
  bool saveParameters(const std::string &path,
                      std::string &error) const override {
    return format::writeTensorFile(path, parameters(), error);
  }
  std::map<std::string, Tensor> state() const override;
  bool restoreState(const std::map<std::string, Tensor> &state,
                    std::string &error) override {
    return host.restore(program, state, error) && fromHost(error);
  }
  void collectGradients(int microBatch, const ValueTable &values) override;
  bool finishIteration(int microBatches, const SyncFn &sync,
                       std::string &error) override;
  std::map<std::string, Tensor> parameters() const override;
  bool connectGroup(const std::vector<int> &members, int position,
                    const ShareFn &share, std::string &error) override;
  bool connectPeers(int rank, const std::map<int, int> &linkOps,
                    const ShareFn &share, std::set<int> &taken,
                    std::string &error) override;

  /// The kernel table (supportsProgram looks ops up in it).
  static const OpTable<CudaKernels> &kernelTable();

protected:
  bool beginPhase(OpPhase phase, int microBatch, ValueTable &values,
                  std::string &error) override;
  bool movesItself(const ProgramOp &op) const override {
    return peerOfOp.count(op.index) > 0;
  }
  bool bindHostValue(const ProgramOp &op, int microBatch, const Tensor &value,
                     ValueTable &values, std::string &error) override;
  bool hasValue(int microBatch, int64_t id,
                const ValueTable &values) const override;
  bool runOp(const ProgramOp &op, int microBatch, ValueTable &values,
             double &loss, std::string &error) override;
  bool endPhase(OpPhase phase, int microBatch, ValueTable &values, double &loss,
                std::string &error) override;

private:
  /// "<host>/<PCI bus id>" of this executor's GPU.
  bool gpuIdentity(std::string &identity, std::string &error) const;
  /// The phase's dtfm.recv / dtfm.send ops on NCCL links, by peer then tag
  /// (the order both ends post them in).
  std::vector<std::pair<int, const ProgramOp *>> linkedOps(OpKind kind,
                                                           OpPhase phase) const;
  /// Releases the buffers of sends the send stream has finished.
  void reapSends();
  cudaStream_t receiveStream() const { return streams[0]; }
  cudaStream_t computeStream() const { return streams[1]; }
  cudaStream_t sendStream() const { return streams[2]; }
  /// Makes `waiter` wait for what `signaller` has queued so far.
  bool order(cudaStream_t signaller, cudaStream_t waiter, std::string &error);
  bool allocate(const ShapeVec &shape, bool zero, DTensor &out,
                std::string &error);
  /// The buffer of a forward kernel's first result.
  bool fresh(ForwardCall &c, bool zero, std::string &error) {
    return allocate(c.shape, zero, c.out, error);
  }
  bool upload(const Tensor &t, cudaStream_t stream, DTensor &out,
              std::string &error);
  /// Copies to the host on `stream` and waits for it.
  bool download(const DTensor &t, cudaStream_t stream, Tensor &out,
                std::string &error) const;
  /// Parameters and optimizer state from the host state.
  bool fromHost(std::string &error);
  /// The gradients of one forward op through its backward kernel.
  bool runBackward(const ProgramOp &op, std::map<int64_t, DTensor> &table,
                   std::string &error);
  bool checkLaunch(std::string &error) const;
  /// The type op's matmuls multiply in: the plan's type of its result
  /// (fp16/bf16 on tensor cores, accumulating in fp32), or fp32 when the
  /// run asked for fp32 products or the plan is fp32.
  cuda::ElementType productType(const ProgramOp &op) const;
  /// c (fp32) = the product `shape` of a and b (fp32 tensors); in a half
  /// type they are rounded into scratch first, each tensor once per op
  /// (`rounded`).
  bool multiply(cuda::MatmulShape shape, cuda::ElementType type,
                const DTensor &a, const DTensor &b, float *c,
                std::map<const float *, DTensor> &rounded, std::string &error);
  /// Fails naming the first gather of the phase that met a bad index.
  bool checkGathers(std::string &error);

  // The kernels (kernelTable() maps op kinds to them).
  bool forwardConstant(ForwardCall &c, std::string &error);
  bool forwardView(ForwardCall &c, std::string &error);
  bool forwardEmbedding(ForwardCall &c, std::string &error);
  bool forwardBinary(ForwardCall &c, std::string &error);
  bool forwardUnary(ForwardCall &c, std::string &error);
  bool forwardMean(ForwardCall &c, std::string &error);
  bool forwardTranspose(ForwardCall &c, std::string &error);
  bool forwardSlice(ForwardCall &c, std::string &error);
  bool forwardConcat(ForwardCall &c, std::string &error);
  bool forwardGather(ForwardCall &c, std::string &error);
  bool forwardWhere(ForwardCall &c, std::string &error);
  bool forwardConv2d(ForwardCall &c, std::string &error);
  bool forwardBatchNorm(ForwardCall &c, std::string &error);
  bool forwardPool(ForwardCall &c, std::string &error);
  bool forwardAccumulate(ForwardCall &c, std::string &error);
  bool forwardProduct(ForwardCall &c, std::string &error);
  bool forwardLayerNorm(ForwardCall &c, std::string &error);
  bool forwardActivation(ForwardCall &c, std::string &error);
  bool forwardSoftmax(ForwardCall &c, std::string &error);
  bool forwardAttention(ForwardCall &c, std::string &error);
  bool forwardCrossEntropy(ForwardCall &c, std::string &error);
  bool forwardTopkCompress(ForwardCall &c, std::string &error);
  bool forwardTopkDecompress(ForwardCall &c, std::string &error);
  bool backwardProduct(BackwardCall &c, std::string &error);
  bool backwardBinary(BackwardCall &c, std::string &error);
  bool backwardUnary(BackwardCall &c, std::string &error);
  bool backwardMean(BackwardCall &c, std::string &error);
  bool backwardTranspose(BackwardCall &c, std::string &error);
  bool backwardSlice(BackwardCall &c, std::string &error);
  bool backwardConcat(BackwardCall &c, std::string &error);
  bool backwardGather(BackwardCall &c, std::string &error);
  bool backwardWhere(BackwardCall &c, std::string &error);
  bool backwardConv2d(BackwardCall &c, std::string &error);
  bool backwardBatchNorm(BackwardCall &c, std::string &error);
  bool backwardPool(BackwardCall &c, std::string &error);
  bool backwardLayerNorm(BackwardCall &c, std::string &error);
  bool backwardGelu(BackwardCall &c, std::string &error);
  bool backwardRelu(BackwardCall &c, std::string &error);
  bool backwardSoftmax(BackwardCall &c, std::string &error);
  bool backwardAttention(BackwardCall &c, std::string &error);
  bool backwardEmbedding(BackwardCall &c, std::string &error);
  bool backwardCrossEntropy(BackwardCall &c, std::string &error);
  bool backwardView(BackwardCall &c, std::string &error);

  int device;
  bool planPrecision;
  /// Initializers, parameter files and the state's format, on the host.
  HostState host;
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
  /// The phase running: whether the compute stream must wait for the
  /// receive stream's copies, or the receive stream for computations
  /// (pooled buffers may still be read by them), and its losses.
  bool received = false, computedSinceMark = false;
  std::vector<const DTensor *> phaseLosses;
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
  std::vector<int> flags(program.ops.size(), 0);
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
    int64_t axis = program.ops[index].attrs.axis;
    error = "op #" + std::to_string(index) +
            " dtfm.gather: an index outside [" + std::to_string(-size) + ", " +
            std::to_string(size) + ") on axis " + std::to_string(axis);
    cudaMemsetAsync(gatherFlags.data(), 0, flags.size() * sizeof(int),
                    computeStream());
    return false;
  }
  return true;
}

cuda::ElementType CudaExecutor::productType(const ProgramOp &op) const {
  if (!planPrecision || op.results.empty())
    return cuda::ElementType::F32;
  switch (op.results[0].type) {
  case ElementType::F16:
    return cuda::ElementType::F16;
  case ElementType::BF16:
    return cuda::ElementType::BF16;
  default:
    return cuda::ElementType::F32;
  }
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

std::vector<std::pair<int, const ProgramOp *>>
CudaExecutor::linkedOps(OpKind kind, OpPhase phase) const {
  std::vector<std::tuple<int, int64_t, const ProgramOp *>> found;
  for (int index : program.opsOf(phase)) {
    const ProgramOp &op = program.ops[index];
    auto peer = peerOfOp.find(op.index);
    if (op.kind == kind && peer != peerOfOp.end())
      found.emplace_back(peer->second, op.attrs.tag, &op);
  }
  std::sort(found.begin(), found.end(), [](const auto &a, const auto &b) {
    return std::make_pair(std::get<0>(a), std::get<1>(a)) <
           std::make_pair(std::get<0>(b), std::get<1>(b));
  });
  std::vector<std::pair<int, const ProgramOp *>> ordered;
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
  for (const auto &[name, t] : host.params)
    if (!upload(t, computeStream(), params[name], error))
      return false;
  for (const auto &[name, moments] : host.optimizer) {
    OptimizerState &s = optimizer[name];
    s.step = moments.step;
    for (auto [from, to] :
         {std::pair{&moments.m, &s.m}, std::pair{&moments.v, &s.v},
          std::pair{&moments.velocity, &s.velocity}})
      if (!from->data.empty() && !upload(*from, computeStream(), *to, error))
        return false;
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
  // Downloaded into a host state: its state() is the one format.
  HostState copy;
  std::string error;
  cudaSetDevice(device);
  copy.params = parameters();
  for (const auto &[name, s] : optimizer) {
    HostState::Moments &m = copy.optimizer[name];
    m.step = s.step;
    if (s.m.buffer)
      download(s.m, computeStream(), m.m, error);
    if (s.v.buffer)
      download(s.v, computeStream(), m.v, error);
    if (s.velocity.buffer)
      download(s.velocity, computeStream(), m.velocity, error);
  }
  return copy.state();
}

bool CudaExecutor::beginPhase(OpPhase phase, int microBatch, ValueTable &,
                              std::string &error) {
  if (cudaFailed(cudaSetDevice(device), "selecting the CUDA device", error))
    return false;
  std::map<int64_t, DTensor> &table = live[microBatch];
  reapSends();
  phaseLosses.clear();
  received = computedSinceMark = false;
  // Pooled buffers may still be read by queued compute work: the receive
  // stream's copies into them start after it.
  if (!order(computeStream(), receiveStream(), error))
    return false;
  // Values from NCCL-linked peers: every receive of the phase posted first,
  // in the order the peer sends them.
  for (const auto &[peer, op] : linkedOps(OpKind::Recv, phase)) {
    DTensor d;
    if (!allocate(op->results[0].shape, false, d, error))
      return false;
    ncclResult_t status =
        ncclRecv(d.data(), static_cast<size_t>(d.numel()), ncclFloat, 0,
                 recvComms.at(peer), receiveStream());
    if (status != ncclSuccess) {
      error = std::string("dtfm.recv over NCCL: ") + ncclGetErrorString(status);
      return false;
    }
    table[op->results[0].id] = std::move(d);
    received = true;
  }
  return true;
}

bool CudaExecutor::bindHostValue(const ProgramOp &op, int microBatch,
                                 const Tensor &value, ValueTable &,
                                 std::string &error) {
  if (computedSinceMark) {
    if (!order(computeStream(), receiveStream(), error))
      return false;
    computedSinceMark = false;
  }
  DTensor d;
  if (!upload(value, receiveStream(), d, error))
    return false;
  d.shape = op.results[0].shape;
  live[microBatch][op.results[0].id] = std::move(d);
  received = true;
  return true;
}

bool CudaExecutor::hasValue(int microBatch, int64_t id,
                            const ValueTable &) const {
  auto it = live.find(microBatch);
  return it != live.end() && it->second.count(id) > 0;
}

bool CudaExecutor::runOp(const ProgramOp &op, int microBatch, ValueTable &,
                         double &, std::string &error) {
  if (received) { // the compute stream waits for the copies so far
    if (!order(receiveStream(), computeStream(), error))
      return false;
    received = false;
  }
  computedSinceMark = true;
  std::map<int64_t, DTensor> &table = live[microBatch];
  if (op.kind == OpKind::Param) {
    auto it = params.find(op.attrs.name);
    if (it == params.end()) {
      error = "unknown parameter '" + op.attrs.name + "'";
      return false;
    }
    paramOfValue[op.results[0].id] = op.attrs.name;
    DTensor value = it->second;
    value.shape = op.results[0].shape;
    table[op.results[0].id] = std::move(value);
    return true;
  }
  bool ok;
  if (op.isBackward()) {
    ok = runBackward(op, table, error);
  } else {
    auto kernel = kernelTable()[static_cast<size_t>(op.computes)].forward;
    if (!kernel) {
      error = "no CUDA kernel for this op";
      return false;
    }
    ForwardCall call{op, table, computeStream(),
                     op.results.empty() ? ShapeVec{} : op.results[0].shape,
                     DTensor()};
    ok = (this->*kernel)(call, error);
  }
  return ok && checkLaunch(error);
}

bool CudaExecutor::endPhase(OpPhase phase, int microBatch, ValueTable &values,
                            double &loss, std::string &error) {
  std::map<int64_t, DTensor> &table = live[microBatch];
  if (received && !order(receiveStream(), computeStream(), error))
    return false;
  // Values to send, out on the send stream once computed: to NCCL-linked
  // peers directly (the buffers held until the stream is past them), to the
  // others through the host.
  if (!order(computeStream(), sendStream(), error))
    return false;
  std::vector<DTensor> sending;
  for (const auto &[peer, op] : linkedOps(OpKind::Send, phase)) {
    auto it = table.find(op->operands[0]);
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
  for (int index : program.opsOf(phase)) {
    const ProgramOp &op = program.ops[index];
    if (op.kind != OpKind::Send || movesItself(op))
      continue;
    auto it = table.find(op.operands[0]);
    if (it == table.end()) {
      error = "dtfm.send: its value was not computed in this phase";
      return false;
    }
    if (!download(it->second, sendStream(), values[op.operands[0]], error))
      return false;
  }
  if (!gathered.empty() && !checkGathers(error))
    return false;
  for (const DTensor *l : phaseLosses) {
    Tensor value;
    if (!download(*l, computeStream(), value, error))
      return false;
    loss += value.data.at(0);
  }
  phaseLosses.clear();
  return true;
}

bool CudaExecutor::runBackward(const ProgramOp &op,
                               std::map<int64_t, DTensor> &table,
                               std::string &error) {
  auto kernel = kernelTable()[static_cast<size_t>(op.computes)].backward;
  if (!kernel) {
    error = std::string("no CUDA backward for ") + opName(op.computes);
    return false;
  }
  const std::vector<int64_t> &wrt = op.attrs.wrt;
  bool isLoss = op.computes == OpKind::CrossEntropy;
  int numOperands = static_cast<int>(op.operands.size()) - (isLoss ? 0 : 1);
  if (numOperands < 0 || wrt.size() != op.results.size()) {
    error = "dtfm.backward with " + std::to_string(wrt.size()) +
            " wrt indices for " + std::to_string(op.results.size()) +
            " results";
    return false;
  }
  const DTensor *dOut = isLoss ? nullptr : &table.at(op.operands.back());
  std::vector<DTensor> grads(numOperands);
  for (int64_t index : wrt) {
    if (index < 0 || index >= numOperands) {
      error = "dtfm.backward wrt index out of range";
      return false;
    }
    if (!allocate(table.at(op.operands[index]).shape, true, grads[index],
                  error))
      return false;
  }
  BackwardCall call{op,   table, computeStream(), numOperands,
                    dOut, grads, DTensor(),       DTensor()};
  if (!(this->*kernel)(call, error))
    return false;
  for (size_t k = 0; k < wrt.size(); ++k) {
    DTensor g = std::move(grads[wrt[k]]);
    g.shape = op.results[k].shape;
    table[op.results[k].id] = std::move(g);
  }
  return true;
}

const OpTable<CudaKernels> &CudaExecutor::kernelTable() {
  static const OpTable<CudaKernels> table = [] {
    OpTable<CudaKernels> t{};
    auto at = [&](OpKind kind) -> CudaKernels & {
      return t[static_cast<size_t>(kind)];
    };
    at(OpKind::Constant).forward = &CudaExecutor::forwardConstant;
    at(OpKind::Reshape).forward = &CudaExecutor::forwardView;
    at(OpKind::Flatten).forward = &CudaExecutor::forwardView;
    at(OpKind::Embedding).forward = &CudaExecutor::forwardEmbedding;
    at(OpKind::Add).forward = &CudaExecutor::forwardBinary;
    at(OpKind::Sub).forward = &CudaExecutor::forwardBinary;
    at(OpKind::Mul).forward = &CudaExecutor::forwardBinary;
    at(OpKind::Div).forward = &CudaExecutor::forwardBinary;
    at(OpKind::Sqrt).forward = &CudaExecutor::forwardUnary;
    at(OpKind::Tanh).forward = &CudaExecutor::forwardUnary;
    at(OpKind::Erf).forward = &CudaExecutor::forwardUnary;
    at(OpKind::Exp).forward = &CudaExecutor::forwardUnary;
    at(OpKind::Pow).forward = &CudaExecutor::forwardUnary;
    at(OpKind::ReduceMean).forward = &CudaExecutor::forwardMean;
    at(OpKind::GlobalAvgPool).forward = &CudaExecutor::forwardMean;
    at(OpKind::Transpose).forward = &CudaExecutor::forwardTranspose;
    at(OpKind::Slice).forward = &CudaExecutor::forwardSlice;
    at(OpKind::Concat).forward = &CudaExecutor::forwardConcat;
    at(OpKind::Gather).forward = &CudaExecutor::forwardGather;
    at(OpKind::Where).forward = &CudaExecutor::forwardWhere;
    at(OpKind::Conv2d).forward = &CudaExecutor::forwardConv2d;
    at(OpKind::BatchNorm).forward = &CudaExecutor::forwardBatchNorm;
    at(OpKind::MaxPool2d).forward = &CudaExecutor::forwardPool;
    at(OpKind::AvgPool2d).forward = &CudaExecutor::forwardPool;
    at(OpKind::Accumulate).forward = &CudaExecutor::forwardAccumulate;
    at(OpKind::Linear).forward = &CudaExecutor::forwardProduct;
    at(OpKind::Matmul).forward = &CudaExecutor::forwardProduct;
    at(OpKind::LayerNorm).forward = &CudaExecutor::forwardLayerNorm;
    at(OpKind::Gelu).forward = &CudaExecutor::forwardActivation;
    at(OpKind::Relu).forward = &CudaExecutor::forwardActivation;
    at(OpKind::Softmax).forward = &CudaExecutor::forwardSoftmax;
    at(OpKind::CausalAttention).forward = &CudaExecutor::forwardAttention;
    at(OpKind::CrossEntropy).forward = &CudaExecutor::forwardCrossEntropy;
    at(OpKind::TopkCompress).forward = &CudaExecutor::forwardTopkCompress;
    at(OpKind::TopkDecompress).forward = &CudaExecutor::forwardTopkDecompress;
    at(OpKind::Linear).backward = &CudaExecutor::backwardProduct;
    at(OpKind::Matmul).backward = &CudaExecutor::backwardProduct;
    at(OpKind::Add).backward = &CudaExecutor::backwardBinary;
    at(OpKind::Sub).backward = &CudaExecutor::backwardBinary;
    at(OpKind::Mul).backward = &CudaExecutor::backwardBinary;
    at(OpKind::Div).backward = &CudaExecutor::backwardBinary;
    at(OpKind::Sqrt).backward = &CudaExecutor::backwardUnary;
    at(OpKind::Tanh).backward = &CudaExecutor::backwardUnary;
    at(OpKind::Erf).backward = &CudaExecutor::backwardUnary;
    at(OpKind::Exp).backward = &CudaExecutor::backwardUnary;
    at(OpKind::Pow).backward = &CudaExecutor::backwardUnary;
    at(OpKind::ReduceMean).backward = &CudaExecutor::backwardMean;
    at(OpKind::GlobalAvgPool).backward = &CudaExecutor::backwardMean;
    at(OpKind::Transpose).backward = &CudaExecutor::backwardTranspose;
    at(OpKind::Slice).backward = &CudaExecutor::backwardSlice;
    at(OpKind::Concat).backward = &CudaExecutor::backwardConcat;
    at(OpKind::Gather).backward = &CudaExecutor::backwardGather;
    at(OpKind::Where).backward = &CudaExecutor::backwardWhere;
    at(OpKind::Conv2d).backward = &CudaExecutor::backwardConv2d;
    at(OpKind::BatchNorm).backward = &CudaExecutor::backwardBatchNorm;
    at(OpKind::MaxPool2d).backward = &CudaExecutor::backwardPool;
    at(OpKind::AvgPool2d).backward = &CudaExecutor::backwardPool;
    at(OpKind::LayerNorm).backward = &CudaExecutor::backwardLayerNorm;
    at(OpKind::Gelu).backward = &CudaExecutor::backwardGelu;
    at(OpKind::Relu).backward = &CudaExecutor::backwardRelu;
    at(OpKind::Softmax).backward = &CudaExecutor::backwardSoftmax;
    at(OpKind::CausalAttention).backward = &CudaExecutor::backwardAttention;
    at(OpKind::Embedding).backward = &CudaExecutor::backwardEmbedding;
    at(OpKind::CrossEntropy).backward = &CudaExecutor::backwardCrossEntropy;
    at(OpKind::Reshape).backward = &CudaExecutor::backwardView;
    at(OpKind::Flatten).backward = &CudaExecutor::backwardView;
    return t;
  }();
  return table;
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

bool CudaExecutor::forwardConstant(ForwardCall &call, std::string &error) {
  Tensor t(call.shape);
  std::vector<int64_t> elements = call.op.attrs.values;
  if (static_cast<int64_t>(elements.size()) != t.numel()) {
    error = "has the wrong number of values";
    return false;
  }
  std::copy(elements.begin(), elements.end(), t.data.begin());
  if (!upload(t, call.stream, call.out, error))
    return false;
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardView(ForwardCall &call, std::string &error) {
  return call.set(0, call.in(0));
}

bool CudaExecutor::forwardEmbedding(ForwardCall &call, std::string &error) {
  const DTensor &ids = call.in(0), &weights = call.in(1);
  if (!fresh(call, false, error))
    return false;
  cuda::embedding(ids.data(), weights.data(), call.out.data(), ids.numel(),
                  weights.shape.back(), call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardBinary(ForwardCall &call, std::string &error) {
  std::optional<cuda::BinaryOp> binary = binaryOpOf(call.op.computes);
  const DTensor &a = call.in(0), &b = call.in(1);
  if (!fresh(call, false, error))
    return false;
  if (call.op.computes == OpKind::Add && repeatsOver(a.shape, call.shape) &&
      repeatsOver(b.shape, call.shape)) // a bias, a position table: no views
    cuda::addRepeated(a.data(), a.numel(), b.data(), b.numel(), call.out.data(),
                      call.out.numel(), call.stream);
  else
    cuda::binaryStrided(
        *binary, a.data(), cuda::broadcastView(a.shape, call.shape), b.data(),
        cuda::broadcastView(b.shape, call.shape), call.out.data(), call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardUnary(ForwardCall &call, std::string &error) {
  std::optional<cuda::UnaryOp> math = unaryOpOf(call.op.computes);
  if (!fresh(call, false, error))
    return false;
  cuda::unary(*math, call.in(0).data(), call.out.data(), call.out.numel(),
              call.op.attrs.exponent, call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardMean(ForwardCall &call, std::string &error) {
  const DTensor &x = call.in(0);
  cuda::MeanShape m = cuda::meanShape(
      x.shape, call.op.computes == OpKind::ReduceMean ? call.op.attrs.axes
                                                      : spatialAxes(x.shape));
  if (!fresh(call, false, error))
    return false;
  const float *operands[3] = {x.data(), nullptr, nullptr};
  cuda::reduceStrided(
      cuda::ReduceTerm::Value, operands,
      cuda::reductionOnto(m.kept, x.shape, {cuda::contiguousView(x.shape)}),
      call.out.data(), 1.0f / static_cast<float>(m.count), false, call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardTranspose(ForwardCall &call, std::string &error) {
  if (!fresh(call, false, error))
    return false;
  cuda::copyStrided(call.in(0).data(),
                    cuda::permutedView(call.in(0).shape, call.op.attrs.perm),
                    call.out.data(), cuda::contiguousView(call.shape), 1.0f,
                    false, call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardSlice(ForwardCall &call, std::string &error) {
  if (!fresh(call, false, error))
    return false;
  cuda::copyStrided(call.in(0).data(),
                    cuda::sliceView(call.in(0).shape, call.shape,
                                    call.op.attrs.starts, call.op.attrs.steps),
                    call.out.data(), cuda::contiguousView(call.shape), 1.0f,
                    false, call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardConcat(ForwardCall &call, std::string &error) {
  int64_t axis = call.op.attrs.axis, begin = 0;
  if (!fresh(call, false, error))
    return false;
  for (int i = 0; i < call.numOperands(); ++i) {
    const DTensor &part = call.in(i);
    cuda::copyStrided(part.data(), cuda::contiguousView(part.shape),
                      call.out.data(),
                      cuda::axisBlockView(call.shape, axis, begin, part.shape),
                      1.0f, false, call.stream);
    begin += part.shape[axis];
  }
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardGather(ForwardCall &call, std::string &error) {
  const DTensor &x = call.in(0), &indices = call.in(1);
  if (!fresh(call, false, error))
    return false;
  if (!gatherFlags.buffer &&
      !allocate({static_cast<int64_t>(program.ops.size())}, true, gatherFlags,
                error))
    return false;
  cuda::GatherGeometry g =
      cuda::gatherGeometry(x.shape, call.op.attrs.axis, indices.numel());
  cuda::gather(x.data(), indices.data(), g, call.out.data(),
               reinterpret_cast<int *>(gatherFlags.data()) + call.op.index,
               call.stream);
  gathered.emplace_back(call.op.index, g.size);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardWhere(ForwardCall &call, std::string &error) {
  const DTensor &condition = call.in(0), &a = call.in(1), &b = call.in(2);
  if (!fresh(call, false, error))
    return false;
  cuda::whereStrided(
      condition.data(), cuda::broadcastView(condition.shape, call.shape),
      a.data(), cuda::broadcastView(a.shape, call.shape), b.data(),
      cuda::broadcastView(b.shape, call.shape), call.out.data(), call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardConv2d(ForwardCall &call, std::string &error) {
  const DTensor &x = call.in(0), &w = call.in(1);
  cuda::ConvGeometry g = convGeometry(call.op, x.shape, w.shape, call.shape);
  int64_t rows = g.columnRows(), spatial = g.spatial();
  int64_t perChunk = std::clamp<int64_t>(
      kColumnFloats / std::max<int64_t>(1, rows * spatial), 1, g.n);
  DTensor columns;
  if (!fresh(call, false, error) ||
      !allocate({perChunk * rows * spatial}, false, columns, error))
    return false;
  for (int64_t first = 0; first < g.n; first += perChunk) {
    int64_t images = std::min(perChunk, g.n - first);
    for (int64_t group = 0; group < g.groups; ++group) {
      cuda::im2col(x.data(), g, first, images, group, columns.data(),
                   call.stream);
      // out[image][group's filters] = filters [og, rows] x columns[image]
      cuda::MatmulShape s;
      s.m = g.filtersPerGroup();
      s.n = spatial;
      s.k = rows;
      s.batch = images;
      s.strideA = 0;
      s.strideB = rows * spatial;
      s.strideC = g.o * spatial;
      if (!matmul->run(
              s, w.data() + group * g.filtersPerGroup() * rows, columns.data(),
              call.out.data() +
                  (first * g.o + group * g.filtersPerGroup()) * spatial,
              call.stream, error))
        return false;
    }
  }
  if (call.numOperands() > 2)
    cuda::binaryStrided(cuda::BinaryOp::Add, call.out.data(),
                        cuda::contiguousView(call.shape), call.in(2).data(),
                        cuda::broadcastView({g.o, 1, 1}, call.shape),
                        call.out.data(), call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardBatchNorm(ForwardCall &call, std::string &error) {
  const DTensor &x = call.in(0);
  int64_t n = x.shape[0], c = x.shape[1], inner = x.numel() / (n * c);
  DTensor mean, variance;
  if (!fresh(call, false, error) || !allocate({c}, false, mean, error) ||
      !allocate({c}, false, variance, error))
    return false;
  cuda::batchNorm(x.data(), call.in(1).data(), call.in(2).data(),
                  call.out.data(), mean.data(), variance.data(), n, c, inner,
                  static_cast<float>(call.op.attrs.epsilon), call.stream);
  // The running statistics are frozen parameters, updated in place.
  auto running = [&](int i) -> float * {
    auto p = call.numOperands() > i ? paramOfValue.find(call.op.operands[i])
                                    : paramOfValue.end();
    return p == paramOfValue.end() ? nullptr : params.at(p->second).data();
  };
  cuda::batchNormRunningStats(
      running(3), running(4), mean.data(), variance.data(), c, n * inner,
      static_cast<float>(call.op.attrs.momentum), call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardPool(ForwardCall &call, std::string &error) {
  if (!fresh(call, false, error))
    return false;
  cuda::PoolGeometry g = poolGeometry(call.op, call.in(0).shape, call.shape);
  if (call.op.computes == OpKind::MaxPool2d)
    cuda::maxPool2d(call.in(0).data(), g, call.out.data(), call.stream);
  else
    cuda::avgPool2d(call.in(0).data(), g, call.out.data(), call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardAccumulate(ForwardCall &call, std::string &error) {
  if (!fresh(call, false, error))
    return false;
  if (cudaFailed(cudaMemcpyAsync(call.out.data(), call.in(0).data(),
                                 call.out.numel() * sizeof(float),
                                 cudaMemcpyDeviceToDevice, call.stream),
                 "copying on the GPU", error))
    return false;
  for (int i = 1; i < call.numOperands(); ++i)
    cuda::accumulate(call.in(i).data(), call.out.data(), call.out.numel(),
                     call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardProduct(ForwardCall &call, std::string &error) {
  const DTensor &lhs = call.in(0), &rhs = call.in(1);
  bool transposeRhs =
      call.op.computes == OpKind::Matmul && call.op.attrs.transposeRhs;
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
  if (!fresh(call, false, error) || !multiply(m, productType(call.op), lhs, rhs,
                                              call.out.data(), rounded, error))
    return false;
  if (call.op.computes == OpKind::Linear && call.numOperands() > 2)
    cuda::addRepeated(call.out.data(), call.out.numel(), call.in(2).data(),
                      call.in(2).numel(), call.out.data(), call.out.numel(),
                      call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardLayerNorm(ForwardCall &call, std::string &error) {
  const DTensor &x = call.in(0);
  int64_t d = x.shape.back(), rows = x.numel() / d;
  DTensor mean, rstd;
  if (!fresh(call, false, error) || !allocate({rows}, false, mean, error) ||
      !allocate({rows}, false, rstd, error))
    return false;
  cuda::layerNorm(x.data(), call.in(1).data(), call.in(2).data(),
                  call.out.data(), mean.data(), rstd.data(), rows, d,
                  static_cast<float>(call.op.attrs.epsilon), call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardActivation(ForwardCall &call, std::string &error) {
  if (!fresh(call, false, error))
    return false;
  if (call.op.computes == OpKind::Gelu)
    cuda::gelu(call.in(0).data(), call.out.data(), call.out.numel(),
               call.op.attrs.tanhApproximation, call.stream);
  else
    cuda::relu(call.in(0).data(), call.out.data(), call.out.numel(),
               call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardSoftmax(ForwardCall &call, std::string &error) {
  int64_t d = call.in(0).shape.back();
  if (!fresh(call, false, error))
    return false;
  cuda::softmax(call.in(0).data(), call.out.data(), call.out.numel() / d, d,
                call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardAttention(ForwardCall &call, std::string &error) {
  const DTensor &q = call.in(0);
  cuda::AttentionShape a{q.shape[0], q.shape[1], q.shape[2],
                         call.op.attrs.numHeads};
  DTensor probs, scratch;
  if (!fresh(call, true, error) ||
      !allocate({a.batch * a.heads * a.seq * a.seq}, false, probs, error) ||
      !allocate({a.scratchFloats()}, false, scratch, error))
    return false;
  if (!cuda::causalAttention(*matmul, a, q.data(), call.in(1).data(),
                             call.in(2).data(), call.out.data(), probs.data(),
                             scratch.data(), call.stream, error))
    return false;
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardCrossEntropy(ForwardCall &call, std::string &error) {
  const DTensor &logits = call.in(0);
  int64_t classes = logits.shape.back(), rows = logits.numel() / classes;
  DTensor probs;
  if (!fresh(call, false, error) ||
      !allocate(logits.shape, false, probs, error))
    return false;
  cuda::crossEntropy(logits.data(), call.in(1).data(), probs.data(),
                     call.out.data(), rows, classes, call.stream);
  call.set(0, std::move(call.out));
  phaseLosses.push_back(&call.table.at(call.op.results[0].id));
  return true;
}

bool CudaExecutor::forwardTopkCompress(ForwardCall &call, std::string &error) {
  const DTensor &x = call.in(0);
  int64_t k = call.op.attrs.k;
  DTensor kept, indices, workspace;
  int64_t workFloats = static_cast<int64_t>(
      (cuda::topKWorkspaceBytes(x.numel()) + sizeof(float) - 1) /
      sizeof(float));
  if (!allocate(call.op.results[0].shape, false, kept, error) ||
      !allocate(call.op.results[1].shape, false, indices, error) ||
      !allocate({workFloats}, false, workspace, error))
    return false;
  cuda::topK(x.data(), x.numel(), k, kept.data(), indices.data(),
             workspace.data(), call.stream);
  call.set(0, std::move(kept));
  return call.set(1, std::move(indices));
}

bool CudaExecutor::forwardTopkDecompress(ForwardCall &call,
                                         std::string &error) {
  if (!fresh(call, false, error))
    return false;
  cuda::scatterTopK(call.in(0).data(), call.in(1).data(), call.in(0).numel(),
                    call.out.data(), call.out.numel(), call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::backwardProduct(BackwardCall &call, std::string &error) {
  const DTensor &lhs = call.in(0), &rhs = call.in(1);
  bool transposeRhs =
      call.op.computes == OpKind::Matmul && call.op.attrs.transposeRhs;
  int64_t k = lhs.shape.back();
  int64_t n = transposeRhs ? rhs.shape[rhs.shape.size() - 2] : rhs.shape.back();
  bool batched = rhs.shape.size() > 2;
  int64_t m = batched ? lhs.shape[lhs.shape.size() - 2] : lhs.numel() / k;
  int64_t batch = batched ? lhs.numel() / (m * k) : 1;
  cuda::ElementType type = productType(call.op);
  std::map<const float *, DTensor> rounded;
  auto strided = [&](cuda::MatmulShape s, int64_t sa, int64_t sb, int64_t sc) {
    if (batched) {
      s.batch = batch;
      s.strideA = sa;
      s.strideB = sb;
      s.strideC = sc;
    }
    s.accumulate = true;
    return s;
  };
  if (call.at(0)) { // dLhs[m,k] += dOut[m,n] op(rhs)^T
    cuda::MatmulShape s;
    s.transB = !transposeRhs;
    s.m = m;
    s.n = k;
    s.k = n;
    if (!multiply(strided(s, m * n, k * n, m * k), type, *call.dOut, rhs,
                  call.at(0), rounded, error))
      return false;
  }
  if (call.at(1)) {
    cuda::MatmulShape s;
    s.transA = true;
    if (!transposeRhs) { // dRhs[k,n] += lhs^T dOut
      s.m = k;
      s.n = n;
      s.k = m;
      if (!multiply(strided(s, m * k, m * n, k * n), type, lhs, *call.dOut,
                    call.at(1), rounded, error))
        return false;
    } else { // dRhs[n,k] += dOut^T lhs
      s.m = n;
      s.n = k;
      s.k = m;
      if (!multiply(strided(s, m * n, m * k, n * k), type, *call.dOut, lhs,
                    call.at(1), rounded, error))
        return false;
    }
  }
  if (call.op.computes == OpKind::Linear && call.numOperands > 2 && call.at(2))
    cuda::sumRepeated(call.dOut->data(), call.dOut->numel(), call.at(2),
                      call.in(2).numel(), call.stream);
  return true;
}

bool CudaExecutor::backwardBinary(BackwardCall &call, std::string &error) {
  // d(a op b): each side's term summed over the dimensions it repeats
  // along.
  const ShapeVec &out = call.dOut->shape;
  for (int i = 0; i < 2; ++i) {
    if (!call.at(i))
      continue;
    const DTensor &self = call.in(i), &other = call.in(1 - i);
    bool plainSum = call.op.computes == OpKind::Add ||
                    (call.op.computes == OpKind::Sub && i == 0);
    if (plainSum && repeatsOver(self.shape, out)) {
      cuda::sumRepeated(call.dOut->data(), call.dOut->numel(), call.at(i),
                        self.numel(), call.stream);
      continue;
    }
    cuda::ReduceTerm term = cuda::ReduceTerm::Value;
    const float *operands[3] = {call.dOut->data(), nullptr, nullptr};
    std::vector<cuda::StridedView> views = {
        cuda::broadcastView(call.dOut->shape, out)};
    float alpha = call.op.computes == OpKind::Sub && i == 1 ? -1.0f : 1.0f;
    if (call.op.computes == OpKind::Mul) {
      term = cuda::ReduceTerm::Product;
      operands[1] = other.data();
      views.push_back(cuda::broadcastView(other.shape, out));
    } else if (call.op.computes == OpKind::Div) {
      const DTensor &a = call.in(0), &b = call.in(1);
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
                        cuda::reductionOnto(self.shape, out, views), call.at(i),
                        alpha, true, call.stream);
  }
  return true;
}

bool CudaExecutor::backwardUnary(BackwardCall &call, std::string &error) {
  std::optional<cuda::UnaryOp> math = unaryOpOf(call.op.computes);
  if (call.at(0))
    cuda::unaryBackward(*math, call.in(0).data(), call.dOut->data(), call.at(0),
                        call.in(0).numel(), call.op.attrs.exponent,
                        call.stream);
  return true;
}

bool CudaExecutor::backwardMean(BackwardCall &call, std::string &error) {
  // dx += dOut spread evenly over the elements each mean averaged.
  const DTensor &x = call.in(0);
  cuda::MeanShape m = cuda::meanShape(
      x.shape, call.op.computes == OpKind::ReduceMean ? call.op.attrs.axes
                                                      : spatialAxes(x.shape));
  if (call.at(0))
    cuda::copyStrided(call.dOut->data(), cuda::broadcastView(m.kept, x.shape),
                      call.at(0), cuda::contiguousView(x.shape),
                      1.0f / static_cast<float>(m.count), true, call.stream);
  return true;
}

bool CudaExecutor::backwardTranspose(BackwardCall &call, std::string &error) {
  if (call.at(0))
    cuda::copyStrided(call.dOut->data(), cuda::contiguousView(call.dOut->shape),
                      call.at(0),
                      cuda::permutedView(call.in(0).shape, call.op.attrs.perm),
                      1.0f, true, call.stream);
  return true;
}

bool CudaExecutor::backwardSlice(BackwardCall &call, std::string &error) {
  if (call.at(0))
    cuda::copyStrided(
        call.dOut->data(), cuda::contiguousView(call.dOut->shape), call.at(0),
        cuda::sliceView(call.in(0).shape, call.dOut->shape,
                        call.op.attrs.starts, call.op.attrs.steps),
        1.0f, true, call.stream);
  return true;
}

bool CudaExecutor::backwardConcat(BackwardCall &call, std::string &error) {
  int64_t axis = call.op.attrs.axis, begin = 0;
  for (int i = 0; i < call.numOperands; ++i) {
    if (call.at(i))
      cuda::copyStrided(
          call.dOut->data(),
          cuda::axisBlockView(call.dOut->shape, axis, begin, call.in(i).shape),
          call.at(i), cuda::contiguousView(call.in(i).shape), 1.0f, true,
          call.stream);
    begin += call.in(i).shape[axis];
  }
  return true;
}

bool CudaExecutor::backwardGather(BackwardCall &call, std::string &error) {
  if (call.at(0))
    cuda::gatherBackward(call.in(1).data(), call.dOut->data(),
                         cuda::gatherGeometry(call.in(0).shape,
                                              call.op.attrs.axis,
                                              call.in(1).numel()),
                         call.at(0), call.stream);
  return true;
}

bool CudaExecutor::backwardWhere(BackwardCall &call, std::string &error) {
  const DTensor &condition = call.in(0);
  const ShapeVec &out = call.dOut->shape;
  for (int i = 1; i < 3; ++i) {
    if (!call.at(i))
      continue;
    const float *operands[3] = {call.dOut->data(), condition.data(), nullptr};
    cuda::reduceStrided(
        i == 1 ? cuda::ReduceTerm::WhereTrue : cuda::ReduceTerm::WhereFalse,
        operands,
        cuda::reductionOnto(call.in(i).shape, out,
                            {cuda::contiguousView(out),
                             cuda::broadcastView(condition.shape, out)}),
        call.at(i), 1.0f, true, call.stream);
  }
  return true;
}

bool CudaExecutor::backwardConv2d(BackwardCall &call, std::string &error) {
  const DTensor &x = call.in(0), &w = call.in(1);
  cuda::ConvGeometry g =
      convGeometry(call.op, x.shape, w.shape, call.dOut->shape);
  int64_t rows = g.columnRows(), spatial = g.spatial(),
          og = g.filtersPerGroup();
  int64_t perChunk = std::clamp<int64_t>(
      kColumnFloats / std::max<int64_t>(1, rows * spatial), 1, g.n);
  DTensor columns, dcolumns;
  if ((call.at(1) &&
       !allocate({perChunk * rows * spatial}, false, columns, error)) ||
      (call.at(0) &&
       !allocate({perChunk * rows * spatial}, false, dcolumns, error)))
    return false;
  for (int64_t first = 0; first < g.n && (call.at(0) || call.at(1));
       first += perChunk) {
    int64_t images = std::min(perChunk, g.n - first);
    for (int64_t group = 0; group < g.groups; ++group) {
      const float *filters = w.data() + group * og * rows;
      const float *grads =
          call.dOut->data() + (first * g.o + group * og) * spatial;
      if (call.at(1)) { // dW [og, rows] += dOut[image] [og, spatial] columns^T
        cuda::im2col(x.data(), g, first, images, group, columns.data(),
                     call.stream);
        for (int64_t image = 0; image < images; ++image) {
          cuda::MatmulShape s;
          s.transB = true;
          s.m = og;
          s.n = rows;
          s.k = spatial;
          s.accumulate = true;
          if (!matmul->run(s, grads + image * g.o * spatial,
                           columns.data() + image * rows * spatial,
                           call.at(1) + group * og * rows, call.stream, error))
            return false;
        }
      }
      if (call.at(0)) { // dcolumns[image] = W^T [rows, og] dOut[image]
        cuda::MatmulShape s;
        s.transA = true;
        s.m = rows;
        s.n = spatial;
        s.k = og;
        s.batch = images;
        s.strideA = 0;
        s.strideB = g.o * spatial;
        s.strideC = rows * spatial;
        if (!matmul->run(s, filters, grads, dcolumns.data(), call.stream,
                         error))
          return false;
        cuda::col2im(dcolumns.data(), g, first, images, group, call.at(0),
                     call.stream);
      }
    }
  }
  if (call.numOperands > 2 && call.at(2)) {
    const float *operands[3] = {call.dOut->data(), nullptr, nullptr};
    cuda::reduceStrided(
        cuda::ReduceTerm::Value, operands,
        cuda::reductionOnto({g.o, 1, 1}, call.dOut->shape,
                            {cuda::contiguousView(call.dOut->shape)}),
        call.at(2), 1.0f, true, call.stream);
  }
  return true;
}

bool CudaExecutor::backwardBatchNorm(BackwardCall &call, std::string &error) {
  const DTensor &x = call.in(0);
  int64_t n = x.shape[0], c = x.shape[1], inner = x.numel() / (n * c);
  cuda::batchNormBackward(x.data(), call.in(1).data(), call.dOut->data(),
                          call.at(0), call.at(1), call.at(2), n, c, inner,
                          static_cast<float>(call.op.attrs.epsilon),
                          call.stream);
  return true;
}

bool CudaExecutor::backwardPool(BackwardCall &call, std::string &error) {
  if (call.at(0)) {
    cuda::PoolGeometry g =
        poolGeometry(call.op, call.in(0).shape, call.dOut->shape);
    if (call.op.computes == OpKind::MaxPool2d)
      cuda::maxPool2dBackward(call.in(0).data(), call.dOut->data(), g,
                              call.at(0), call.stream);
    else
      cuda::avgPool2dBackward(call.dOut->data(), g, call.at(0), call.stream);
  }
  return true;
}

bool CudaExecutor::backwardLayerNorm(BackwardCall &call, std::string &error) {
  const DTensor &x = call.in(0);
  int64_t d = x.shape.back(), rows = x.numel() / d;
  DTensor mean, rstd;
  if (!allocate(x.shape, false, call.scratch, error) ||
      !allocate({rows}, false, mean, error) ||
      !allocate({rows}, false, rstd, error))
    return false;
  cuda::layerNorm(x.data(), call.in(1).data(), call.in(2).data(),
                  call.scratch.data(), mean.data(), rstd.data(), rows, d,
                  static_cast<float>(call.op.attrs.epsilon), call.stream);
  cuda::layerNormBackward(x.data(), call.in(1).data(), mean.data(), rstd.data(),
                          call.dOut->data(), call.at(0), call.at(1), call.at(2),
                          rows, d, call.stream);
  return true;
}

bool CudaExecutor::backwardGelu(BackwardCall &call, std::string &error) {
  if (call.at(0))
    cuda::geluBackward(call.in(0).data(), call.dOut->data(), call.at(0),
                       call.in(0).numel(), call.op.attrs.tanhApproximation,
                       call.stream);
  return true;
}

bool CudaExecutor::backwardRelu(BackwardCall &call, std::string &error) {
  if (call.at(0)) {
    if (!allocate(call.in(0).shape, false, call.scratch, error))
      return false;
    cuda::relu(call.in(0).data(), call.scratch.data(), call.in(0).numel(),
               call.stream);
    cuda::reluBackward(call.scratch.data(), call.dOut->data(), call.at(0),
                       call.in(0).numel(), call.stream);
  }
  return true;
}

bool CudaExecutor::backwardSoftmax(BackwardCall &call, std::string &error) {
  if (call.at(0)) {
    int64_t d = call.in(0).shape.back(), rows = call.in(0).numel() / d;
    if (!allocate(call.in(0).shape, false, call.scratch, error))
      return false;
    cuda::softmax(call.in(0).data(), call.scratch.data(), rows, d, call.stream);
    cuda::softmaxBackward(call.scratch.data(), call.dOut->data(), call.at(0),
                          rows, d, call.stream);
  }
  return true;
}

bool CudaExecutor::backwardAttention(BackwardCall &call, std::string &error) {
  const DTensor &q = call.in(0);
  cuda::AttentionShape a{q.shape[0], q.shape[1], q.shape[2],
                         call.op.attrs.numHeads};
  DTensor out, probs;
  if (!allocate(q.shape, true, out, error) ||
      !allocate({a.batch * a.heads * a.seq * a.seq}, false, probs, error) ||
      !allocate({a.scratchFloats()}, false, call.scratch, error))
    return false;
  if (!cuda::causalAttention(*matmul, a, q.data(), call.in(1).data(),
                             call.in(2).data(), out.data(), probs.data(),
                             call.scratch.data(), call.stream, error) ||
      !cuda::causalAttentionBackward(
          *matmul, a, q.data(), call.in(1).data(), call.in(2).data(),
          probs.data(), call.dOut->data(), call.at(0), call.at(1), call.at(2),
          call.scratch.data(), call.stream, error))
    return false;
  return true;
}

bool CudaExecutor::backwardEmbedding(BackwardCall &call, std::string &error) {
  if (call.at(1))
    cuda::embeddingBackward(call.in(0).data(), call.dOut->data(), call.at(1),
                            call.in(0).numel(), call.in(1).shape.back(),
                            call.stream);
  return true;
}

bool CudaExecutor::backwardCrossEntropy(BackwardCall &call,
                                        std::string &error) {
  const DTensor &logits = call.in(0);
  int64_t classes = logits.shape.back(), rows = logits.numel() / classes;
  if (!allocate(logits.shape, false, call.scratch, error) ||
      !allocate({1}, false, call.extra, error))
    return false;
  cuda::crossEntropy(logits.data(), call.in(1).data(), call.scratch.data(),
                     call.extra.data(), rows, classes, call.stream);
  if (call.at(0))
    cuda::crossEntropyBackward(call.scratch.data(), call.in(1).data(),
                               call.at(0), rows, classes, 1.0f, call.stream);
  return true;
}

bool CudaExecutor::backwardView(BackwardCall &call, std::string &error) {
  if (call.at(0))
    cuda::accumulate(call.dOut->data(), call.at(0), call.dOut->numel(),
                     call.stream);
  return true;
}

void CudaExecutor::collectGradients(int microBatch, const ValueTable &) {
  cudaSetDevice(device);
  auto found = live.find(microBatch);
  if (found == live.end())
    return;
  std::map<int64_t, DTensor> &table = found->second;
  std::string error;
  for (int index : program.opsOf(OpPhase::Optimizer)) {
    for (int64_t id : program.ops[index].operands) {
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
  auto fail = [&](const ProgramOp &op, const std::string &message) {
    error = std::string(opName(op.kind)) + ": " + message;
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
  std::vector<const ProgramOp *> syncs;
  for (int index : program.opsOf(OpPhase::Optimizer)) {
    const ProgramOp &op = program.ops[index];
    if (op.kind != OpKind::GradSync)
      continue;
    auto in = values.find(op.operands[0]);
    if (in == values.end())
      return fail(op, "its gradient was never computed");
    values[op.results[0].id] = in->second;
    syncs.push_back(&op);
  }
  if (comm && !syncs.empty()) { // on the device, averaged in place
    ncclGroupStart();
    for (const ProgramOp *op : syncs) {
      DTensor &g = values.at(op->results[0].id);
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
    for (const ProgramOp *op : syncs) {
      DTensor &g = values.at(op->results[0].id);
      cuda::scale(g.data(), g.numel(), 1.0f / static_cast<float>(groupSize),
                  stream);
    }
  } else if (sync && !syncs.empty()) {
    std::vector<Tensor> hostGrads(syncs.size());
    std::vector<std::pair<const ProgramOp *, Tensor *>> synced;
    for (size_t i = 0; i < syncs.size(); ++i) {
      if (!download(values.at(syncs[i]->results[0].id), stream, hostGrads[i],
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
      values[syncs[i]->results[0].id] = std::move(d);
    }
  }
  for (int index : program.opsOf(OpPhase::Optimizer)) {
    const ProgramOp &op = program.ops[index];
    if (op.kind == OpKind::GradSync)
      continue;
    if (op.kind != OpKind::SgdUpdate && op.kind != OpKind::AdamwUpdate)
      return fail(op, "unexpected op in the optimizer phase");
    auto p = paramOfValue.find(op.operands[0]);
    if (p == paramOfValue.end())
      return fail(op, "updates a value that is not a parameter");
    DTensor &param = params.at(p->second);
    auto grad = values.find(op.operands[1]);
    if (grad == values.end())
      return fail(op, "its gradient was never computed");
    OptimizerState &state = optimizer[p->second];
    ++state.step;
    const OpAttrs &a = op.attrs;
    auto f = [](double x) { return static_cast<float>(x); };
    if (op.kind == OpKind::AdamwUpdate) {
      if ((!state.m.buffer && !allocate(param.shape, true, state.m, error)) ||
          (!state.v.buffer && !allocate(param.shape, true, state.v, error)))
        return false;
      cuda::adamwStep(param.data(), grad->second.data(), state.m.data(),
                      state.v.data(), param.numel(), state.step, f(a.lr),
                      f(a.beta1), f(a.beta2), f(a.epsilon), f(a.weightDecay),
                      stream);
    } else {
      if (!state.velocity.buffer &&
          !allocate(param.shape, true, state.velocity, error))
        return false;
      cuda::sgdStep(param.data(), grad->second.data(), state.velocity.data(),
                    param.numel(), f(a.lr), f(a.momentum), f(a.weightDecay),
                    stream);
    }
    if (!checkLaunch(error))
      return fail(op, error);
  }
  return !cudaFailed(cudaStreamSynchronize(stream), "the optimizer step",
                     error);
}

} // namespace

bool dtfm::runtime::cuda::supportsProgram(const StageProgram &program,
                                          std::string &reason) {
  std::map<int64_t, const ShapeVec *> shapes;
  for (const ProgramOp &op : program.ops)
    for (const ProgramValue &v : op.results)
      shapes[v.id] = &v.shape;
  static const ShapeVec none;
  auto shapeOfOperand = [&](const ProgramOp &op, size_t i) -> const ShapeVec & {
    auto it = shapes.find(op.operands[i]);
    return it == shapes.end() ? none : *it->second;
  };
  const OpTable<CudaKernels> &table = CudaExecutor::kernelTable();
  for (const ProgramOp &op : program.ops) {
    std::string where =
        "op #" + std::to_string(op.index) + " " + opName(op.kind);
    switch (op.kind) {
    case OpKind::Param:
    case OpKind::Input:
    case OpKind::Label:
    case OpKind::Recv:
    case OpKind::Send:
    case OpKind::GradSync:
    case OpKind::SgdUpdate:
    case OpKind::AdamwUpdate:
      break;
    default: {
      const CudaKernels &kernels = table[static_cast<size_t>(op.computes)];
      if (op.isBackward() ? !kernels.backward : !kernels.forward) {
        reason = op.describe() + " has no CUDA kernel";
        return false;
      }
    }
    }
    for (size_t i = 0; i < op.operands.size(); ++i)
      if (shapeOfOperand(op, i).size() > static_cast<size_t>(cuda::kMaxRank)) {
        reason = where + ": operand " + std::to_string(i) + " of rank " +
                 std::to_string(shapeOfOperand(op, i).size()) +
                 " (the CUDA kernels take up to " +
                 std::to_string(cuda::kMaxRank) + ")";
        return false;
      }
    if (op.computes == OpKind::Softmax) {
      int64_t axis = op.attrs.axis;
      int64_t rank = static_cast<int64_t>(shapeOfOperand(op, 0).size());
      if (axis != -1 && axis != rank - 1) {
        reason = where + ": only the last axis has a CUDA kernel";
        return false;
      }
    }
    if (op.computes == OpKind::Matmul && op.operands.size() >= 2) {
      const ShapeVec &lhs = shapeOfOperand(op, 0), &rhs = shapeOfOperand(op, 1);
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
dtfm::runtime::cuda::makeCudaExecutor(const StageProgram &program, int device,
                                      bool planPrecisionMatmuls,
                                      std::string &error) {
  auto executor =
      std::make_unique<CudaExecutor>(program, device, planPrecisionMatmuls);
  if (!executor->setUp(error))
    return nullptr;
  return executor;
}

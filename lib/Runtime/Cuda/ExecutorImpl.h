//===- ExecutorImpl.h - The CUDA executor's state and kernels ----*- C++
//-*-===//
//
// Part of dtfm. Private to lib/Runtime/Cuda: the CUDA executor, shared by
// Executor.cpp (streams, memory, NCCL, the phase hooks, the optimizer),
// ForwardKernels.cpp and BackwardKernels.cpp (one member function per
// family of op kinds; kernelTable() maps kinds to them).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_RUNTIME_CUDA_EXECUTORIMPL_H
#define DTFM_LIB_RUNTIME_CUDA_EXECUTORIMPL_H

#include "dtfm/Runtime/Cuda/Executor.h"
#include "dtfm/Runtime/PhaseLoop.h"

#include "dtfm/Runtime/Cuda/Attention.h"
#include "dtfm/Runtime/Cuda/Device.h"
#include "dtfm/Runtime/Cuda/Kernels.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dtfm::runtime::cuda::impl {

using cpu::Tensor;

using ShapeVec = std::vector<int64_t>;

inline int64_t numelOf(const ShapeVec &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

inline std::string spell(const ShapeVec &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Whether `operand` repeats over `out`: equal to its trailing dimensions
/// once leading ones are dropped (what addRepeated / sumRepeated compute).
inline bool repeatsOver(ShapeVec operand, const ShapeVec &out) {
  while (!operand.empty() && operand.front() == 1 &&
         numelOf(operand) != numelOf(out))
    operand.erase(operand.begin());
  if (operand.size() > out.size())
    return numelOf(operand) == numelOf(out);
  return std::equal(operand.rbegin(), operand.rend(), out.rbegin());
}

/// The geometry of a causal_attention op whose query is `q`.
inline cuda::AttentionShape attentionShapeOf(const ProgramOp &op,
                                             const ShapeVec &q) {
  return {q[0], q[1], q[2], op.attrs.numHeads, op.attrs.keyValueHeads()};
}

/// The dimensions after the first two (global average pooling).
inline std::vector<int64_t> spatialAxes(const ShapeVec &shape) {
  std::vector<int64_t> axes;
  for (size_t d = 2; d < shape.size(); ++d)
    axes.push_back(static_cast<int64_t>(d));
  return axes;
}

inline math::ConvGeometry convGeometry(const ProgramOp &op, const ShapeVec &x,
                                       const ShapeVec &w, const ShapeVec &out) {
  const math::Window &window = op.attrs.window;
  math::ConvGeometry g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.o = w[0], g.kh = w[2], g.kw = w[3];
  g.ho = out[2], g.wo = out[3];
  g.groups = op.attrs.groups;
  g.strideH = window.strideH, g.strideW = window.strideW;
  g.padTop = window.padTop, g.padLeft = window.padLeft;
  g.dilationH = window.dilationH, g.dilationW = window.dilationW;
  return g;
}

inline math::PoolGeometry poolGeometry(const ProgramOp &op, const ShapeVec &x,
                                       const ShapeVec &out) {
  return cpu::poolGeometry(x[0] * x[1], x[2], x[3], out[2], out[3],
                           op.attrs.kernel[0], op.attrs.kernel[1],
                           op.attrs.window);
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
    float *p = takeBlock(bytes);
    if (p) {
      inUse += bytes;
      peak = std::max(peak, inUse);
    }
    return p;
  }
  void give(float *p, size_t bytes) {
    inUse -= bytes;
    free[bytes].push_back(p);
  }
  /// The most bytes handed out at once (what PyTorch's
  /// max_memory_allocated counts: the cache of free blocks is not).
  int64_t peakBytes() const { return static_cast<int64_t>(peak); }

private:
  float *takeBlock(size_t bytes) {
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

  std::map<size_t, std::vector<void *>> free;
  size_t inUse = 0, peak = 0;
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
  CudaExecutor(const StageProgram &program, int device, const GpuOptions &gpu)
      : PhaseExecutor(program), device(device), gpu(gpu),
        pool(std::make_shared<Pool>()),
        gradientInputs(runtime::gradientInputs(program)),
        shards(shardedParameters(program)) {
    tensorParallelPosition = runtime::tensorParallelRank(program);
  }
  ~CudaExecutor() override;

  bool setUp(std::string &error);

  bool initialize(uint64_t seed, std::string &error,
                  const std::map<std::string, Tensor> *weights) override {
    return host.initialize(program, seed, weights, error) && fromHost(error);
  }
  bool loadParameters(const format::TensorMap &weights,
                      const std::string &source,
                      std::string &error) override {
    return host.load(program, weights, source, error) && fromHost(error);
  }
  std::map<std::string, Tensor> state() const override;
  bool restoreState(const std::map<std::string, Tensor> &state,
                    std::string &error) override {
    return host.restore(program, state, error) && fromHost(error);
  }
  void collectGradients(int microBatch, const ValueTable &values) override;
  void discardMicroBatch(int microBatch) override { live.erase(microBatch); }
  int64_t devicePeakBytes() const override { return pool->peakBytes(); }
  /// Compressed exchanges are encoded on the device (syncBucket): the
  /// residuals live there, only the messages come down.
  bool feedsBackItself() const override { return true; }
  void beginStep(int64_t step) override { currentStep = step; }
  bool takeEncodedSend(int64_t valueId, format::WireCodec wire,
                       std::vector<char> &message) override;
  bool decodesReceives(format::WireCodec wire) const override {
    return wire == format::WireCodec::Int8;
  }
  void stageEncodedReceive(int microBatch, int64_t valueId,
                           format::WireCodec wire,
                           std::vector<char> message) override {
    stagedReceives[{microBatch, valueId}] = std::move(message);
  }
  bool finishIteration(double gradientScale, const SyncFn &sync,
                       const SyncFn &gather, std::string &error) override;
  std::map<std::string, Tensor> parameters() const override;
  double takeComputeSeconds() override;
  /// A device-to-device copy of 256 MiB timed with events, best of three
  /// (bytes read and written over its time).
  double measureMemoryBandwidth() override;
  bool connectGroup(const std::vector<int> &members, int position,
                    const ShareFn &share, std::string &error) override;
  bool connectTensorParallelGroup(const std::vector<int> &members, int position,
                                  const ShareFn &share,
                                  std::string &error) override;
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
  const Tensor *hostValue(int microBatch, int64_t id, const ValueTable &values,
                          Tensor &scratch, std::string &error) override;
  bool runOp(const ProgramOp &op, int microBatch, ValueTable &values,
             double &loss, std::string &error) override;
  /// Sums each gradient the op made into the iteration's sums, as the CPU
  /// does: the plan's lifetimes free it right after.
  void afterOp(const ProgramOp &op, int microBatch,
               const ValueTable &values) override;
  /// Frees the device copy as well (the pool takes the buffer back once
  /// no view and no pending send holds it).
  void releaseValue(int microBatch, int64_t id, ValueTable &values) override;
  bool endPhase(OpPhase phase, int microBatch, ValueTable &values, double &loss,
                std::string &error) override;
  bool parametersToHost(const std::vector<std::string> &names,
                        std::string &error) override;
  bool parametersFromHost(const std::vector<std::string> &names,
                          std::string &error) override;

private:
  /// "<host>/<PCI bus id>" of this executor's GPU.
  bool gpuIdentity(std::string &identity, std::string &error) const;
  /// An NCCL communicator over `members` (this one at `position`), its
  /// unique id passed through `share`; null (and true) where members share
  /// a GPU, which NCCL cannot take. `what` names it in errors.
  bool openCommunicator(const std::vector<int> &members, int position,
                        const ShareFn &share, const std::string &what,
                        ncclComm_t &out, std::string &error);
  /// out = the sum of `in` over the tensor-parallel group (in may be out):
  /// NCCL on the compute stream, or through the host and the worker's
  /// GroupSumFn where the group has no communicator.
  bool sumOverTensorParallelGroup(const float *in, float *out, int64_t count,
                                  std::string &error);
  /// The cross-entropy `op` of `logits` against `labels`: its row sums
  /// over the member's classes (summed over the group when it is
  /// vocabulary-parallel), each row's log-sum-exp and the mean loss.
  bool crossEntropyLoss(const ProgramOp &op, const DTensor &logits,
                        const DTensor &labels, DTensor &logSumExp,
                        DTensor &loss, cudaStream_t stream,
                        std::string &error);
  /// The phase's dtfm.recv / dtfm.send ops on NCCL links, by peer then tag
  /// (the order both ends post them in).
  std::vector<std::pair<int, const ProgramOp *>> linkedOps(OpKind kind,
                                                           OpPhase phase) const;
  /// The group's mean of a bucket's synced gradients (`syncs`, their
  /// values in `values`), in place: all-reduced by NCCL, or through the
  /// host and `sync`; with sharded state only this member's shard of each
  /// (reduce-scattered).
  bool syncBucket(const std::vector<const ProgramOp *> &syncs,
                  std::map<int64_t, DTensor> &values, const SyncFn &sync,
                  std::string &error);
  /// Sharded state, after the updates stepped this member's shards: every
  /// shard of the bucket's parameters current on every member (NCCL's
  /// all-gather, or through the host and `gather`).
  bool gatherBucket(const std::vector<const ProgramOp *> &syncs,
                    const SyncFn &gather, std::string &error);
  /// A sharded bucket on the device as NCCL exchanges it: its tensors'
  /// data and sizes, their layout in equal member chunks
  /// (plan::layoutShards), the whole buffer and this member's chunk.
  struct ShardedBucket {
    std::vector<float *> tensors;
    std::vector<int64_t> elements;
    plan::ShardedLayout layout;
    DTensor packed, mine;
    int64_t chunk() const { return layout.chunkElements(0); }
  };
  /// Lays `tensors` out as one sharded bucket and allocates its buffers
  /// (zeroed: the padding is exchanged too).
  bool layoutShardedBucket(std::vector<DTensor *> tensors,
                           ShardedBucket &bucket, std::string &error);
  /// Between the bucket's tensors' shards and `buffer`: each shard k to its
  /// piece (`toBuffer`) or back; with `member` >= 0 only that member's
  /// shards, `buffer` then holding that member's chunk alone.
  void copyShards(const ShardedBucket &bucket, float *buffer, bool toBuffer,
                  int member, cudaStream_t stream);
  /// A compressed sync's gradient `grad` as this step's `codec` carries it,
  /// into `out` (host): the residual added and the message encoded on the
  /// device, only the message copied down and decoded; the device residual
  /// keeps the rest.
  bool encodeWithFeedback(const ProgramOp &sync, format::WireCodec codec,
                          const DTensor &grad, Tensor &out,
                          std::string &error);
  /// Adds gradient `id` of the micro-batch to its iteration sum, once per
  /// micro-batch.
  void collect(int microBatch, int64_t id, const DTensor &value);
  /// `value` in the int8 wire format, encoded on the send stream and copied
  /// down (8-bit pipeline transfers).
  bool encodeForWire(const DTensor &value, std::vector<char> &message,
                     std::string &error);
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
  /// dtfm.custom through the CUDA kernels its plugin registered.
  bool forwardCustom(ForwardCall &c, std::string &error);
  bool backwardCustom(BackwardCall &c, std::string &error);
  bool forwardView(ForwardCall &c, std::string &error);
  bool forwardEmbedding(ForwardCall &c, std::string &error);
  bool forwardBinary(ForwardCall &c, std::string &error);
  bool forwardUnary(ForwardCall &c, std::string &error);
  bool forwardMean(ForwardCall &c, std::string &error);
  bool forwardExtremum(ForwardCall &c, std::string &error);
  bool forwardConvTranspose2d(ForwardCall &c, std::string &error);
  bool backwardConvTranspose2d(BackwardCall &c, std::string &error);
  /// out (+)= the convolution g of x by w (no bias), through column
  /// matrices and cuBLASLt.
  bool convolve(const math::ConvGeometry &g, const float *x, const float *w,
                float *out, bool accumulate, cudaStream_t stream,
                std::string &error);
  /// Its gradients: dx += the input gradient, dw += the weight gradient
  /// (x read only then), each when not null.
  bool convolveBackward(const math::ConvGeometry &g, const float *x,
                        const float *w, const float *dOut, float *dx,
                        float *dw, cudaStream_t stream, std::string &error);
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
  bool forwardRmsNorm(ForwardCall &c, std::string &error);
  bool forwardActivation(ForwardCall &c, std::string &error);
  bool forwardSoftmax(ForwardCall &c, std::string &error);
  bool forwardAttention(ForwardCall &c, std::string &error);
  bool forwardRotary(ForwardCall &c, std::string &error);
  bool forwardCrossEntropy(ForwardCall &c, std::string &error);
  bool forwardTopkCompress(ForwardCall &c, std::string &error);
  bool forwardTopkDecompress(ForwardCall &c, std::string &error);
  bool forwardTpAllReduce(ForwardCall &c, std::string &error);
  bool backwardTpAllReduce(BackwardCall &c, std::string &error);
  bool backwardProduct(BackwardCall &c, std::string &error);
  bool backwardBinary(BackwardCall &c, std::string &error);
  bool backwardUnary(BackwardCall &c, std::string &error);
  bool backwardMean(BackwardCall &c, std::string &error);
  bool backwardExtremum(BackwardCall &c, std::string &error);
  bool backwardTranspose(BackwardCall &c, std::string &error);
  bool backwardSlice(BackwardCall &c, std::string &error);
  bool backwardConcat(BackwardCall &c, std::string &error);
  bool backwardGather(BackwardCall &c, std::string &error);
  bool backwardWhere(BackwardCall &c, std::string &error);
  bool backwardConv2d(BackwardCall &c, std::string &error);
  bool backwardBatchNorm(BackwardCall &c, std::string &error);
  bool backwardPool(BackwardCall &c, std::string &error);
  bool backwardLayerNorm(BackwardCall &c, std::string &error);
  bool backwardRmsNorm(BackwardCall &c, std::string &error);
  bool backwardGelu(BackwardCall &c, std::string &error);
  bool backwardRelu(BackwardCall &c, std::string &error);
  bool backwardSoftmax(BackwardCall &c, std::string &error);
  bool backwardAttention(BackwardCall &c, std::string &error);
  bool backwardRotary(BackwardCall &c, std::string &error);
  bool backwardEmbedding(BackwardCall &c, std::string &error);
  bool backwardCrossEntropy(BackwardCall &c, std::string &error);
  bool backwardView(BackwardCall &c, std::string &error);

  int device;
  GpuOptions gpu;
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
  /// Compressed exchanges' error-feedback residuals, by parameter (the
  /// host state's `residual`, kept here while training).
  std::map<std::string, DTensor> residuals;
  int64_t currentStep = 1;
  /// Values of the micro-batches in flight (forward results kept for the
  /// backward), by micro-batch and value id.
  std::map<int, std::map<int64_t, DTensor>> live;
  std::map<int64_t, DTensor> gradSum;
  /// The optimizer inputs that are not parameters (gradients), and the
  /// dtfm.grad_sync reading each.
  std::map<int64_t, const ProgramOp *> gradientInputs;
  /// Per micro-batch being collected, the gradients summed so far (a
  /// zero-bubble schedule interleaves one micro-batch's weight gradients
  /// with the next ones' backwards).
  std::map<int, std::set<int64_t>> collected;
  /// Parameters under sharded optimizer state, with this member's shard.
  std::map<std::string, ElementRange> shards;
  /// The data-parallel group's NCCL communicator (null: gradients go
  /// through the worker's transport).
  ncclComm_t comm = nullptr;
  int groupSize = 1, groupPosition = 0;
  /// The tensor-parallel group's (null: sums through the worker's
  /// transport), and this program's rank in it.
  ncclComm_t tensorParallelComm = nullptr;
  int64_t tensorParallelPosition = 0;
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
  /// The phase's 8-bit pipeline transfers, encoded on the device: their
  /// messages by value id (takeEncodedSend), until the next phase ends.
  std::map<int64_t, std::vector<char>> encodedSends;
  /// Received 8-bit transfers by (micro-batch, value id), until bound: the
  /// message goes up and is decoded on the receive stream.
  std::map<std::pair<int, int64_t>, std::vector<char>> stagedReceives;
  /// Their messages on the device, held until the phase ends.
  std::vector<DTensor> decodeBuffers;
  /// Values being sent, kept alive until their send completes.
  std::vector<std::pair<cudaEvent_t, std::vector<DTensor>>> pendingSends;
  /// Each phase's compute, bracketed on the compute stream (start, stop):
  /// what takeComputeSeconds sums.
  cudaEvent_t phaseStart = nullptr;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> phaseEvents;
  /// The phase running: whether the compute stream must wait for the
  /// receive stream's copies, or the receive stream for computations
  /// (pooled buffers may still be read by them), and its losses.
  bool received = false, computedSinceMark = false;
  /// The phase running, and whether the op running is a forward op run
  /// again in the backward (activation recomputation): its loss was
  /// counted by the forward.
  OpPhase runningPhase = OpPhase::Forward;
  bool recomputing = false;
  /// The phase's losses (held: the plan's lifetimes may free the value).
  std::vector<DTensor> phaseLosses;
};

/// True (with `error`: "<what>: <CUDA's message>") when `status` failed;
/// clears CUDA's sticky last error.
inline bool cudaFailed(cudaError_t status, const std::string &what,
                       std::string &error) {
  if (status == cudaSuccess)
    return false;
  error = what + ": " + cudaGetErrorString(status);
  cudaGetLastError();
  return true;
}

} // namespace dtfm::runtime::cuda::impl

#endif // DTFM_LIB_RUNTIME_CUDA_EXECUTORIMPL_H

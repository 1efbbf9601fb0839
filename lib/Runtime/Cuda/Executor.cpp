//===- Executor.cpp - Run a device program on a GPU -----------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The CUDA executor's device memory, host state, phases and ops; the end of
// the iteration (gradients summed, exchanged, the updates) is in
// OptimizerStep.cpp, the kernels in ForwardKernels.cpp / BackwardKernels.cpp.
//
//===----------------------------------------------------------------------===//

#include "ExecutorImpl.h"

#include "dtfm/Format/Int8.h"
#include "dtfm/Runtime/CustomKernels.h"
#include "dtfm/Runtime/FlashAttention.h"

#include "dtfm/Runtime/Cuda/Attention.h"
#include "dtfm/Runtime/Cuda/Device.h"
#include "dtfm/Runtime/Cuda/Kernels.h"
#include "dtfm/Support/ElementMath.h"

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
using namespace dtfm::runtime::cuda::impl;
using namespace dtfm::math;

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
  takeComputeSeconds(); // destroys the phases' events
  if (phaseStart)
    cudaEventDestroy(phaseStart);
  for (ncclComm_t c : {comm, tensorParallelComm})
    if (c)
      ncclCommDestroy(c);
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
  if (!gpu.planPrecisionMatmuls || op.results.empty())
    return cuda::ElementType::F32;
  switch (op.results[0].type) {
  case runtime::ElementType::F16:
    return cuda::ElementType::F16;
  case runtime::ElementType::BF16:
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
  residuals.clear();
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
    // Compressed exchanges encode on the device: their residuals live there.
    if (!moments.residual.data.empty() &&
        !upload(moments.residual, computeStream(), residuals[name], error))
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

bool CudaExecutor::parametersToHost(const std::vector<std::string> &names,
                                    std::string &error) {
  if (cudaFailed(cudaSetDevice(device), "selecting the CUDA device", error))
    return false;
  for (const std::string &name : names)
    if (!download(params.at(name), computeStream(), host.params[name], error))
      return false;
  return true;
}

bool CudaExecutor::parametersFromHost(const std::vector<std::string> &names,
                                      std::string &error) {
  if (cudaFailed(cudaSetDevice(device), "selecting the CUDA device", error))
    return false;
  for (const std::string &name : names)
    if (!upload(host.params.at(name), computeStream(), params[name], error))
      return false;
  return true;
}

std::map<std::string, Tensor> CudaExecutor::state() const {
  // Downloaded into a host state: its state() is the one format. What
  // lives on the host only (local steps' anchors, outer velocities and
  // outer residuals, compression residuals) is taken as it is.
  HostState copy;
  std::string error;
  cudaSetDevice(device);
  copy.params = parameters();
  for (const auto &[name, moments] : host.optimizer) {
    HostState::Moments &m = copy.optimizer[name];
    m.anchor = moments.anchor;
    m.outerVelocity = moments.outerVelocity;
    m.residual = moments.residual;
    m.outerResidual = moments.outerResidual;
    m.outerPending = moments.outerPending;
  }
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
  for (const auto &[name, r] : residuals)
    if (r.buffer)
      download(r, computeStream(), copy.optimizer[name].residual, error);
  std::map<std::string, Tensor> out = copy.state();
  describeSlices(out);
  return out;
}

bool CudaExecutor::beginPhase(OpPhase phase, int microBatch, ValueTable &,
                              std::string &error) {
  if (cudaFailed(cudaSetDevice(device), "selecting the CUDA device", error))
    return false;
  std::map<int64_t, DTensor> &table = live[microBatch];
  reapSends();
  phaseLosses.clear();
  runningPhase = phase;
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
  // The phase's compute starts here on the compute stream.
  if (cudaFailed(cudaEventCreate(&phaseStart), "creating a CUDA event",
                 error) ||
      cudaFailed(cudaEventRecord(phaseStart, computeStream()),
                 "recording a CUDA event", error))
    return false;
  return true;
}

double CudaExecutor::takeComputeSeconds() {
  cudaSetDevice(device);
  double seconds = 0;
  for (auto [start, stop] : phaseEvents) {
    float ms = 0;
    if (cudaEventSynchronize(stop) == cudaSuccess &&
        cudaEventElapsedTime(&ms, start, stop) == cudaSuccess)
      seconds += ms * 1e-3;
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  phaseEvents.clear();
  return seconds;
}

double CudaExecutor::measureMemoryBandwidth() {
  constexpr size_t kBytes = size_t(256) << 20;
  cudaSetDevice(device);
  void *from = nullptr, *to = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  double best = 0;
  if (cudaMalloc(&from, kBytes) == cudaSuccess &&
      cudaMalloc(&to, kBytes) == cudaSuccess &&
      cudaEventCreate(&start) == cudaSuccess &&
      cudaEventCreate(&stop) == cudaSuccess) {
    for (int run = 0; run < 3; ++run) {
      float ms = 0;
      if (cudaEventRecord(start, computeStream()) != cudaSuccess ||
          cudaMemcpyAsync(to, from, kBytes, cudaMemcpyDeviceToDevice,
                          computeStream()) != cudaSuccess ||
          cudaEventRecord(stop, computeStream()) != cudaSuccess ||
          cudaEventSynchronize(stop) != cudaSuccess ||
          cudaEventElapsedTime(&ms, start, stop) != cudaSuccess || ms <= 0)
        break;
      best = std::max(best, 2.0 * static_cast<double>(kBytes) / (ms * 1e-3));
    }
  }
  cudaGetLastError(); // a failed allocation leaves no sticky error
  if (start)
    cudaEventDestroy(start);
  if (stop)
    cudaEventDestroy(stop);
  cudaFree(from);
  cudaFree(to);
  return best;
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
  auto staged = stagedReceives.find({microBatch, op.results[0].id});
  if (staged != stagedReceives.end()) {
    // An 8-bit transfer: its message up, decoded on the receive stream.
    const std::vector<char> &message = staged->second;
    DTensor bytes;
    if (!allocate({static_cast<int64_t>((message.size() + 3) / 4)}, false,
                  bytes, error) ||
        !allocate(op.results[0].shape, false, d, error) ||
        cudaFailed(cudaMemcpyAsync(bytes.data(), message.data(),
                                   message.size(), cudaMemcpyHostToDevice,
                                   receiveStream()),
                   "copying a received transfer to the GPU", error))
      return false;
    cuda::int8Decode(bytes.data(), d.numel(), d.data(), receiveStream());
    if (!checkLaunch(error))
      return false;
    // The message stays until the compute stream is ordered behind the
    // receive stream (endPhase): the pool may hand it to compute work.
    decodeBuffers.push_back(std::move(bytes));
    stagedReceives.erase(staged);
  } else if (!upload(value, receiveStream(), d, error)) {
    return false;
  }
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

const Tensor *CudaExecutor::hostValue(int microBatch, int64_t id,
                                      const ValueTable &, Tensor &scratch,
                                      std::string &error) {
  auto table = live.find(microBatch);
  auto it = table == live.end() ? std::map<int64_t, DTensor>::iterator()
                                : table->second.find(id);
  if (table == live.end() || it == table->second.end()) {
    error = "value #" + std::to_string(id) + " is not on the GPU";
    return nullptr;
  }
  return download(it->second, computeStream(), scratch, error) ? &scratch
                                                                : nullptr;
}

bool CudaExecutor::runOp(const ProgramOp &op, int microBatch, ValueTable &,
                         double &, std::string &error) {
  if (received) { // the compute stream waits for the copies so far
    if (!order(receiveStream(), computeStream(), error))
      return false;
    received = false;
  }
  computedSinceMark = true;
  recomputing = op.phase == OpPhase::Forward &&
                runningPhase != OpPhase::Forward;
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
  if (phaseStart) {
    cudaEvent_t stop;
    if (cudaFailed(cudaEventCreate(&stop), "creating a CUDA event", error) ||
        cudaFailed(cudaEventRecord(stop, computeStream()),
                   "recording a CUDA event", error))
      return false;
    phaseEvents.emplace_back(phaseStart, stop);
    phaseStart = nullptr;
  }
  if (received && !order(receiveStream(), computeStream(), error))
    return false;
  decodeBuffers.clear();
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
  encodedSends.clear();
  for (int index : program.opsOf(phase)) {
    const ProgramOp &op = program.ops[index];
    if (op.kind != OpKind::Send || movesItself(op))
      continue;
    auto it = table.find(op.operands[0]);
    if (it == table.end()) {
      error = "dtfm.send: its value was not computed in this phase";
      return false;
    }
    // An 8-bit transfer is encoded on the device: a quarter of the bytes
    // come down, the worker sends them as they are.
    if (op.attrs.wire == format::WireCodec::Int8 &&
        !op.attrs.oncePerIteration) {
      if (encodedSends.count(op.operands[0]))
        continue; // sent to another peer too: encoded once
      if (!encodeForWire(it->second, encodedSends[op.operands[0]], error))
        return false;
      continue;
    }
    if (!download(it->second, sendStream(), values[op.operands[0]], error))
      return false;
  }
  if (!gathered.empty() && !checkGathers(error))
    return false;
  for (const DTensor &l : phaseLosses) {
    Tensor value;
    if (!download(l, computeStream(), value, error))
      return false;
    loss += value.data.at(0);
  }
  phaseLosses.clear();
  return true;
}

void CudaExecutor::afterOp(const ProgramOp &op, int microBatch,
                           const ValueTable &) {
  if (op.phase != OpPhase::Backward && op.phase != OpPhase::Weight)
    return;
  std::map<int64_t, DTensor> &table = live[microBatch];
  for (const ProgramValue &result : op.results)
    if (gradientInputs.count(result.id)) {
      auto it = table.find(result.id);
      if (it != table.end())
        collect(microBatch, result.id, it->second);
    }
}

void CudaExecutor::releaseValue(int microBatch, int64_t id,
                                ValueTable &values) {
  values.erase(id);
  auto table = live.find(microBatch);
  if (table != live.end())
    table->second.erase(id);
}

bool CudaExecutor::encodeForWire(const DTensor &value,
                                 std::vector<char> &message,
                                 std::string &error) {
  size_t bytes = format::int8Bytes(static_cast<size_t>(value.numel()));
  DTensor encoded;
  if (!allocate({static_cast<int64_t>((bytes + 3) / 4)}, false, encoded,
                error))
    return false;
  // On the send stream, behind the compute that made the value.
  cuda::int8Encode(value.data(), value.numel(), encoded.data(), sendStream());
  message.resize(bytes);
  return checkLaunch(error) &&
         !cudaFailed(cudaMemcpyAsync(message.data(), encoded.data(), bytes,
                                     cudaMemcpyDeviceToHost, sendStream()),
                     "copying an encoded transfer from the GPU", error) &&
         !cudaFailed(cudaStreamSynchronize(sendStream()),
                     "waiting for the GPU", error);
}

bool CudaExecutor::takeEncodedSend(int64_t valueId, format::WireCodec wire,
                                   std::vector<char> &message) {
  auto it = encodedSends.find(valueId);
  if (wire != format::WireCodec::Int8 || it == encodedSends.end())
    return false;
  message = it->second;
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
    if (op.computes == OpKind::Custom) {
      // A plugin's op: whether it registered the GPU kernel.
      std::string why;
      if (!customKernels(op.attrs.custom.kind,
                         op.isBackward() ? CustomKernel::CudaBackward
                                         : CustomKernel::CudaForward,
                         why)) {
        reason = op.describe() + " has no CUDA kernel (" + why + ")";
        return false;
      }
    } else if (!isStructural(op.kind) || op.isBackward()) {
      const CudaKernels &kernels = table[static_cast<size_t>(op.computes)];
      if (op.isBackward() ? !kernels.backward : !kernels.forward) {
        reason = op.describe() + " has no CUDA kernel";
        return false;
      }
    }
    for (size_t i = 0; i < op.operands.size(); ++i)
      if (shapeOfOperand(op, i).size() > static_cast<size_t>(math::kMaxRank)) {
        reason = where + ": operand " + std::to_string(i) + " of rank " +
                 std::to_string(shapeOfOperand(op, i).size()) +
                 " (the CUDA kernels take up to " +
                 std::to_string(math::kMaxRank) + ")";
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
                                      const GpuOptions &gpu,
                                      std::string &error) {
  if (gpu.attention == GpuAttention::Fused)
    for (const ProgramOp &op : program.ops) {
      // The output is [batch, seq, heads * headDim], as the query.
      if (op.computes != OpKind::CausalAttention || op.isBackward() ||
          op.results.empty() || op.results[0].shape.size() != 3)
        continue;
      int64_t headDim = op.results[0].shape[2] / op.attrs.numHeads;
      int64_t seq = op.results[0].shape[1];
      if (!flash::supportsHeadDim(headDim)) {
        error = "--gpu-attention fused: " + op.describe() + " has heads of " +
                std::to_string(headDim) +
                " dimensions, and the fused kernels take 1 to " +
                std::to_string(flash::kMaxHeadDim) +
                " (--gpu-attention auto runs those unfused)";
        return nullptr;
      }
      if (!flash::supportsSequence(seq)) {
        error = "--gpu-attention fused: " + op.describe() +
                " has sequences of " + std::to_string(seq) +
                " tokens, and the fused kernels take up to " +
                std::to_string(flash::kMaxSequence);
        return nullptr;
      }
    }
  auto executor = std::make_unique<CudaExecutor>(program, device, gpu);
  if (!executor->setUp(error))
    return nullptr;
  return executor;
}

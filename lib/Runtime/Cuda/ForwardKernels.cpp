//===- ForwardKernels.cpp - The CUDA executor's forward kernels -----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The CUDA backend's kernel table and its forward kernels: one member
// function per family of op kinds, launching the kernels of kernels/*.cu
// (and cuBLASLt) on the compute stream.
//
//===----------------------------------------------------------------------===//

#include "ExecutorImpl.h"

#include "dtfm/Runtime/CustomKernels.h"

#include "dtfm/Runtime/Cuda/Attention.h"
#include "dtfm/Support/ElementMath.h"
#include "dtfm/Support/OpShapes.h"

#include <algorithm>

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::runtime::cuda::impl;
using namespace dtfm::math;

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
    // Elementwise math (OpKinds.def's DTFM_UNARY_MATH and DTFM_BINARY_MATH
    // lists): one kernel for each list.
    for (size_t k = 0; k < kNumOpKinds; ++k) {
      if (unaryMathOf(static_cast<OpKind>(k)))
        t[k] = {&CudaExecutor::forwardUnary, &CudaExecutor::backwardUnary};
      if (binaryMathOf(static_cast<OpKind>(k)))
        t[k] = {&CudaExecutor::forwardBinary, &CudaExecutor::backwardBinary};
    }
    at(OpKind::ReduceMean).forward = &CudaExecutor::forwardMean;
    at(OpKind::GlobalAvgPool).forward = &CudaExecutor::forwardMean;
    for (OpKind kind : {OpKind::ReduceMax, OpKind::ReduceMin}) {
      at(kind).forward = &CudaExecutor::forwardExtremum;
      at(kind).backward = &CudaExecutor::backwardExtremum;
    }
    at(OpKind::Transpose).forward = &CudaExecutor::forwardTranspose;
    at(OpKind::Slice).forward = &CudaExecutor::forwardSlice;
    at(OpKind::Concat).forward = &CudaExecutor::forwardConcat;
    at(OpKind::Gather).forward = &CudaExecutor::forwardGather;
    at(OpKind::Where).forward = &CudaExecutor::forwardWhere;
    at(OpKind::Conv2d).forward = &CudaExecutor::forwardConv2d;
    at(OpKind::ConvTranspose2d).forward = &CudaExecutor::forwardConvTranspose2d;
    at(OpKind::ConvTranspose2d).backward =
        &CudaExecutor::backwardConvTranspose2d;
    at(OpKind::BatchNorm).forward = &CudaExecutor::forwardBatchNorm;
    at(OpKind::MaxPool2d).forward = &CudaExecutor::forwardPool;
    at(OpKind::AvgPool2d).forward = &CudaExecutor::forwardPool;
    at(OpKind::Accumulate).forward = &CudaExecutor::forwardAccumulate;
    at(OpKind::Linear).forward = &CudaExecutor::forwardProduct;
    at(OpKind::Matmul).forward = &CudaExecutor::forwardProduct;
    at(OpKind::LayerNorm).forward = &CudaExecutor::forwardLayerNorm;
    at(OpKind::RmsNorm).forward = &CudaExecutor::forwardRmsNorm;
    at(OpKind::Gelu).forward = &CudaExecutor::forwardActivation;
    at(OpKind::Relu).forward = &CudaExecutor::forwardActivation;
    at(OpKind::Softmax).forward = &CudaExecutor::forwardSoftmax;
    at(OpKind::CausalAttention).forward = &CudaExecutor::forwardAttention;
    at(OpKind::Rotary).forward = &CudaExecutor::forwardRotary;
    at(OpKind::CrossEntropy).forward = &CudaExecutor::forwardCrossEntropy;
    at(OpKind::TopkCompress).forward = &CudaExecutor::forwardTopkCompress;
    at(OpKind::TopkDecompress).forward = &CudaExecutor::forwardTopkDecompress;
    at(OpKind::TpAllReduce).forward = &CudaExecutor::forwardTpAllReduce;
    at(OpKind::TpAllReduce).backward = &CudaExecutor::backwardTpAllReduce;
    at(OpKind::Linear).backward = &CudaExecutor::backwardProduct;
    at(OpKind::Matmul).backward = &CudaExecutor::backwardProduct;
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
    at(OpKind::RmsNorm).backward = &CudaExecutor::backwardRmsNorm;
    at(OpKind::Gelu).backward = &CudaExecutor::backwardGelu;
    at(OpKind::Relu).backward = &CudaExecutor::backwardRelu;
    at(OpKind::Softmax).backward = &CudaExecutor::backwardSoftmax;
    at(OpKind::CausalAttention).backward = &CudaExecutor::backwardAttention;
    at(OpKind::Rotary).backward = &CudaExecutor::backwardRotary;
    at(OpKind::Embedding).backward = &CudaExecutor::backwardEmbedding;
    at(OpKind::CrossEntropy).backward = &CudaExecutor::backwardCrossEntropy;
    at(OpKind::Reshape).backward = &CudaExecutor::backwardView;
    at(OpKind::Flatten).backward = &CudaExecutor::backwardView;
    // A plugin's kernels (supportsProgram checks that it registered them).
    at(OpKind::Custom) = {&CudaExecutor::forwardCustom,
                          &CudaExecutor::backwardCustom};
    return t;
  }();
  return table;
}

/// The call a custom kernel receives for `op` with device operands `in`.
static CustomOpCall customCallOf(const ProgramOp &op,
                                 const std::vector<const DTensor *> &in) {
  std::vector<std::vector<int64_t>> shapes;
  for (const DTensor *t : in)
    shapes.push_back(t->shape);
  return customCall(op, shapes);
}

bool CudaExecutor::forwardCustom(ForwardCall &call, std::string &error) {
  std::vector<const DTensor *> in;
  for (int i = 0; i < call.numOperands(); ++i)
    in.push_back(&call.in(i));
  CustomOpCall custom = customCallOf(call.op, in);
  const CustomOpDef *def =
      customKernels(custom.kind, CustomKernel::CudaForward, error);
  if (!def)
    return false;
  std::vector<DeviceTensor> operands;
  std::vector<const DeviceTensor *> views;
  for (const DTensor *t : in)
    operands.push_back({t->shape, t->data()});
  for (const DeviceTensor &t : operands)
    views.push_back(&t);
  std::vector<DTensor> made(call.op.results.size());
  std::vector<DeviceTensor> results;
  for (size_t r = 0; r < made.size(); ++r) {
    if (!allocate(call.op.results[r].shape, true, made[r], error))
      return false;
    results.push_back({made[r].shape, made[r].data()});
  }
  if (!def->cudaForward(custom, views, results, call.stream, error)) {
    error = "'" + custom.kind + "': " + error;
    return false;
  }
  for (size_t r = 0; r < made.size(); ++r)
    call.set(static_cast<int>(r), std::move(made[r]));
  return true;
}

bool CudaExecutor::backwardCustom(BackwardCall &call, std::string &error) {
  std::vector<const DTensor *> in;
  for (int i = 0; i < call.numOperands; ++i)
    in.push_back(&call.in(i));
  CustomOpCall custom = customCallOf(call.op, in);
  const CustomOpDef *def =
      customKernels(custom.kind, CustomKernel::CudaBackward, error);
  if (!def)
    return false;
  if (!call.dOut) {
    error = "custom op '" + custom.kind + "' backward without the gradient "
            "of its result";
    return false;
  }
  std::vector<DeviceTensor> operands, grads;
  std::vector<const DeviceTensor *> views;
  std::vector<bool> wanted;
  for (int i = 0; i < call.numOperands; ++i) {
    operands.push_back({in[i]->shape, in[i]->data()});
    float *grad = call.at(i);
    wanted.push_back(grad != nullptr);
    grads.push_back({in[i]->shape, grad});
  }
  for (const DeviceTensor &t : operands)
    views.push_back(&t);
  DeviceTensor dOut{call.dOut->shape, call.dOut->data()};
  if (!def->cudaBackward(custom, views, dOut, wanted, grads, call.stream,
                         error)) {
    error = "custom op '" + custom.kind + "' backward: " + error;
    return false;
  }
  return true;
}

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
  int64_t rows = weights.shape.front();
  cuda::embedding(ids.data(), weights.data(), call.out.data(), ids.numel(),
                  weights.shape.back(),
                  firstTableRow(call.op, tensorParallelPosition, rows), rows,
                  call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardTpAllReduce(ForwardCall &call, std::string &error) {
  // in_backward: the identity here, the gradient summed backward.
  if (call.op.attrs.inBackward)
    return call.set(0, call.in(0));
  const DTensor &in = call.in(0);
  if (!fresh(call, false, error) ||
      !sumOverTensorParallelGroup(in.data(), call.out.data(), in.numel(),
                                  error))
    return false;
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardBinary(ForwardCall &call, std::string &error) {
  math::BinaryOp binary = *binaryMathOf(call.op.computes);
  const DTensor &a = call.in(0), &b = call.in(1);
  if (!fresh(call, false, error))
    return false;
  if (binary == math::BinaryOp::Add && repeatsOver(a.shape, call.shape) &&
      repeatsOver(b.shape, call.shape)) // a bias, a position table: no views
    cuda::addRepeated(a.data(), a.numel(), b.data(), b.numel(), call.out.data(),
                      call.out.numel(), call.stream);
  else
    cuda::binaryStrided(
        binary, a.data(), math::broadcastView(a.shape, call.shape), b.data(),
        math::broadcastView(b.shape, call.shape), call.out.data(), call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardUnary(ForwardCall &call, std::string &error) {
  std::optional<math::UnaryOp> math = unaryMathOf(call.op.computes);
  if (!fresh(call, false, error))
    return false;
  cuda::unary(*math, call.in(0).data(), call.out.data(), call.out.numel(),
              unaryParamsOf(call.op.attrs), call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardMean(ForwardCall &call, std::string &error) {
  const DTensor &x = call.in(0);
  math::MeanShape m = math::meanShape(
      x.shape, call.op.computes == OpKind::ReduceMean ? call.op.attrs.axes
                                                      : spatialAxes(x.shape));
  if (!fresh(call, false, error))
    return false;
  const float *operands[3] = {x.data(), nullptr, nullptr};
  cuda::reduceStrided(
      math::ReduceTerm::Value, operands,
      math::reductionOnto(m.kept, x.shape, {math::contiguousView(x.shape)}),
      call.out.data(), 1.0f / static_cast<float>(m.count), false, call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardExtremum(ForwardCall &call, std::string &error) {
  const DTensor &x = call.in(0);
  math::MeanShape m = math::meanShape(x.shape, call.op.attrs.axes);
  if (!fresh(call, false, error))
    return false;
  cuda::reduceExtremum(
      call.op.computes == OpKind::ReduceMax, x.data(),
      math::reductionOnto(m.kept, x.shape, {math::contiguousView(x.shape)}),
      call.out.data(), call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardTranspose(ForwardCall &call, std::string &error) {
  if (!fresh(call, false, error))
    return false;
  cuda::copyStrided(call.in(0).data(),
                    math::permutedView(call.in(0).shape, call.op.attrs.perm),
                    call.out.data(), math::contiguousView(call.shape), 1.0f,
                    false, call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardSlice(ForwardCall &call, std::string &error) {
  if (!fresh(call, false, error))
    return false;
  cuda::copyStrided(call.in(0).data(),
                    math::sliceView(call.in(0).shape, call.shape,
                                    call.op.attrs.starts, call.op.attrs.steps),
                    call.out.data(), math::contiguousView(call.shape), 1.0f,
                    false, call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardConcat(ForwardCall &call, std::string &error) {
  int64_t axis = call.op.attrs.axis, begin = 0;
  if (!fresh(call, false, error))
    return false;
  for (int i = 0; i < call.numOperands(); ++i) {
    const DTensor &part = call.in(i);
    cuda::copyStrided(part.data(), math::contiguousView(part.shape),
                      call.out.data(),
                      math::axisBlockView(call.shape, axis, begin, part.shape),
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
  math::GatherGeometry g =
      math::gatherGeometry(x.shape, call.op.attrs.axis, indices.numel());
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
      condition.data(), math::broadcastView(condition.shape, call.shape),
      a.data(), math::broadcastView(a.shape, call.shape), b.data(),
      math::broadcastView(b.shape, call.shape), call.out.data(), call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::convolve(const math::ConvGeometry &g, const float *x,
                            const float *w, float *out, bool accumulate,
                            cudaStream_t stream, std::string &error) {
  int64_t rows = g.columnRows(), spatial = g.spatial();
  int64_t perChunk = std::clamp<int64_t>(
      kColumnFloats / std::max<int64_t>(1, rows * spatial), 1, g.n);
  DTensor columns;
  if (!allocate({perChunk * rows * spatial}, false, columns, error))
    return false;
  for (int64_t first = 0; first < g.n; first += perChunk) {
    int64_t images = std::min(perChunk, g.n - first);
    for (int64_t group = 0; group < g.groups; ++group) {
      cuda::im2col(x, g, first, images, group, columns.data(), stream);
      // out[image][group's filters] (+)= filters [og, rows] x columns[image]
      cuda::MatmulShape s;
      s.m = g.filtersPerGroup();
      s.n = spatial;
      s.k = rows;
      s.batch = images;
      s.strideA = 0;
      s.strideB = rows * spatial;
      s.strideC = g.o * spatial;
      s.accumulate = accumulate;
      if (!matmul->run(s, w + group * g.filtersPerGroup() * rows,
                       columns.data(),
                       out + (first * g.o + group * g.filtersPerGroup()) *
                                 spatial,
                       stream, error))
        return false;
    }
  }
  return true;
}

/// The result [N, C, H, W] += the call's third operand [C] per channel.
static void addChannelBias(ForwardCall &call, int64_t channels) {
  cuda::binaryStrided(math::BinaryOp::Add, call.out.data(),
                      math::contiguousView(call.shape), call.in(2).data(),
                      math::broadcastView({channels, 1, 1}, call.shape),
                      call.out.data(), call.stream);
}

bool CudaExecutor::forwardConv2d(ForwardCall &call, std::string &error) {
  const DTensor &x = call.in(0), &w = call.in(1);
  math::ConvGeometry g = convGeometry(call.op, x.shape, w.shape, call.shape);
  if (!fresh(call, false, error) ||
      !convolve(g, x.data(), w.data(), call.out.data(), false, call.stream,
                error))
    return false;
  if (call.numOperands() > 2)
    addChannelBias(call, g.o);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardConvTranspose2d(ForwardCall &call,
                                          std::string &error) {
  // The input gradient of the convolution that maps the result's shape to
  // x's (cpu::convTranspose2d).
  const DTensor &x = call.in(0), &w = call.in(1);
  math::ConvGeometry g = convGeometry(call.op, call.shape, w.shape, x.shape);
  if (!fresh(call, true, error) ||
      !convolveBackward(g, nullptr, w.data(), x.data(), call.out.data(),
                        nullptr, call.stream, error))
    return false;
  if (call.numOperands() > 2)
    addChannelBias(call, g.c);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardBatchNorm(ForwardCall &call, std::string &error) {
  const DTensor &x = call.in(0);
  int64_t n = x.shape[0], c = x.shape[1], inner = x.numel() / (n * c);
  if (call.op.attrs.inference) {
    if (!fresh(call, false, error))
      return false;
    cuda::batchNorm(x.data(), call.in(1).data(), call.in(2).data(),
                    call.out.data(), nullptr, nullptr, n, c, inner,
                    static_cast<float>(call.op.attrs.epsilon), call.stream,
                    call.in(3).data(), call.in(4).data());
    return call.set(0, std::move(call.out));
  }
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
  math::PoolGeometry g = poolGeometry(call.op, call.in(0).shape, call.shape);
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

bool CudaExecutor::forwardRmsNorm(ForwardCall &call, std::string &error) {
  const DTensor &x = call.in(0);
  int64_t d = x.shape.back(), rows = x.numel() / d;
  DTensor rstd;
  if (!fresh(call, false, error) || !allocate({rows}, false, rstd, error))
    return false;
  cuda::rmsNorm(x.data(), call.in(1).data(), call.out.data(), rstd.data(), rows,
                d, static_cast<float>(call.op.attrs.epsilon), call.stream);
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
  (call.op.attrs.logarithm ? cuda::logSoftmax : cuda::softmax)(
      call.in(0).data(), call.out.data(), call.out.numel() / d, d,
      call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::forwardAttention(ForwardCall &call, std::string &error) {
  const DTensor &q = call.in(0);
  cuda::AttentionShape a = attentionShapeOf(call.op, q.shape);
  if (cuda::useFusedAttention(gpu.attention, a)) {
    if (!fresh(call, false, error))
      return false;
    cuda::fusedCausalAttention(a, productType(call.op), q.data(),
                               call.in(1).data(), call.in(2).data(),
                               call.out.data(), call.stream);
    return call.set(0, std::move(call.out));
  }
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

bool CudaExecutor::forwardRotary(ForwardCall &call, std::string &error) {
  const DTensor &x = call.in(0);
  if (!fresh(call, false, error))
    return false;
  int64_t heads = call.op.attrs.numHeads;
  cuda::rotary(x.data(), call.out.data(), x.shape[0], x.shape[1], heads,
               x.shape[2] / heads, call.op.attrs.theta, 1, false, call.stream);
  return call.set(0, std::move(call.out));
}

bool CudaExecutor::crossEntropyLoss(const ProgramOp &op,
                                    const DTensor &logits,
                                    const DTensor &labels, DTensor &logSumExp,
                                    DTensor &loss, cudaStream_t stream,
                                    std::string &error) {
  int64_t classes = logits.shape.back(), rows = logits.numel() / classes;
  int64_t degree = std::max<int64_t>(1, op.attrs.vocabShard);
  int64_t rank = op.attrs.vocabShard ? tensorParallelPosition : 0;
  DTensor sums;
  if (!allocate({rows, shapes::vocabParallelLossSumWidth(degree)}, false, sums,
                error) ||
      !allocate({rows}, false, logSumExp, error) ||
      !allocate({1}, false, loss, error))
    return false;
  cuda::crossEntropySliceSums(logits.data(), labels.data(), sums.data(), rows,
                              classes, lossClassesOf(op, classes, rank), rank,
                              degree, stream);
  if (degree > 1 && !sumOverTensorParallelGroup(sums.data(), sums.data(),
                                                sums.numel(), error))
    return false;
  cuda::crossEntropyFromSums(sums.data(), logSumExp.data(), loss.data(), rows,
                             degree, stream);
  return true;
}

bool CudaExecutor::forwardCrossEntropy(ForwardCall &call, std::string &error) {
  // The loss from each row's log-sum-exp: no probabilities are kept (the
  // backward recomputes the row sums).
  DTensor logSumExp;
  if (!crossEntropyLoss(call.op, call.in(0), call.in(1), logSumExp, call.out,
                        call.stream, error))
    return false;
  call.set(0, std::move(call.out));
  if (!recomputing) // a recomputed loss was counted by the forward
    phaseLosses.push_back(call.table.at(call.op.results[0].id));
  return true;
}

bool CudaExecutor::forwardTopkCompress(ForwardCall &call, std::string &error) {
  const DTensor &x = call.in(0);
  int64_t k = call.op.attrs.k;
  if (x.numel() > cuda::kTopKMaxElements) {
    error = call.op.describe() + ": a top-k of " + std::to_string(x.numel()) +
            " values on the GPU (at most " +
            std::to_string(cuda::kTopKMaxElements) + ")";
    return false;
  }
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

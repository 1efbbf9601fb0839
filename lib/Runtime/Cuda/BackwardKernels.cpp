//===- BackwardKernels.cpp - The CUDA executor's backward kernels ---------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// What a dtfm.backward of each family of op kinds runs on the GPU: the
// operands' gradients added into zeroed buffers (runBackward allocates
// them), recomputing forward values where the CPU backward does.
//
//===----------------------------------------------------------------------===//

#include "ExecutorImpl.h"

#include "dtfm/Runtime/Cuda/Attention.h"
#include "dtfm/Support/ElementMath.h"

#include <algorithm>

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::runtime::cuda::impl;
using namespace dtfm::math;

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
  // along (math::binaryGradient says which term, of what).
  const ShapeVec &out = call.dOut->shape;
  math::BinaryOp binary = *binaryMathOf(call.op.computes);
  const DTensor *sources[3] = {call.dOut, &call.in(0), &call.in(1)};
  for (int i = 0; i < 2; ++i) {
    if (!call.at(i))
      continue;
    const DTensor &self = call.in(i);
    math::BinaryGradient g = math::binaryGradient(binary, i);
    if (g.term == math::ReduceTerm::Value && g.alpha == 1 &&
        repeatsOver(self.shape, out)) {
      cuda::sumRepeated(call.dOut->data(), call.dOut->numel(), call.at(i),
                        self.numel(), call.stream);
      continue;
    }
    const float *operands[3] = {nullptr, nullptr, nullptr};
    std::vector<math::StridedView> views;
    for (int k = 0; k < math::reduceTermOperands(g.term); ++k) {
      const DTensor &source = *sources[g.sources[k]];
      operands[k] = source.data();
      views.push_back(math::broadcastView(source.shape, out));
    }
    cuda::reduceStrided(g.term, operands,
                        math::reductionOnto(self.shape, out, views), call.at(i),
                        g.alpha, true, call.stream);
  }
  return true;
}

bool CudaExecutor::backwardUnary(BackwardCall &call, std::string &error) {
  std::optional<math::UnaryOp> math = unaryMathOf(call.op.computes);
  if (call.at(0))
    cuda::unaryBackward(*math, call.in(0).data(), call.dOut->data(), call.at(0),
                        call.in(0).numel(), unaryParamsOf(call.op.attrs),
                        call.stream);
  return true;
}

bool CudaExecutor::backwardMean(BackwardCall &call, std::string &error) {
  // dx += dOut spread evenly over the elements each mean averaged.
  const DTensor &x = call.in(0);
  math::MeanShape m = math::meanShape(
      x.shape, call.op.computes == OpKind::ReduceMean ? call.op.attrs.axes
                                                      : spatialAxes(x.shape));
  if (call.at(0))
    cuda::copyStrided(call.dOut->data(), math::broadcastView(m.kept, x.shape),
                      call.at(0), math::contiguousView(x.shape),
                      1.0f / static_cast<float>(m.count), true, call.stream);
  return true;
}

bool CudaExecutor::backwardExtremum(BackwardCall &call, std::string &error) {
  const DTensor &x = call.in(0);
  math::MeanShape m = math::meanShape(x.shape, call.op.attrs.axes);
  if (call.at(0))
    cuda::reduceExtremumBackward(
        call.op.computes == OpKind::ReduceMax, x.data(), call.dOut->data(),
        math::reductionOnto(m.kept, x.shape, {math::contiguousView(x.shape)}),
        call.at(0), call.stream);
  return true;
}

bool CudaExecutor::backwardTranspose(BackwardCall &call, std::string &error) {
  if (call.at(0))
    cuda::copyStrided(call.dOut->data(), math::contiguousView(call.dOut->shape),
                      call.at(0),
                      math::permutedView(call.in(0).shape, call.op.attrs.perm),
                      1.0f, true, call.stream);
  return true;
}

bool CudaExecutor::backwardSlice(BackwardCall &call, std::string &error) {
  if (call.at(0))
    cuda::copyStrided(
        call.dOut->data(), math::contiguousView(call.dOut->shape), call.at(0),
        math::sliceView(call.in(0).shape, call.dOut->shape,
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
          math::axisBlockView(call.dOut->shape, axis, begin, call.in(i).shape),
          call.at(i), math::contiguousView(call.in(i).shape), 1.0f, true,
          call.stream);
    begin += call.in(i).shape[axis];
  }
  return true;
}

bool CudaExecutor::backwardGather(BackwardCall &call, std::string &error) {
  if (call.at(0))
    cuda::gatherBackward(call.in(1).data(), call.dOut->data(),
                         math::gatherGeometry(call.in(0).shape,
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
        i == 1 ? math::ReduceTerm::WhereTrue : math::ReduceTerm::WhereFalse,
        operands,
        math::reductionOnto(call.in(i).shape, out,
                            {math::contiguousView(out),
                             math::broadcastView(condition.shape, out)}),
        call.at(i), 1.0f, true, call.stream);
  }
  return true;
}

bool CudaExecutor::convolveBackward(const math::ConvGeometry &g,
                                    const float *x, const float *w,
                                    const float *dOut, float *dx, float *dw,
                                    cudaStream_t stream, std::string &error) {
  int64_t rows = g.columnRows(), spatial = g.spatial(),
          og = g.filtersPerGroup();
  int64_t perChunk = std::clamp<int64_t>(
      kColumnFloats / std::max<int64_t>(1, rows * spatial), 1, g.n);
  DTensor columns, dcolumns;
  if ((dw && !allocate({perChunk * rows * spatial}, false, columns, error)) ||
      (dx && !allocate({perChunk * rows * spatial}, false, dcolumns, error)))
    return false;
  for (int64_t first = 0; first < g.n && (dx || dw); first += perChunk) {
    int64_t images = std::min(perChunk, g.n - first);
    for (int64_t group = 0; group < g.groups; ++group) {
      const float *filters = w + group * og * rows;
      const float *grads = dOut + (first * g.o + group * og) * spatial;
      if (dw) { // dW [og, rows] += dOut[image] [og, spatial] columns^T
        cuda::im2col(x, g, first, images, group, columns.data(), stream);
        for (int64_t image = 0; image < images; ++image) {
          cuda::MatmulShape s;
          s.transB = true;
          s.m = og;
          s.n = rows;
          s.k = spatial;
          s.accumulate = true;
          if (!matmul->run(s, grads + image * g.o * spatial,
                           columns.data() + image * rows * spatial,
                           dw + group * og * rows, stream, error))
            return false;
        }
      }
      if (dx) { // dcolumns[image] = W^T [rows, og] dOut[image]
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
        cuda::col2im(dcolumns.data(), g, first, images, group, dx, stream);
      }
    }
  }
  return true;
}

/// dBias [channels] += dOut [N, channels, ...] summed per channel.
static void sumPerChannel(const DTensor &dOut, int64_t channels, float *dBias,
                          cudaStream_t stream) {
  const float *operands[3] = {dOut.data(), nullptr, nullptr};
  cuda::reduceStrided(math::ReduceTerm::Value, operands,
                      math::reductionOnto({channels, 1, 1}, dOut.shape,
                                          {math::contiguousView(dOut.shape)}),
                      dBias, 1.0f, true, stream);
}

bool CudaExecutor::backwardConv2d(BackwardCall &call, std::string &error) {
  const DTensor &x = call.in(0), &w = call.in(1);
  math::ConvGeometry g =
      convGeometry(call.op, x.shape, w.shape, call.dOut->shape);
  if (!convolveBackward(g, x.data(), w.data(), call.dOut->data(), call.at(0),
                        call.at(1), call.stream, error))
    return false;
  if (call.numOperands > 2 && call.at(2))
    sumPerChannel(*call.dOut, g.o, call.at(2), call.stream);
  return true;
}

bool CudaExecutor::backwardConvTranspose2d(BackwardCall &call,
                                           std::string &error) {
  // dOut plays the transposed convolution's input (cpu::
  // convTranspose2dBackward): dx += its convolution, dw += the weight
  // gradient with x as the output gradient.
  const DTensor &x = call.in(0), &w = call.in(1);
  math::ConvGeometry g =
      convGeometry(call.op, call.dOut->shape, w.shape, x.shape);
  if ((call.at(0) && !convolve(g, call.dOut->data(), w.data(), call.at(0),
                               true, call.stream, error)) ||
      (call.at(1) &&
       !convolveBackward(g, call.dOut->data(), w.data(), x.data(), nullptr,
                         call.at(1), call.stream, error)))
    return false;
  if (call.numOperands > 2 && call.at(2))
    sumPerChannel(*call.dOut, g.c, call.at(2), call.stream);
  return true;
}

bool CudaExecutor::backwardBatchNorm(BackwardCall &call, std::string &error) {
  const DTensor &x = call.in(0);
  int64_t n = x.shape[0], c = x.shape[1], inner = x.numel() / (n * c);
  bool fixed = call.op.attrs.inference;
  cuda::batchNormBackward(x.data(), call.in(1).data(), call.dOut->data(),
                          call.at(0), call.at(1), call.at(2), n, c, inner,
                          static_cast<float>(call.op.attrs.epsilon),
                          call.stream, fixed ? call.in(3).data() : nullptr,
                          fixed ? call.in(4).data() : nullptr);
  return true;
}

bool CudaExecutor::backwardPool(BackwardCall &call, std::string &error) {
  if (call.at(0)) {
    math::PoolGeometry g =
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

bool CudaExecutor::backwardRmsNorm(BackwardCall &call, std::string &error) {
  const DTensor &x = call.in(0);
  int64_t d = x.shape.back(), rows = x.numel() / d;
  DTensor rstd;
  if (!allocate(x.shape, false, call.scratch, error) ||
      !allocate({rows}, false, rstd, error))
    return false;
  cuda::rmsNorm(x.data(), call.in(1).data(), call.scratch.data(), rstd.data(),
                rows, d, static_cast<float>(call.op.attrs.epsilon),
                call.stream);
  cuda::rmsNormBackward(x.data(), call.in(1).data(), rstd.data(),
                        call.dOut->data(), call.at(0), call.at(1), rows, d,
                        call.stream);
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
    bool log = call.op.attrs.logarithm;
    (log ? cuda::logSoftmax : cuda::softmax)(call.in(0).data(),
                                             call.scratch.data(), rows, d,
                                             call.stream);
    (log ? cuda::logSoftmaxBackward : cuda::softmaxBackward)(
        call.scratch.data(), call.dOut->data(), call.at(0), rows, d,
        call.stream);
  }
  return true;
}

bool CudaExecutor::backwardAttention(BackwardCall &call, std::string &error) {
  const DTensor &q = call.in(0);
  cuda::AttentionShape a = attentionShapeOf(call.op, q.shape);
  if (cuda::useFusedAttention(gpu.attention, a)) {
    if (!allocate({cuda::fusedBackwardScratchFloats(a)}, false, call.scratch,
                  error))
      return false;
    cuda::fusedCausalAttentionBackward(
        a, productType(call.op), q.data(), call.in(1).data(),
        call.in(2).data(), call.dOut->data(), call.at(0), call.at(1),
        call.at(2), call.scratch.data(), call.stream);
    return true;
  }
  // The forward's probabilities again (not its output: the backward does
  // not read it).
  DTensor probs;
  if (!allocate({a.batch * a.heads * a.seq * a.seq}, false, probs, error) ||
      !allocate({a.scratchFloats()}, false, call.scratch, error))
    return false;
  if (!cuda::causalAttentionProbabilities(*matmul, a, q.data(),
                                          call.in(1).data(), probs.data(),
                                          call.scratch.data(), call.stream,
                                          error) ||
      !cuda::causalAttentionBackward(
          *matmul, a, q.data(), call.in(1).data(), call.in(2).data(),
          probs.data(), call.dOut->data(), call.at(0), call.at(1), call.at(2),
          call.scratch.data(), call.stream, error))
    return false;
  return true;
}

bool CudaExecutor::backwardRotary(BackwardCall &call, std::string &error) {
  const DTensor &dOut = *call.dOut;
  int64_t heads = call.op.attrs.numHeads;
  if (call.at(0))
    cuda::rotary(dOut.data(), call.at(0), dOut.shape[0], dOut.shape[1], heads,
                 dOut.shape[2] / heads, call.op.attrs.theta, -1, true,
                 call.stream);
  return true;
}

bool CudaExecutor::backwardEmbedding(BackwardCall &call, std::string &error) {
  int64_t rows = call.in(1).shape.front();
  if (call.at(1))
    cuda::embeddingBackward(
        call.in(0).data(), call.dOut->data(), call.at(1), call.in(0).numel(),
        call.in(1).shape.back(),
        firstTableRow(call.op, tensorParallelPosition, rows), rows,
        call.stream);
  return true;
}

bool CudaExecutor::backwardTpAllReduce(BackwardCall &call, std::string &error) {
  if (!call.at(0))
    return true;
  // The gradient buffer is zeroed for this op (runBackward): the sum may
  // write it.
  if (call.op.attrs.inBackward)
    return sumOverTensorParallelGroup(call.dOut->data(), call.at(0),
                                      call.dOut->numel(), error);
  cuda::accumulate(call.dOut->data(), call.at(0), call.dOut->numel(),
                   call.stream);
  return true;
}

bool CudaExecutor::backwardCrossEntropy(BackwardCall &call,
                                        std::string &error) {
  // The row sums again (with one more sum over a vocabulary-parallel
  // group), then this member's classes.
  const DTensor &logits = call.in(0);
  int64_t classes = logits.shape.back(), rows = logits.numel() / classes;
  int64_t rank = call.op.attrs.vocabShard ? tensorParallelPosition : 0;
  if (!crossEntropyLoss(call.op, logits, call.in(1), call.scratch, call.extra,
                        call.stream, error))
    return false;
  if (call.at(0))
    cuda::crossEntropySliceBackward(
        logits.data(), call.in(1).data(), call.scratch.data(), call.at(0),
        rows, classes, lossClassesOf(call.op, classes, rank), rank, 1.0f,
        call.stream);
  return true;
}

bool CudaExecutor::backwardView(BackwardCall &call, std::string &error) {
  if (call.at(0))
    cuda::accumulate(call.dOut->data(), call.at(0), call.dOut->numel(),
                     call.stream);
  return true;
}

//===- KernelTable.cpp - The CPU backend's kernel per op kind -------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Cpu/KernelTable.h"

#include "dtfm/Runtime/CustomKernels.h"

using namespace dtfm::runtime;

const dtfm::runtime::cpu::Tensor &cpu::ForwardCall::in(int i) const {
  int64_t id = op.operands[i];
  auto it = values.find(id);
  if (it != values.end())
    return it->second;
  return host.params.at(paramOfValue.at(id));
}
using namespace dtfm::runtime::cpu;

namespace {

dtfm::KernelTensor toKernel(const Tensor &t) { return {t.shape, t.data}; }

/// A vocabulary-parallel cross-entropy over the member's group of `degree`:
/// its slice's row sums, summed over the group, give every member the loss
/// and each row's log-sum-exp.
bool vocabParallelLoss(const Tensor &logits, const Tensor &labels,
                       int64_t degree, int64_t valid, const GroupMember &group,
                       float &loss, std::vector<float> &logSumExp,
                       std::string &error) {
  if (!group.sum || !*group.sum) {
    error = "a vocabulary-parallel loss outside a tensor-parallel group";
    return false;
  }
  Tensor sums =
      crossEntropySliceSums(logits, labels, group.rank, degree, valid);
  if (!(*group.sum)(sums.data.data(), sums.data.size(), error))
    return false;
  loss = crossEntropyFromSums(sums, degree, logSumExp);
  return true;
}

/// The op's custom call with its operands' shapes.
dtfm::CustomOpCall customCall(const ProgramOp &op,
                              const std::vector<const Tensor *> &operands) {
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor *t : operands)
    shapes.push_back(t->shape);
  return dtfm::runtime::customCall(op, shapes);
}

bool customForward(const ForwardCall &c, std::string &error) {
  std::vector<const Tensor *> operands;
  for (int i = 0; i < c.numOperands(); ++i)
    operands.push_back(&c.in(i));
  dtfm::CustomOpCall call = customCall(c.op, operands);
  const dtfm::CustomOpDef *def =
      customKernels(call.kind, CustomKernel::CpuForward, error);
  if (!def)
    return false;
  std::vector<dtfm::KernelTensor> inputs, results;
  std::vector<const dtfm::KernelTensor *> views;
  for (const Tensor *t : operands)
    inputs.push_back(toKernel(*t));
  for (const dtfm::KernelTensor &t : inputs)
    views.push_back(&t);
  for (const ProgramValue &r : c.op.results)
    results.push_back(toKernel(Tensor(r.shape)));
  if (!def->forward(call, views, results, error)) {
    error = "'" + call.kind + "': " + error;
    return false;
  }
  if (results.size() != c.op.results.size()) {
    error = "'" + call.kind + "' kernel changed the result count";
    return false;
  }
  for (size_t i = 0; i < c.op.results.size(); ++i) {
    if (results[i].data.size() !=
        static_cast<size_t>(Tensor(c.op.results[i].shape).numel())) {
      error = "'" + call.kind + "' kernel resized result " + std::to_string(i);
      return false;
    }
    Tensor t;
    t.shape = results[i].shape;
    t.data = std::move(results[i].data);
    c.set(static_cast<int>(i), std::move(t));
  }
  return true;
}

bool customBackward(const BackwardCall &c, std::string &error) {
  int n = c.numOperands();
  dtfm::CustomOpCall call = customCall(c.op, c.operands);
  const dtfm::CustomOpDef *def =
      customKernels(call.kind, CustomKernel::CpuBackward, error);
  if (!def)
    return false;
  std::vector<dtfm::KernelTensor> inputs, operandGrads;
  std::vector<const dtfm::KernelTensor *> views;
  std::vector<bool> wanted(n, false);
  for (int i = 0; i < n; ++i) {
    inputs.push_back(toKernel(c.in(i)));
    operandGrads.push_back(toKernel(Tensor(c.in(i).shape)));
    wanted[i] = c.at(i) != nullptr;
  }
  for (const dtfm::KernelTensor &t : inputs)
    views.push_back(&t);
  if (!def->backward(call, views, toKernel(*c.dOut), wanted, operandGrads,
                     error)) {
    error = "custom op '" + call.kind + "' backward: " + error;
    return false;
  }
  for (int i = 0; i < n; ++i)
    if (Tensor *g = c.at(i)) {
      if (operandGrads[i].data.size() != g->data.size()) {
        error = "custom op '" + call.kind +
                "' backward resized the gradient of operand " +
                std::to_string(i);
        return false;
      }
      g->data = std::move(operandGrads[i].data);
    }
  return true;
}

OpTable<KernelEntry> buildTable() {
  OpTable<KernelEntry> t{};
  auto at = [&](OpKind kind) -> KernelEntry & {
    return t[static_cast<size_t>(kind)];
  };
  using F = const ForwardCall &;
  using B = const BackwardCall &;
  using E = std::string &;

  at(OpKind::Constant).forward = [](F c, E error) {
    Tensor out(c.op.results[0].shape);
    const std::vector<int64_t> &elements = c.op.attrs.values;
    if (static_cast<int64_t>(elements.size()) != out.numel()) {
      error = "has the wrong number of values";
      return false;
    }
    std::copy(elements.begin(), elements.end(), out.data.begin());
    c.set(0, std::move(out));
    return true;
  };
  at(OpKind::Accumulate).forward = [](F c, E) {
    Tensor sum = c.in(0);
    for (int i = 1; i < c.numOperands(); ++i) {
      const std::vector<float> &term = c.in(i).data;
      for (size_t j = 0; j < sum.data.size(); ++j)
        sum.data[j] += term[j];
    }
    c.set(0, std::move(sum));
    return true;
  };
  at(OpKind::Gather) = {
      [](F c, E error) {
        Tensor out;
        if (!gather(c.in(0), c.in(1), c.op.attrs.axis, out, error))
          return false;
        c.set(0, std::move(out));
        return true;
      },
      [](B c, E) {
        gatherBackward(c.in(0), c.in(1), c.op.attrs.axis, *c.dOut, c.at(0));
        return true;
      }};
  at(OpKind::Where) = {[](F c, E) {
                         c.set(0, where(c.in(0), c.in(1), c.in(2)));
                         return true;
                       },
                       [](B c, E) {
                         whereBackward(c.in(0), *c.dOut, c.at(1), c.at(2));
                         return true;
                       }};
  at(OpKind::Embedding) = {
      [](F c, E error) {
        error = indexRangeProblem(
            c.in(0), embeddingRowCount(c.op, c.in(1).dim(0)), "token id");
        if (!error.empty())
          return false;
        c.set(0, embedding(c.in(0), c.in(1),
                           firstTableRow(c.op, c.group.rank, c.in(1).dim(0))));
        return true;
      },
      [](B c, E) {
        embeddingBackward(c.in(0), *c.dOut, c.at(1),
                          firstTableRow(c.op, c.group.rank, c.in(1).dim(0)));
        return true;
      }};
  // Elementwise math (OpKinds.def's DTFM_UNARY_MATH and DTFM_BINARY_MATH
  // lists): one kernel for each list.
  for (size_t k = 0; k < kNumOpKinds; ++k) {
    if (unaryMathOf(static_cast<OpKind>(k)))
      t[k] = {[](F c, E) {
                c.set(0, unaryMath(c.in(0), *unaryMathOf(c.op.computes),
                                   unaryParamsOf(c.op.attrs)));
                return true;
              },
              [](B c, E) {
                unaryMathBackward(c.in(0), *unaryMathOf(c.op.computes),
                                  unaryParamsOf(c.op.attrs), *c.dOut, c.at(0));
                return true;
              }};
    if (binaryMathOf(static_cast<OpKind>(k)))
      t[k] = {[](F c, E) {
                c.set(0, binaryMath(c.in(0), c.in(1),
                                    *binaryMathOf(c.op.computes)));
                return true;
              },
              [](B c, E) {
                binaryMathBackward(c.in(0), c.in(1),
                                   *binaryMathOf(c.op.computes), *c.dOut,
                                   c.at(0), c.at(1));
                return true;
              }};
  }
  at(OpKind::ReduceMean) = {
      [](F c, E) {
        c.set(0, reduceMean(c.in(0), c.op.attrs.axes, c.op.attrs.keepdims));
        return true;
      },
      [](B c, E) {
        reduceMeanBackward(c.in(0), c.op.attrs.axes, *c.dOut, c.at(0));
        return true;
      }};
  for (OpKind kind : {OpKind::ReduceMax, OpKind::ReduceMin})
    at(kind) = {[](F c, E) {
                  c.set(0, reduceExtremum(c.in(0), c.op.attrs.axes,
                                          c.op.attrs.keepdims,
                                          c.op.computes == OpKind::ReduceMax));
                  return true;
                },
                [](B c, E) {
                  reduceExtremumBackward(c.in(0), c.op.attrs.axes,
                                         c.op.computes == OpKind::ReduceMax,
                                         *c.dOut, c.at(0));
                  return true;
                }};
  at(OpKind::Concat) = {[](F c, E) {
                          std::vector<const Tensor *> parts;
                          for (int i = 0; i < c.numOperands(); ++i)
                            parts.push_back(&c.in(i));
                          c.set(0, concat(parts, c.op.attrs.axis));
                          return true;
                        },
                        [](B c, E) {
                          std::vector<Tensor *> parts;
                          std::vector<Tensor> unwanted;
                          unwanted.reserve(c.numOperands());
                          for (int i = 0; i < c.numOperands(); ++i) {
                            unwanted.emplace_back(c.in(i).shape);
                            parts.push_back(c.at(i) ? c.at(i)
                                                    : &unwanted.back());
                          }
                          concatBackward(*c.dOut, c.op.attrs.axis, parts);
                          return true;
                        }};
  at(OpKind::Slice) = {[](F c, E) {
                         c.set(0, slice(c.in(0), c.op.attrs.starts,
                                        c.op.attrs.ends, c.op.attrs.steps));
                         return true;
                       },
                       [](B c, E) {
                         sliceBackward(c.in(0), c.op.attrs.starts,
                                       c.op.attrs.steps, *c.dOut, c.at(0));
                         return true;
                       }};
  at(OpKind::Transpose) = {[](F c, E) {
                             c.set(0, transpose(c.in(0), c.op.attrs.perm));
                             return true;
                           },
                           [](B c, E) {
                             transposeBackward(*c.dOut, c.op.attrs.perm,
                                               c.at(0));
                             return true;
                           }};
  at(OpKind::Linear) = {
      [](F c, E) {
        const Tensor *bias = c.numOperands() > 2 ? &c.in(2) : nullptr;
        c.set(0, linear(c.in(0), c.in(1), bias));
        return true;
      },
      [](B c, E) {
        linearBackward(c.in(0), c.in(1), *c.dOut, c.at(0), c.at(1),
                       c.numOperands() > 2 ? c.at(2) : nullptr);
        return true;
      }};
  at(OpKind::Matmul) = {
      [](F c, E) {
        c.set(0, matmul(c.in(0), c.in(1), c.op.attrs.transposeRhs));
        return true;
      },
      [](B c, E) {
        matmulBackward(c.in(0), c.in(1), c.op.attrs.transposeRhs, *c.dOut,
                       c.at(0), c.at(1));
        return true;
      }};
  at(OpKind::LayerNorm) = {
      [](F c, E) {
        std::vector<float> mean, rstd;
        c.set(0, layerNorm(c.in(0), c.in(1), c.in(2), c.op.attrs.epsilon, mean,
                           rstd));
        return true;
      },
      [](B c, E) {
        std::vector<float> mean, rstd;
        layerNorm(c.in(0), c.in(1), c.in(2), c.op.attrs.epsilon, mean, rstd);
        layerNormBackward(c.in(0), c.in(1), mean, rstd, *c.dOut, c.at(0),
                          c.at(1), c.at(2));
        return true;
      }};
  at(OpKind::RmsNorm) = {
      [](F c, E) {
        std::vector<float> rstd;
        c.set(0, rmsNorm(c.in(0), c.in(1), c.op.attrs.epsilon, rstd));
        return true;
      },
      [](B c, E) {
        std::vector<float> rstd;
        rmsNorm(c.in(0), c.in(1), c.op.attrs.epsilon, rstd);
        rmsNormBackward(c.in(0), c.in(1), rstd, *c.dOut, c.at(0), c.at(1));
        return true;
      }};
  at(OpKind::Gelu) = {[](F c, E) {
                        c.set(0, gelu(c.in(0), c.op.attrs.tanhApproximation));
                        return true;
                      },
                      [](B c, E) {
                        geluBackward(c.in(0), c.op.attrs.tanhApproximation,
                                     *c.dOut, c.at(0));
                        return true;
                      }};
  at(OpKind::Relu) = {[](F c, E) {
                        c.set(0, relu(c.in(0)));
                        return true;
                      },
                      [](B c, E) {
                        reluBackward(relu(c.in(0)), *c.dOut, c.at(0));
                        return true;
                      }};
  at(OpKind::Softmax) = {[](F c, E error) {
                           int64_t axis = c.op.attrs.axis;
                           int64_t rank =
                               static_cast<int64_t>(c.in(0).shape.size());
                           if (axis != -1 && axis != rank - 1) {
                             error = "only the last axis is supported";
                             return false;
                           }
                           c.set(0, c.op.attrs.logarithm ? logSoftmax(c.in(0))
                                                         : softmax(c.in(0)));
                           return true;
                         },
                         [](B c, E) {
                           if (c.op.attrs.logarithm)
                             logSoftmaxBackward(logSoftmax(c.in(0)), *c.dOut,
                                                c.at(0));
                           else
                             softmaxBackward(softmax(c.in(0)), *c.dOut,
                                             c.at(0));
                           return true;
                         }};
  at(OpKind::Rotary) = {
      [](F c, E) {
        c.set(0, rotary(c.in(0), c.op.attrs.numHeads, c.op.attrs.theta));
        return true;
      },
      [](B c, E) {
        rotaryBackward(*c.dOut, c.op.attrs.numHeads, c.op.attrs.theta, c.at(0));
        return true;
      }};
  at(OpKind::CausalAttention) = {
      [](F c, E) {
        Tensor probs;
        c.set(0, causalAttention(c.in(0), c.in(1), c.in(2), c.op.attrs.numHeads,
                                 c.op.attrs.keyValueHeads(), probs));
        return true;
      },
      [](B c, E) {
        Tensor probs;
        int64_t heads = c.op.attrs.numHeads,
                kvHeads = c.op.attrs.keyValueHeads();
        causalAttention(c.in(0), c.in(1), c.in(2), heads, kvHeads, probs);
        causalAttentionBackward(c.in(0), c.in(1), c.in(2), heads, kvHeads,
                                probs, *c.dOut, c.at(0), c.at(1), c.at(2));
        return true;
      }};
  at(OpKind::CrossEntropy) = {
      [](F c, E error) {
        error = indexRangeProblem(
            c.in(1), lossLabelCount(c.op, c.in(0).dim(-1)), "label");
        if (!error.empty())
          return false;
        float l = 0;
        int64_t valid = lossClassesOf(c.op, c.in(0).dim(-1), c.group.rank);
        if (c.op.attrs.vocabShard) {
          std::vector<float> logSumExp;
          if (!vocabParallelLoss(c.in(0), c.in(1), c.op.attrs.vocabShard,
                                 valid, c.group, l, logSumExp, error))
            return false;
        } else {
          Tensor probs;
          l = crossEntropy(c.in(0), c.in(1), probs, valid);
        }
        c.loss += l;
        c.set(0, Tensor({}, l));
        return true;
      },
      [](B c, E error) {
        int64_t valid = lossClassesOf(c.op, c.in(0).dim(-1), c.group.rank);
        if (c.op.attrs.vocabShard) {
          // The backward recomputes the log-sum-exps (one more sum).
          float l = 0;
          std::vector<float> logSumExp;
          if (!vocabParallelLoss(c.in(0), c.in(1), c.op.attrs.vocabShard,
                                 valid, c.group, l, logSumExp, error))
            return false;
          crossEntropySliceBackward(c.in(0), c.in(1), c.group.rank, logSumExp,
                                    1.0f, c.at(0), valid);
          return true;
        }
        Tensor probs;
        crossEntropy(c.in(0), c.in(1), probs, valid);
        crossEntropyBackward(probs, c.in(1), 1.0f, c.at(0));
        return true;
      }};
  // dtfm.tp_all_reduce's sum over its group is the executor's (it has the
  // communicator): the kernels copy, the executor sums the copy in place.
  for (OpKind kind : {OpKind::Reshape, OpKind::Flatten, OpKind::TpAllReduce})
    at(kind) = {[](F c, E) {
                  c.set(0, c.in(0));
                  return true;
                },
                [](B c, E) {
                  if (Tensor *g = c.at(0))
                    g->data = c.dOut->data;
                  return true;
                }};
  at(OpKind::Conv2d) = {
      [](F c, E) {
        const Tensor *bias = c.numOperands() > 2 ? &c.in(2) : nullptr;
        c.set(0, conv2d(c.in(0), c.in(1), bias, c.op.attrs.window,
                        c.op.attrs.groups));
        return true;
      },
      [](B c, E) {
        conv2dBackward(c.in(0), c.in(1), c.op.attrs.window, c.op.attrs.groups,
                       *c.dOut, c.at(0), c.at(1),
                       c.numOperands() > 2 ? c.at(2) : nullptr);
        return true;
      }};
  at(OpKind::ConvTranspose2d) = {
      [](F c, E) {
        const Tensor *bias = c.numOperands() > 2 ? &c.in(2) : nullptr;
        c.set(0, convTranspose2d(c.in(0), c.in(1), bias, c.op.attrs.window,
                                 c.op.attrs.outputPadding, c.op.attrs.groups));
        return true;
      },
      [](B c, E) {
        convTranspose2dBackward(c.in(0), c.in(1), c.op.attrs.window,
                                c.op.attrs.groups, *c.dOut, c.at(0), c.at(1),
                                c.numOperands() > 2 ? c.at(2) : nullptr);
        return true;
      }};
  at(OpKind::BatchNorm) = {
      [](F c, E) {
        if (c.op.attrs.inference) {
          c.set(0, batchNormInference(c.in(0), c.in(1), c.in(2), c.in(3),
                                      c.in(4), c.op.attrs.epsilon));
          return true;
        }
        // The running statistics are frozen parameters: updated in place.
        Tensor *mean = nullptr, *var = nullptr;
        auto pm = c.paramOfValue.find(c.op.operands[3]);
        auto pv = c.paramOfValue.find(c.op.operands[4]);
        if (pm != c.paramOfValue.end())
          mean = &c.host.params.at(pm->second);
        if (pv != c.paramOfValue.end())
          var = &c.host.params.at(pv->second);
        c.set(0, batchNorm(c.in(0), c.in(1), c.in(2), c.op.attrs.epsilon, mean,
                           var, c.op.attrs.momentum));
        return true;
      },
      [](B c, E) {
        if (c.op.attrs.inference)
          batchNormInferenceBackward(c.in(0), c.in(1), c.in(3), c.in(4),
                                     c.op.attrs.epsilon, *c.dOut, c.at(0),
                                     c.at(1), c.at(2));
        else
          batchNormBackward(c.in(0), c.in(1), c.op.attrs.epsilon, *c.dOut,
                            c.at(0), c.at(1), c.at(2));
        return true;
      }};
  at(OpKind::MaxPool2d) = {
      [](F c, E) {
        const OpAttrs &a = c.op.attrs;
        c.set(0, maxPool2d(c.in(0), a.kernel[0], a.kernel[1], a.window));
        return true;
      },
      [](B c, E) {
        const OpAttrs &a = c.op.attrs;
        maxPool2dBackward(c.in(0), a.kernel[0], a.kernel[1], a.window, *c.dOut,
                          c.at(0));
        return true;
      }};
  at(OpKind::AvgPool2d) = {
      [](F c, E) {
        const OpAttrs &a = c.op.attrs;
        c.set(0, avgPool2d(c.in(0), a.kernel[0], a.kernel[1], a.window));
        return true;
      },
      [](B c, E) {
        const OpAttrs &a = c.op.attrs;
        avgPool2dBackward(c.in(0), a.kernel[0], a.kernel[1], a.window, *c.dOut,
                          c.at(0));
        return true;
      }};
  at(OpKind::GlobalAvgPool) = {[](F c, E) {
                                 c.set(0, globalAvgPool(c.in(0)));
                                 return true;
                               },
                               [](B c, E) {
                                 globalAvgPoolBackward(c.in(0), *c.dOut,
                                                       c.at(0));
                                 return true;
                               }};
  at(OpKind::TopkCompress).forward = [](F c, E) {
    Tensor kept, indices;
    topK(c.in(0), c.op.attrs.k, kept, indices);
    c.set(0, std::move(kept));
    c.set(1, std::move(indices));
    return true;
  };
  at(OpKind::TopkDecompress).forward = [](F c, E) {
    c.set(0, scatterTopK(c.in(0), c.in(1), c.op.results[0].shape));
    return true;
  };
  at(OpKind::Custom) = {customForward, customBackward};
  return t;
}

} // namespace

const OpTable<KernelEntry> &dtfm::runtime::cpu::kernelTable() {
  static const OpTable<KernelEntry> table = buildTable();
  return table;
}

bool dtfm::runtime::cpu::supportsProgram(const StageProgram &program,
                                         std::string &reason) {
  const OpTable<KernelEntry> &table = kernelTable();
  for (const ProgramOp &op : program.ops) {
    if (isStructural(op.kind) && !op.isBackward())
      continue;
    const KernelEntry &entry = table[static_cast<size_t>(op.computes)];
    if (op.isBackward() ? !entry.backward : !entry.forward) {
      reason = op.describe() + " has no CPU kernel";
      return false;
    }
  }
  return true;
}

//===- Sharding.cpp - What part of a tensor a program holds ---------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Plan/Sharding.h"
#include "dtfm/Plan/Dataflow.h"

#include "plan.pb.h"

#include <algorithm>

using namespace dtfm::plan;
namespace format = dtfm::format;

ElementRange dtfm::plan::shardOf(int64_t elements, int64_t member,
                                 int64_t members) {
  if (members < 1 || member < 0 || member >= members)
    return {0, elements};
  // In 128 bits: elements x members may not fit in 64.
  auto at = [&](int64_t k) {
    return static_cast<int64_t>(static_cast<__int128>(elements) * k / members);
  };
  return {at(member), at(member + 1)};
}

std::map<std::string, ElementRange>
dtfm::plan::shardedParameters(const StageProgram &program) {
  std::map<std::string, ElementRange> shards;
  std::string device = program.source ? program.source->device() : "";
  for (const ParameterUpdate &u : parameterUpdates(program)) {
    if (!u.sync || !u.sync->attrs.shardState)
      continue;
    const std::vector<std::string> &group = u.sync->attrs.group;
    int64_t member =
        std::find(group.begin(), group.end(), device) - group.begin();
    int64_t elements = 1;
    for (int64_t d : u.param->results[0].shape)
      elements *= std::max<int64_t>(0, d);
    shards[u.param->attrs.name] =
        shardOf(elements, member, static_cast<int64_t>(group.size()));
  }
  return shards;
}

ShardedLayout
dtfm::plan::layoutShards(const std::vector<int64_t> &tensorElements,
                         int64_t members, bool equalChunks) {
  ShardedLayout layout;
  members = std::max<int64_t>(1, members);
  std::vector<int64_t> lengths(members, 0);
  for (int64_t elements : tensorElements)
    for (int64_t k = 0; k < members; ++k)
      lengths[k] += shardOf(elements, k, members).size();
  int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  layout.chunkStart.assign(members + 1, 0);
  for (int64_t k = 0; k < members; ++k)
    layout.chunkStart[k + 1] =
        layout.chunkStart[k] + (equalChunks ? longest : lengths[k]);
  std::vector<int64_t> next(layout.chunkStart.begin(),
                            layout.chunkStart.end() - 1);
  for (int64_t elements : tensorElements) {
    std::vector<int64_t> &at = layout.pieces.emplace_back(members);
    for (int64_t k = 0; k < members; ++k) {
      at[k] = next[k];
      next[k] += shardOf(elements, k, members).size();
    }
  }
  return layout;
}

std::vector<int64_t> dtfm::plan::wholeShape(const ProgramOp &param) {
  std::vector<int64_t> shape = param.results.at(0).shape;
  if (param.attrs.tpDim >= 0)
    shape[param.attrs.tpDim] *= param.attrs.tpDegree;
  return shape;
}

/// The tensor as [outer, dim, inner] around `dim`.
static void splitAround(const std::vector<int64_t> &shape, int64_t dim,
                        int64_t &outer, int64_t &inner) {
  outer = inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    (d < dim ? outer : inner) *= d == dim ? 1 : shape[d];
}

dtfm::format::Tensor dtfm::plan::sliceOf(const format::Tensor &whole,
                                         int64_t dim, int64_t rank,
                                         int64_t parts) {
  std::vector<int64_t> shape = whole.shape;
  int64_t width = shape[dim] / parts;
  shape[dim] = width;
  format::Tensor slice(shape);
  int64_t outer, inner;
  splitAround(shape, dim, outer, inner);
  for (int64_t o = 0; o < outer; ++o)
    std::copy_n(whole.data.begin() +
                    (o * whole.shape[dim] + rank * width) * inner,
                width * inner, slice.data.begin() + o * width * inner);
  return slice;
}

dtfm::format::Tensor
dtfm::plan::joinSlices(const std::vector<format::Tensor> &slices, int64_t dim) {
  std::vector<int64_t> shape = slices.at(0).shape;
  int64_t width = shape[dim];
  shape[dim] = width * static_cast<int64_t>(slices.size());
  format::Tensor whole(shape);
  int64_t outer, inner;
  splitAround(shape, dim, outer, inner);
  for (size_t r = 0; r < slices.size(); ++r)
    for (int64_t o = 0; o < outer; ++o)
      std::copy_n(slices[r].data.begin() + o * width * inner, width * inner,
                  whole.data.begin() +
                      (o * shape[dim] + static_cast<int64_t>(r) * width) *
                          inner);
  return whole;
}

int64_t dtfm::plan::tensorParallelRank(const StageProgram &program) {
  return program.source ? program.source->tp_rank() : 0;
}

dtfm::format::Tensor dtfm::plan::programSlice(const StageProgram &program,
                                              const ProgramOp &param,
                                              format::Tensor whole) {
  if (param.attrs.tpDim < 0)
    return whole;
  return sliceOf(whole, param.attrs.tpDim, tensorParallelRank(program),
                 param.attrs.tpDegree);
}

std::map<std::string, TensorParallelSlice>
dtfm::plan::tensorParallelSlices(const StageProgram &program) {
  std::map<std::string, TensorParallelSlice> slices;
  for (const ProgramOp &op : program.ops)
    if (op.kind == OpKind::Param && op.attrs.tpDim >= 0)
      slices[op.attrs.name] = {op.attrs.tpDim, tensorParallelRank(program),
                               op.attrs.tpDegree};
  return slices;
}

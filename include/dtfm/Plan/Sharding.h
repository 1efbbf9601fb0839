//===- Sharding.h - What part of a tensor a program holds -------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR, no backend).
//
//===----------------------------------------------------------------------===//
//
// The slices of the plan's tensors a device program holds: the shard of a
// parameter's optimizer state it owns (dtfm.shard_state, the plan's
// param_shards), its slice of a tensor-parallel parameter (dtfm.tp_shard),
// of a vocabulary-parallel embedding and of the loss's classes.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLAN_SHARDING_H
#define DTFM_PLAN_SHARDING_H

#include "dtfm/Format/TensorFile.h"
#include "dtfm/Plan/Program.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dtfm::plan {

/// Elements [begin, end) of a flat tensor.
struct ElementRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

/// The part of a tensor of `elements` that member `member` of a
/// data-parallel group of `members` owns under sharded optimizer state
/// (dtfm.shard_state), and that the plan's param_shards record:
/// [member * elements / members, (member + 1) * elements / members).
ElementRange shardOf(int64_t elements, int64_t member, int64_t members);

/// How a group exchanges a sharded bucket (ZeRO-1's reduce-scatter of the
/// gradients and all-gather of the parameters): one buffer of `members`
/// chunks, chunk k holding member k's shard (shardOf) of each of the
/// bucket's tensors in order -- tensor t's at pieces[t][k] -- and spanning
/// [chunkStart[k], chunkStart[k + 1]). With `equalChunks` every chunk is as
/// long as the longest, the tail of the shorter ones padding (NCCL's
/// collectives take one count for every member); without, the chunks abut
/// (the transport's collectives take each member's bounds). Both backends
/// lay their buckets out by it.
struct ShardedLayout {
  std::vector<int64_t> chunkStart;
  std::vector<std::vector<int64_t>> pieces;
  int64_t chunkElements(int64_t member) const {
    return chunkStart[member + 1] - chunkStart[member];
  }
  int64_t totalElements() const { return chunkStart.back(); }
};
ShardedLayout layoutShards(const std::vector<int64_t> &tensorElements,
                           int64_t members, bool equalChunks);

/// Tensor parallelism (dtfm.tp_shard): the shape of the whole tensor a
/// parameter of `op` is slice `rank` of, and that slice cut from the whole
/// tensor, or the whole tensor put together from the slices of every rank
/// (in rank order). A parameter that is not a shard is its whole tensor.
std::vector<int64_t> wholeShape(const ProgramOp &param);
format::Tensor sliceOf(const format::Tensor &whole, int64_t dim, int64_t rank,
                       int64_t parts);
format::Tensor joinSlices(const std::vector<format::Tensor> &slices,
                          int64_t dim);

/// The program's rank in its tensor-parallel group (0 without one).
int64_t tensorParallelRank(const StageProgram &program);

/// The row of the whole table where a dtfm.embedding's table of
/// `tableRows` rows starts: the slice of member `rank` when it is
/// vocabulary-parallel (vocab_shard), 0 otherwise. Both backends' kernels
/// take it.
inline int64_t firstTableRow(const ProgramOp &embedding, int64_t rank,
                             int64_t tableRows) {
  return embedding.attrs.vocabShard ? rank * tableRows : 0;
}

/// How many of a dtfm.cross_entropy's `width` logit columns are classes on
/// member `rank`: those below the op's `classes` in the whole vocabulary
/// (all of them when it has none), the rest padding. Both backends' kernels
/// take it.
inline int64_t lossClassesOf(const ProgramOp &loss, int64_t width,
                             int64_t rank) {
  if (loss.attrs.classes <= 0)
    return width;
  int64_t first = loss.attrs.vocabShard ? rank * width : 0;
  return std::clamp<int64_t>(loss.attrs.classes - first, 0, width);
}

/// How many classes a dtfm.cross_entropy's labels may name, counted over
/// the whole vocabulary: its `classes`, or every column of every member.
inline int64_t lossLabelCount(const ProgramOp &loss, int64_t width) {
  if (loss.attrs.classes > 0)
    return loss.attrs.classes;
  return width * std::max<int64_t>(1, loss.attrs.vocabShard);
}

/// How many rows of the whole table a dtfm.embedding's token ids may name.
inline int64_t embeddingRowCount(const ProgramOp &embedding,
                                 int64_t tableRows) {
  return tableRows * std::max<int64_t>(1, embedding.attrs.vocabShard);
}

/// What parameter `param` of `program` holds of its `whole` tensor: the
/// program's slice of it (dtfm.tp_shard), or all of it.
format::Tensor programSlice(const StageProgram &program, const ProgramOp &param,
                            format::Tensor whole);

/// Where a parameter of a tensor-parallel program sits in its whole
/// tensor: slice `rank` of `degree` along `dim`.
struct TensorParallelSlice {
  int64_t dim = 0, rank = 0, degree = 1;
};
/// The program's sharded parameters (dtfm.tp_shard), by name.
std::map<std::string, TensorParallelSlice>
tensorParallelSlices(const StageProgram &program);

/// The parameters this program updates from a dtfm.shard_state sync, by
/// name, with the shard its device owns (its place in the sync's group).
std::map<std::string, ElementRange>
shardedParameters(const StageProgram &program);

} // namespace dtfm::plan

#endif // DTFM_PLAN_SHARDING_H

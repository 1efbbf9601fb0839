//===- DataSource.h - Training data for the workers --------------*- C++
//-*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Micro-batches addressed by global sample, so that every worker of a run
// (the first stage reading tokens, the last reading labels, every
// data-parallel replica its own share) builds exactly the data a
// single-device run of the same model would see. Micro-batch k of step t
// of pipeline p is global micro-batch t * (pipelines * M) + p * M + k; its
// rows are samples from the step's first sample on (the checkpoint's data
// position on resumption, Worker.h), each replica taking the ones of its
// own micro-batches, so replicas never share a sample.
//
//  - token pairs (an integer input [B, S] and an integer label of the same
//    shape): each sample is a window of S + 1 tokens, inputs its first S
//    and labels its last S.
//     - shuffled (--data's default): windows start every S tokens in each
//       shard (consecutive windows share one token, so that every token is
//       predicted once), and epoch e visits all of them in a seeded
//       pseudo-random order (a keyed permutation of the window index,
//       computed, never stored), epoch after epoch.
//     - sequential (--tokens, or --data-order sequential): sample i is
//       tokens [i * (S + 1), (i + 1) * (S + 1)) of the shards read as one
//       stream, wrapping around.
//    Without data, a synthetic stream from the seed that a model can learn:
//    each token is followed by a fixed successor (a hash of the token and
//    the seed) three times in four, by a random token otherwise; each row
//    seeded by its sample index.
//  - --inputs files: tensors named "<input>@<k>" (k the global micro-batch).
//  - anything else: seeded normal values (integers: tokens; booleans, i1
//    masks: 0 or 1), each row of the leading dimension by its sample index.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_DATASOURCE_H
#define DTFM_RUNTIME_DATASOURCE_H

#include "dtfm/Format/TokenShards.h"
#include "dtfm/Runtime/Executor.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dtfm::runtime {

enum class DataOrder { Shuffled, Sequential };

/// Where the samples come from (dtfm-run's --data, --data-dtype,
/// --data-order, --tokens, --inputs).
struct DataOptions {
  /// Files, directories and globs (format::expandTokenShards).
  std::vector<std::string> paths;
  std::optional<format::TokenDtype> dtype;
  DataOrder order = DataOrder::Shuffled;
  std::string inputsPath;
};

/// Where a micro-batch's samples are: its global index (for --inputs) and
/// the sample index of its first row.
struct BatchPosition {
  int64_t microBatch = 0;
  int64_t firstSample = 0;
};

class DataSource {
public:
  /// `vocabulary` bounds tokens (0: unknown). Shards are mapped and their
  /// dtypes checked here, their tokens as they are read.
  bool open(const DataOptions &options, uint64_t seed, int64_t vocabulary,
            std::string &error);

  bool hasTokens() const { return !shards.empty(); }
  const format::TokenShards &tokenShards() const { return shards; }

  /// The inputs and labels in `specs` at `position`. An input the --inputs
  /// file gives for some micro-batches must be there for this one too:
  /// running out of data is an error, not synthetic data. `sampleHash`
  /// gets the sum of the FNV-1a hashes of the token windows drawn (0 when
  /// none): the same whichever replicas and micro-batches share a step's
  /// samples, so that logs prove which samples a step trained on.
  bool microBatch(const BatchPosition &position,
                  const std::vector<InputSpec> &specs, MicroBatch &batch,
                  uint64_t &sampleHash, std::string &error) const;

  /// Refuses, in one line naming it, a shard shorter than one window of
  /// `windowTokens` (in sequential order: all of them together).
  bool checkWindows(int64_t windowTokens, std::string &error) const;

  /// Windows of `windowTokens` in an epoch of shuffled data (every window
  /// start of every shard); 0 without token data.
  int64_t windowsPerEpoch(int64_t windowTokens) const;

  /// The shard and first token of sample `sample`'s window of
  /// `windowTokens` tokens in shuffled order (exposed for tests).
  std::pair<size_t, int64_t> shuffledWindow(int64_t sample,
                                            int64_t windowTokens) const;

private:
  uint64_t successor(uint64_t token, uint64_t range) const;
  bool window(int64_t sample, int64_t windowTokens, uint32_t *out,
              std::string &error) const;
  const std::vector<int64_t> &windowStarts(int64_t windowTokens) const;

  std::string inputsPath;
  format::TokenShards shards;
  DataOrder order = DataOrder::Shuffled;
  std::map<std::string, cpu::Tensor> given;
  uint64_t seed = 0;
  int64_t vocabulary = 0;
  /// Per window length: the first global window index of each shard, and
  /// the total last.
  mutable std::map<int64_t, std::vector<int64_t>> firstWindows;
};

/// A bijection of [0, count) keyed by `key`: a balanced Feistel network on
/// the next even power of two, walked until it lands inside (fewer than 4
/// rounds on average). O(1) memory, whatever the count.
uint64_t permuteIndex(uint64_t index, uint64_t count, uint64_t key);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_DATASOURCE_H

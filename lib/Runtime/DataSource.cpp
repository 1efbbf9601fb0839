//===- DataSource.cpp - Training data for the workers ---------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/DataSource.h"
#include "dtfm/Runtime/Cpu/Kernels.h"
#include "dtfm/Support/Hash.h"

#include <algorithm>
#include <random>

using namespace dtfm::runtime;

static uint64_t mix64(uint64_t h) {
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 32;
  return h;
}

uint64_t dtfm::runtime::permuteIndex(uint64_t index, uint64_t count,
                                     uint64_t key) {
  if (count <= 1)
    return 0;
  int bits = 2;
  while (bits < 64 && (uint64_t{1} << bits) < count)
    bits += 2;
  int half = bits / 2;
  uint64_t mask = (uint64_t{1} << half) - 1;
  uint64_t x = index;
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      uint64_t next = left ^ (mix64(right ^ mix64(key + round)) & mask);
      left = right;
      right = next;
    }
    x = left << half | right;
  } while (x >= count);
  return x;
}

bool DataSource::open(const DataOptions &options, uint64_t seedValue,
                      int64_t vocab, std::string &error) {
  seed = seedValue;
  vocabulary = vocab;
  inputsPath = options.inputsPath;
  order = options.order;
  given.clear();
  firstWindows.clear();
  std::vector<std::string> paths;
  if (!format::expandTokenShards(options.paths, paths, error) ||
      !shards.open(paths, options.dtype, vocabulary, error))
    return false;
  if (!inputsPath.empty() && !format::readTensorFile(inputsPath, given, error))
    return false;
  return true;
}

uint64_t DataSource::successor(uint64_t token, uint64_t range) const {
  uint64_t h = (token + 1) * 0x9e3779b97f4a7c15ull ^ (seed + 0x5eed);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  return h % range;
}

const std::vector<int64_t> &
DataSource::windowStarts(int64_t windowTokens) const {
  auto [it, inserted] = firstWindows.try_emplace(windowTokens);
  if (inserted) {
    // Windows start every windowTokens - 1 tokens and fit in their shard.
    int64_t stride = std::max<int64_t>(windowTokens - 1, 1), total = 0;
    for (size_t s = 0; s < shards.size(); ++s) {
      it->second.push_back(total);
      int64_t n = shards.tokens(s);
      total += n < windowTokens ? 0 : (n - windowTokens) / stride + 1;
    }
    it->second.push_back(total);
  }
  return it->second;
}

bool DataSource::checkWindows(int64_t windowTokens, std::string &error) const {
  auto refuse = [&](const std::string &what, int64_t tokens) {
    error = what + ": its " + std::to_string(tokens) +
            " tokens are fewer than one sample's window of " +
            std::to_string(windowTokens) +
            " (the plan's sequence and the "
            "token after it)";
    return false;
  };
  if (order == DataOrder::Sequential)
    return shards.empty() || shards.totalTokens() >= windowTokens ||
           refuse("--data", shards.totalTokens());
  for (size_t s = 0; s < shards.size(); ++s)
    if (shards.tokens(s) < windowTokens)
      return refuse(shards.path(s), shards.tokens(s));
  return true;
}

int64_t DataSource::windowsPerEpoch(int64_t windowTokens) const {
  return shards.empty() ? 0 : windowStarts(windowTokens).back();
}

std::pair<size_t, int64_t>
DataSource::shuffledWindow(int64_t sample, int64_t windowTokens) const {
  const std::vector<int64_t> &first = windowStarts(windowTokens);
  uint64_t count = static_cast<uint64_t>(first.back());
  uint64_t epoch = static_cast<uint64_t>(sample) / count;
  uint64_t w = permuteIndex(static_cast<uint64_t>(sample) % count, count,
                            mix64(seed ^ mix64(epoch + 0xda7a)));
  size_t shard =
      static_cast<size_t>(std::upper_bound(first.begin(), first.end() - 1,
                                           static_cast<int64_t>(w)) -
                          first.begin() - 1);
  int64_t stride = std::max<int64_t>(windowTokens - 1, 1);
  return {shard, (static_cast<int64_t>(w) - first[shard]) * stride};
}

bool DataSource::window(int64_t sample, int64_t windowTokens, uint32_t *out,
                        std::string &error) const {
  if (order == DataOrder::Shuffled) {
    auto [shard, begin] = shuffledWindow(sample, windowTokens);
    return shards.read(shard, begin, windowTokens, out, error);
  }
  // One stream over the shards in order, wrapping around.
  int64_t total = shards.totalTokens();
  int64_t position = static_cast<int64_t>(
      static_cast<unsigned __int128>(sample) *
      static_cast<uint64_t>(windowTokens) % static_cast<uint64_t>(total));
  size_t shard = 0;
  while (position >= shards.tokens(shard)) {
    position -= shards.tokens(shard);
    shard = (shard + 1) % shards.size();
  }
  for (int64_t done = 0; done < windowTokens;) {
    int64_t take =
        std::min(windowTokens - done, shards.tokens(shard) - position);
    if (!shards.read(shard, position, take, out + done, error))
      return false;
    done += take;
    position = 0;
    shard = (shard + 1) % shards.size();
  }
  return true;
}

bool DataSource::microBatch(const BatchPosition &position,
                            const std::vector<InputSpec> &specs,
                            MicroBatch &batch, uint64_t &sampleHash,
                            std::string &error) const {
  batch.clear();
  sampleHash = 0;
  int64_t index = position.microBatch;
  for (const InputSpec &spec : specs) {
    auto it = given.find(spec.name + "@" + std::to_string(index));
    if (it == given.end()) {
      // The file's entries for this input sort together after "name@".
      std::string prefix = spec.name + "@";
      int64_t entries = 0;
      for (auto at = given.lower_bound(prefix);
           at != given.end() &&
           at->first.compare(0, prefix.size(), prefix) == 0;
           ++at)
        ++entries;
      if (entries == 0)
        continue;
      error = inputsPath + ": no '" + prefix + std::to_string(index) +
              "' for micro-batch " + std::to_string(index) +
              " (the file gives '" + spec.name + "' for " +
              std::to_string(entries) +
              " micro-batches; a step reads one per pipeline and "
              "micro-batch)";
      return false;
    }
    if (it->second.shape != spec.shape) {
      error = inputsPath + ": '" + it->first + "' has the wrong shape";
      return false;
    }
    // Checked here for every backend: a bad id is this line, not a read
    // outside a table on a device.
    if (spec.indexLimit > 0)
      if (std::string problem = cpu::indexRangeProblem(
              it->second, spec.indexLimit,
              spec.isLabel ? "label" : "token id");
          !problem.empty()) {
        error = inputsPath + ": '" + it->first + "': " + problem;
        return false;
      }
    batch[spec.name] = it->second;
  }
  uint64_t range = static_cast<uint64_t>(std::max<int64_t>(vocabulary, 2));

  const InputSpec *inputs = nullptr, *labels = nullptr;
  for (const InputSpec &spec : specs) {
    if (spec.isInteger && !spec.isBoolean && !spec.isLabel &&
        spec.shape.size() == 2)
      inputs = &spec;
    if (spec.isInteger && !spec.isBoolean && spec.isLabel &&
        spec.shape.size() == 2)
      labels = &spec;
  }
  // A stage may hold only one side of the pair (first stage: inputs, last:
  // labels): both come from the same rows.
  const InputSpec *pair = inputs ? inputs : labels;
  bool matched = !(inputs && labels) || inputs->shape == labels->shape;
  if (pair && matched &&
      !(inputs && batch.count(inputs->name)) &&
      !(labels && batch.count(labels->name))) {
    int64_t rows = pair->shape[0], seq = pair->shape[1];
    cpu::Tensor in(pair->shape), out(pair->shape);
    std::vector<uint32_t> row(static_cast<size_t>(seq + 1));
    for (int64_t r = 0; r < rows; ++r) {
      int64_t sample = position.firstSample + r;
      if (!shards.empty()) {
        if (!window(sample, seq + 1, row.data(), error))
          return false;
      } else {
        // A learnable stream: a fixed successor per token (from the seed)
        // three times in four, noise otherwise; seeded per sample, so that
        // a plan with another micro-batch size sees the same samples.
        std::mt19937_64 rng(
            seed ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(sample + 1)));
        uint64_t previous = rng() % range;
        for (uint32_t &t : row) {
          uint64_t next = rng() % 4 ? successor(previous, range)
                                    : rng() % range;
          t = static_cast<uint32_t>(next);
          previous = next;
        }
      }
      sampleHash += dtfm::fnv1a(std::string_view(
          reinterpret_cast<const char *>(row.data()), row.size() * 4));
      for (int64_t j = 0; j < seq; ++j) {
        in.data[r * seq + j] = static_cast<float>(row[j]);
        out.data[r * seq + j] = static_cast<float>(row[j + 1]);
      }
    }
    shards.releasePages();
    if (inputs)
      batch[inputs->name] = std::move(in);
    if (labels)
      batch[labels->name] = std::move(out);
  }
  // Anything else: seeded per input and sample (a row of the leading
  // dimension), so that a stage holding only some of the inputs, and a
  // plan with another micro-batch size, draw the same values as a single
  // device holding them all.
  for (const InputSpec &spec : specs) {
    if (batch.count(spec.name))
      continue;
    uint64_t h = dtfm::fnv1a(spec.name);
    cpu::Tensor t(spec.shape);
    int64_t rows = spec.shape.empty() ? 1 : std::max<int64_t>(spec.shape[0], 1);
    size_t perRow = t.data.size() / static_cast<size_t>(rows);
    std::normal_distribution<double> normal(0, 1);
    for (int64_t r = 0; r < rows; ++r) {
      std::mt19937_64 own(
          seed ^ h ^
          (0x9e3779b97f4a7c15ull *
           static_cast<uint64_t>(position.firstSample + r + 1)));
      for (size_t i = 0; i < perRow; ++i) {
        float &x = t.data[static_cast<size_t>(r) * perRow + i];
        x = spec.isBoolean   ? static_cast<float>(own() % 2)
            : spec.isInteger ? static_cast<float>(own() % range)
                             : static_cast<float>(normal(own));
      }
    }
    batch[spec.name] = std::move(t);
  }
  return true;
}

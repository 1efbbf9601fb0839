//===- DataSource.cpp - Training data for the workers ---------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/DataSource.h"
#include "dtfm/Support/Hash.h"

#include <fstream>
#include <random>

using namespace dtfm::runtime;

bool DataSource::open(const std::string &tokensPath,
                      const std::string &inputs, uint64_t seedValue,
                      int64_t vocab, std::string &error) {
  seed = seedValue;
  vocabulary = vocab;
  inputsPath = inputs;
  tokens.clear();
  given.clear();
  if (!tokensPath.empty()) {
    std::ifstream in(tokensPath, std::ios::binary | std::ios::ate);
    if (!in) {
      error = tokensPath + ": cannot open token file";
      return false;
    }
    std::streamsize size = in.tellg();
    if (size <= 0 || size % 4 != 0) {
      error = tokensPath + ": expected int32 tokens";
      return false;
    }
    tokens.resize(size / 4);
    in.seekg(0);
    in.read(reinterpret_cast<char *>(tokens.data()), size);
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] < 0 || (vocabulary > 0 && tokens[i] >= vocabulary)) {
        error = tokensPath + ": token " + std::to_string(tokens[i]) +
                " at position " + std::to_string(i) +
                " outside the vocabulary of " + std::to_string(vocabulary);
        return false;
      }
  }
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

bool DataSource::microBatch(int64_t index, const std::vector<InputSpec> &specs,
                            MicroBatch &batch, std::string &error) const {
  batch.clear();
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
    size_t position = static_cast<size_t>(index * rows * (seq + 1));
    std::vector<float> row(seq + 1);
    for (int64_t r = 0; r < rows; ++r) {
      // Seeded per sample (its global row), as the token file is read by
      // position: a plan with another micro-batch size (a re-plan) sees the
      // same samples in the same order.
      std::mt19937_64 rng(seed ^ (0x9e3779b97f4a7c15ull *
                                  static_cast<uint64_t>(index * rows + r + 1)));
      uint64_t previous = rng() % range;
      for (float &t : row) {
        if (tokens.empty()) {
          // A learnable stream: a fixed successor per token (from the seed)
          // three times in four, noise otherwise.
          uint64_t next = rng() % 4 ? successor(previous, range)
                                    : rng() % range;
          t = static_cast<float>(next);
          previous = next;
        } else {
          t = static_cast<float>(tokens[position % tokens.size()]);
        }
        ++position;
      }
      for (int64_t j = 0; j < seq; ++j) {
        in.data[r * seq + j] = row[j];
        out.data[r * seq + j] = row[j + 1];
      }
    }
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
      std::mt19937_64 own(seed ^ h ^
                          (0x9e3779b97f4a7c15ull *
                           static_cast<uint64_t>(index * rows + r + 1)));
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

//===- DataBench.cpp - The token loader against the training step ---------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// bench-data: the loader alone (DataSource over memory-mapped uint16 shards,
// shuffled windows) on a small and a large shard set written at run time,
// its tokens/s and how much the process's resident memory grows while it
// reads (it must not grow with the data), and, side by side in the same
// run, the tokens/s of a training step that reads the same shards (the
// tiny GPT on one CPU device, through dtfm-opt, dtfm-translate and dtfm-run
// from this bench's own directory): the loader must never be the
// bottleneck.
//
//===----------------------------------------------------------------------===//

#include "BenchSupport.h"

#include "dtfm/Format/TokenShards.h"
#include "dtfm/Runtime/DataSource.h"
#include "dtfm/Runtime/HostMemory.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace dtfm;

namespace {


/// `shards` uint16 shards of `tokensEach` tokens in `dir`, with sidecars;
/// the tokens a fixed pattern within the tiny GPT's vocabulary of 256.
bool writeShardSet(const std::string &dir, int shards, int64_t tokensEach,
                   std::vector<std::string> &paths, std::string &error) {
  std::vector<uint16_t> block(1 << 20);
  for (int s = 0; s < shards; ++s) {
    std::string path = dir + "/" + std::to_string(s) + ".bin";
    std::FILE *f = std::fopen(path.c_str(), "wb");
    if (!f) {
      error = path + ": cannot write";
      return false;
    }
    for (int64_t at = 0; at < tokensEach;) {
      int64_t n = std::min<int64_t>(tokensEach - at, block.size());
      for (int64_t i = 0; i < n; ++i)
        block[i] = static_cast<uint16_t>((at + i + s) * 2654435761u % 256);
      if (std::fwrite(block.data(), 2, n, f) != static_cast<size_t>(n)) {
        std::fclose(f);
        error = path + ": write failed (disk full?)";
        return false;
      }
      at += n;
    }
    std::fclose(f);
    std::ofstream(format::tokenSidecarPath(path))
        << "{\"format\": \"dtfm-tokens\", \"dtype\": \"uint16\", \"tokens\": "
        << tokensEach << "}\n";
    paths.push_back(path);
  }
  return true;
}

struct LoaderFigures {
  double tokensPerSecond = 0;
  int64_t residentGrowth = 0, tokens = 0;
};

bool measureLoader(const std::vector<std::string> &paths, int64_t seq,
                   int64_t rows, int64_t microBatches, LoaderFigures &out,
                   std::string &error) {
  runtime::DataSource source;
  runtime::DataOptions options;
  options.paths = paths;
  if (!source.open(options, 1, 256, error))
    return false;
  std::vector<runtime::InputSpec> specs = {
      {"tokens", {rows, seq}, false, true, false},
      {"labels", {rows, seq}, true, true, false}};
  runtime::MicroBatch batch;
  uint64_t hash = 0;
  // One micro-batch first: the tensors' memory is not the data's.
  if (!source.microBatch({0, 0}, specs, batch, hash, error))
    return false;
  int64_t before = runtime::procStatusBytes("VmRSS");
  auto start = std::chrono::steady_clock::now();
  for (int64_t m = 1; m <= microBatches; ++m)
    if (!source.microBatch({m, m * rows}, specs, batch, hash, error))
      return false;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  out.tokens = microBatches * rows * seq;
  out.tokensPerSecond = static_cast<double>(out.tokens) / seconds;
  out.residentGrowth = runtime::procStatusBytes("VmRSS") - before;
  return true;
}

/// The directory of this program (the tools are built beside it).
std::string ownDirectory() {
  char path[4096];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0)
    return ".";
  path[n] = '\0';
  std::string p = path;
  return p.substr(0, p.rfind('/'));
}

/// The tiny GPT trained on one CPU device for `steps` steps on `shard`:
/// the median of its logged tokens/s after the first two steps.
bool measureTraining(const std::string &dir, const std::string &shard,
                     int steps, double &tokensPerSecond, std::string &error) {
  std::string bin = ownDirectory();
  std::string cluster = dir + "/one.textproto";
  std::ofstream(cluster) << "name: \"one\"\ndevices { name: \"cpu0\" region: "
                            "\"local\" peak_flops: 1e11 memory_bytes: 8e9 }\n";
  std::string commands =
      bin + "/dtfm-translate --import-gpt tiny -o " + dir + "/tiny.mlir && " +
      bin + "/dtfm-opt " + dir + "/tiny.mlir --dtfm-plan=\"cluster=" + cluster +
      " dp=1 pp=1 programs=true optimizer=adamw\" -o " + dir +
      "/plan.mlir && " + bin + "/dtfm-translate --export-plan --cluster " +
      cluster + " " + dir + "/plan.mlir -o " + dir + "/plan.pb && " + bin +
      "/dtfm-run " + dir + "/plan.pb --execute --backend cpu --steps " +
      std::to_string(steps) + " --data " + shard + " --log " + dir +
      "/steps.jsonl > /dev/null 2>" + dir + "/train.err";
  if (std::system(commands.c_str()) != 0) {
    std::ifstream err(dir + "/train.err");
    std::string line;
    std::getline(err, line);
    error = "training the tiny GPT failed: " + line;
    return false;
  }
  std::ifstream log(dir + "/steps.jsonl");
  std::vector<double> rates;
  std::string line;
  while (std::getline(log, line)) {
    size_t at = line.find("\"tokens_per_s\":");
    if (at != std::string::npos && rates.size() < 1000)
      rates.push_back(std::atof(line.c_str() + at + 15));
  }
  if (rates.size() < 3) {
    error = "the training log has fewer than 3 steps";
    return false;
  }
  rates.erase(rates.begin(), rates.begin() + 2);
  std::sort(rates.begin(), rates.end());
  tokensPerSecond = rates[rates.size() / 2];
  return true;
}

} // namespace

int main(int argc, char **argv) {
  bool json = false, train = true;
  double largeGiB = 2;
  int64_t seq = 1024, rows = 8, microBatches = 4000;
  int trainSteps = 8;
  bench::Flags flags("bench-data", argc, argv);
  while (flags.next())
    if (flags.is("--json"))
      json = true;
    else if (flags.is("--large-gib"))
      largeGiB = flags.numberAbove(0);
    else if (flags.is("--seq"))
      seq = flags.integer<int64_t>(1, 1 << 20);
    else if (flags.is("--rows"))
      rows = flags.integer<int64_t>(1, 1 << 16);
    else if (flags.is("--micro-batches"))
      microBatches = flags.integer<int64_t>(1, 1 << 24);
    else if (flags.is("--train-steps"))
      trainSteps = flags.integer<int>(3, 1000);
    else if (flags.is("--no-train"))
      train = false;
    else
      flags.unknown();
  if (largeGiB > 64) {
    std::fprintf(stderr,
                 "bench-data: error: --large-gib: must be <= 64 (got "
                 "%s)\n",
                 jsonNumber(largeGiB, 6, true).c_str());
    return 2;
  }
  char pattern[] = "/tmp/bench-data-XXXXXX";
  if (!::mkdtemp(pattern)) {
    std::fprintf(stderr, "bench-data: error: cannot make a temporary "
                         "directory\n");
    return 1;
  }
  std::string dir = pattern, error;
  auto cleanUp = [&] { std::system(("rm -rf '" + dir + "'").c_str()); };
  struct Set {
    std::string name;
    int shards;
    int64_t tokensEach;
    std::vector<std::string> paths;
    LoaderFigures figures;
  };
  int64_t largeTokens = static_cast<int64_t>(largeGiB * (1ll << 30) / 2);
  std::vector<Set> sets = {
      {"20 MiB", 1, 10ll << 20, {}, {}},
      {jsonNumber(largeGiB, 3, true) + " GiB", 4, largeTokens / 4, {}, {}}};
  for (size_t i = 0; i < sets.size(); ++i) {
    Set &set = sets[i];
    std::string sub = dir + "/set" + std::to_string(i);
    ::mkdir(sub.c_str(), 0755);
    if (!writeShardSet(sub, set.shards, set.tokensEach, set.paths, error) ||
        !measureLoader(set.paths, seq, rows, microBatches, set.figures,
                       error)) {
      std::fprintf(stderr, "bench-data: error: %s\n", error.c_str());
      cleanUp();
      return 1;
    }
  }
  double trainRate = 0;
  if (train &&
      !measureTraining(dir, sets[0].paths[0], trainSteps, trainRate, error)) {
    std::fprintf(stderr, "bench-data: error: %s\n", error.c_str());
    cleanUp();
    return 1;
  }
  cleanUp();

  if (json) {
    for (const Set &set : sets)
      std::printf("{\"bench\":\"data\",\"set\":\"%s\",\"shards\":%d,"
                  "\"tokens\":%lld,\"seq\":%lld,\"rows\":%lld,"
                  "\"tokens_read\":%lld,\"loader_tokens_per_s\":%s,"
                  "\"rss_growth_bytes\":%lld}\n",
                  set.name.c_str(), set.shards,
                  static_cast<long long>(set.shards * set.tokensEach),
                  static_cast<long long>(seq), static_cast<long long>(rows),
                  static_cast<long long>(set.figures.tokens),
                  jsonNumber(set.figures.tokensPerSecond, 0).c_str(),
                  static_cast<long long>(set.figures.residentGrowth));
    if (train)
      std::printf("{\"bench\":\"data\",\"training\":\"tiny GPT, 1 CPU "
                  "device\",\"training_tokens_per_s\":%s,"
                  "\"loader_over_training\":%s}\n",
                  jsonNumber(trainRate, 0).c_str(),
                  jsonNumber(sets[0].figures.tokensPerSecond /
                                 std::max(trainRate, 1e-9),
                             1)
                      .c_str());
    return 0;
  }
  std::printf("The token loader alone: shuffled windows of %lld tokens, %lld "
              "a micro-batch, from uint16 shards\n\n",
              static_cast<long long>(seq + 1), static_cast<long long>(rows));
  std::printf("%-10s %6s %14s %14s %14s %16s\n", "data", "shards", "tokens",
              "tokens read", "loader tok/s", "RSS growth MiB");
  for (const Set &set : sets)
    std::printf("%-10s %6d %14lld %14lld %14.3g %16.2f\n", set.name.c_str(),
                set.shards, static_cast<long long>(set.shards * set.tokensEach),
                static_cast<long long>(set.figures.tokens),
                set.figures.tokensPerSecond,
                static_cast<double>(set.figures.residentGrowth) / (1 << 20));
  if (train)
    std::printf("\ntraining on the same shards (tiny GPT, 1 CPU device): "
                "%.3g tok/s; the loader is %.0fx faster\n",
                trainRate,
                sets[0].figures.tokensPerSecond / std::max(trainRate, 1e-9));
  return 0;
}

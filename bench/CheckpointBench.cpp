//===- CheckpointBench.cpp - What one writer and commits cost -------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// bench-checkpoint: one checkpoint of W workers sharing a directory, as the
// runtime writes it (CheckpointStore::save: the tensors and the manifest,
// fsynced), beside what a generation's consistency adds to it -- the commit
// record composed from every worker's manifest and written by each worker
// (the first writes and fsyncs it; the others find it there) -- and, once
// a run, the directory's claim (CheckpointClaim) by every worker. Also the
// same files written without fsync, for what durability itself costs.
// Measured side by side in one run, the median of --repeats; the goal is a
// commit under 2% of the checkpoint.
//
//===----------------------------------------------------------------------===//

#include "BenchSupport.h"

#include "dtfm/Runtime/Checkpoints.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

using namespace dtfm;
using namespace dtfm::runtime;
using Clock = std::chrono::steady_clock;

namespace {

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Row {
  double megabytes = 0;
  int workers = 0;
  double save = 0, commit = 0, claim = 0, plain = 0;
};

bool measure(const std::string &dir, int workers, double megabytes,
             int repeats, Row &row, std::string &error) {
  format::TensorMap state;
  state["param/w"] = format::Tensor(
      {static_cast<int64_t>(megabytes * (1 << 20) / sizeof(float))}, 0.5f);
  std::vector<double> saves, commits, claims, plains;
  for (int r = 0; r < repeats; ++r) {
    std::string job = "bench-" + std::to_string(r);
    int64_t step = r + 1;
    Clock::time_point start = Clock::now();
    std::vector<std::unique_ptr<CheckpointClaim>> held;
    for (int w = 0; w < workers; ++w) {
      held.push_back(CheckpointClaim::claim(dir, job, error));
      if (!held.back())
        return false;
    }
    claims.push_back(secondsSince(start));
    std::vector<std::string> entries;
    start = Clock::now();
    for (int w = 0; w < workers; ++w) {
      std::string device = "cpu" + std::to_string(w), manifest;
      if (!CheckpointStore(dir, device, 1, job)
               .save(step, state, manifest, error))
        return false;
      entries.push_back(device + " " + manifest);
    }
    saves.push_back(secondsSince(start));
    start = Clock::now();
    std::string record;
    if (!CheckpointStore::commitRecord(step, job, entries, record, error))
      return false;
    for (int w = 0; w < workers; ++w)
      if (!CheckpointStore(dir, "cpu" + std::to_string(w), 1, job)
               .commit(step, record, error))
        return false;
    commits.push_back(secondsSince(start));
    // The same bytes without fsync (and without a manifest or commit).
    std::string bytes = format::encodeTensors(state);
    start = Clock::now();
    for (int w = 0; w < workers; ++w)
      if (!format::writeFileAtomically(
              dir + "/plain-" + std::to_string(w) + ".ckpt", bytes, error))
        return false;
    plains.push_back(secondsSince(start));
    for (int w = 0; w < workers; ++w)
      CheckpointStore(dir, "cpu" + std::to_string(w), 1, job).prune(1);
    // The next claim's fsync must not pay for these files' pages.
    ::sync();
  }
  row = {megabytes, workers, median(saves), median(commits), median(claims),
         median(plains)};
  return true;
}

} // namespace

int main(int argc, char **argv) {
  bool json = false;
  int workers = 4, repeats = 5;
  std::vector<double> sizes = {8, 64, 256};
  std::string base = "/tmp";
  bench::Flags flags("bench-checkpoint", argc, argv);
  while (flags.next())
    if (flags.is("--json"))
      json = true;
    else if (flags.is("--workers"))
      workers = flags.integer<int>(1, 256);
    else if (flags.is("--repeats"))
      repeats = flags.integer<int>(1, 100);
    else if (flags.is("--megabytes"))
      sizes = {flags.numberAbove(0)};
    else if (flags.is("--dir"))
      base = flags.text();
    else
      flags.unknown();
  std::string pattern = base + "/bench-checkpoint-XXXXXX";
  if (!::mkdtemp(pattern.data())) {
    std::fprintf(stderr, "bench-checkpoint: error: cannot make a folder in "
                         "%s\n",
                 base.c_str());
    return 1;
  }
  std::string dir = pattern;
  std::vector<Row> rows;
  std::string error;
  for (double megabytes : sizes) {
    Row row;
    if (!measure(dir, workers, megabytes, repeats, row, error)) {
      std::fprintf(stderr, "bench-checkpoint: error: %s\n", error.c_str());
      std::filesystem::remove_all(dir);
      return 1;
    }
    rows.push_back(row);
  }
  std::filesystem::remove_all(dir);
  for (const Row &r : rows) {
    // Per checkpoint: the commit (the claim is once a run).
    double overhead = r.commit / (r.save + r.commit);
    if (json) {
      std::printf("{\"bench\":\"checkpoint\",\"workers\":%d,"
                  "\"megabytes_per_worker\":%s,\"save_s\":%s,"
                  "\"commit_s\":%s,\"claim_once_a_run_s\":%s,"
                  "\"without_fsync_s\":%s,\"commit_over_checkpoint\":%s}\n",
                  r.workers, jsonNumber(r.megabytes, 0).c_str(),
                  jsonNumber(r.save, 6).c_str(),
                  jsonNumber(r.commit, 6).c_str(),
                  jsonNumber(r.claim, 6).c_str(),
                  jsonNumber(r.plain, 6).c_str(),
                  jsonNumber(overhead, 5).c_str());
      continue;
    }
    if (&r == &rows.front())
      std::printf("One checkpoint of %d workers sharing a directory in %s "
                  "(median of %d)\n\n%10s %12s %12s %12s %14s %10s\n",
                  workers, base.c_str(), repeats, "MB/worker", "save s",
                  "commit s", "claim s", "no-fsync s", "commit/ckpt");
    std::printf("%10.0f %12.4f %12.5f %12.5f %14.4f %9.2f%%\n", r.megabytes,
                r.save, r.commit, r.claim, r.plain, 100 * overhead);
  }
  if (!json)
    std::printf("\ncommit/ckpt: commit / (save + commit), per checkpoint; the "
                "goal is under 2%%. The claim is once a run (every worker "
                "of it); save is fsynced, no-fsync the same bytes without.\n");
  return 0;
}

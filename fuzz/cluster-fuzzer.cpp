//===- cluster-fuzzer.cpp - Fuzzes the cluster readers --------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// One input is read both as a CSV matrix (m.csv) and as a cluster file
// (proto/cluster.proto in text format, whose CSV references resolve in the
// same folder: a `delay_ms_csv: "m.csv"` reads the input itself), and as a
// join request (dtfm-run --join). A cluster that loads must survive the
// plan's round trip (clusterToPlan then clusterFromPlan, fingerprint and
// validation included), and a join request that parses must join it or be
// refused with an error.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "dtfm/Planner/Cluster.h"
#include "plan.pb.h"

#include <cstdio>
#include <cstdlib>

using namespace dtfm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string csvPath = fuzz::writeScratch("m.csv", data, size);
  std::string error;
  planner::SquareMatrix matrix;
  planner::readCsvMatrix(csvPath, matrix, error);

  std::string text(reinterpret_cast<const char *>(data), size);
  planner::JoinRequest request;
  if (planner::parseJoinRequest(text, "j.textproto", request, error)) {
    // Into two devices "a" and "b": joined and valid, or refused.
    planner::Cluster pair;
    pair.devices = {{"a", "r", 1e12, 1, 1e9}, {"b", "r", 1e12, 1, 1e9}};
    pair.delayMs = planner::SquareMatrix(2, 1);
    pair.bandwidthGbps = planner::SquareMatrix(2, 10);
    planner::Cluster grown;
    error.clear();
    bool joined = planner::withJoinedDevice(pair, request, grown, error);
    if (joined ? !grown.validate(error) : error.empty()) {
      std::fprintf(stderr, "a join went wrong: %s\n", error.c_str());
      std::abort();
    }
  }
  planner::Cluster cluster;
  if (!planner::parseClusterText(text, fuzz::scratchDir() + "/c.textproto",
                                 cluster, error))
    return 0;
  proto::Plan plan;
  planner::clusterToPlan(cluster, plan);
  planner::Cluster back;
  if (!planner::clusterFromPlan(plan, back, error)) {
    std::fprintf(stderr, "a cluster that loads fails its round trip: %s\n",
                 error.c_str());
    std::abort();
  }
  return 0;
}

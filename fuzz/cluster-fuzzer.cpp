//===- cluster-fuzzer.cpp - Fuzzes the cluster readers --------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// One input is read both as a CSV matrix (m.csv) and as a cluster file
// (proto/cluster.proto in text format, whose CSV references resolve in the
// same folder: a `delay_ms_csv: "m.csv"` reads the input itself). A cluster
// that loads must survive the plan's round trip (clusterToPlan then
// clusterFromPlan, fingerprint and validation included).
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

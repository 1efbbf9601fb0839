//===- Measure.cpp - What a worker measures of itself ---------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The calibration (each device's measured speed and memory bandwidth,
// gathered on rank 0, which predicts the iteration from them) and
// --memory-report (every rank's resident and heap bytes against the memory
// model's prediction).
//
//===----------------------------------------------------------------------===//

#include "Messages.h"
#include "Worker/WorkerImpl.h"

#include "dtfm/Format/TensorFile.h"
#include "dtfm/Plan/MemoryModel.h"
#include "dtfm/Plan/SimInput.h"
#include "dtfm/Runtime/Calibration.h"
#include "dtfm/Runtime/HostMemory.h"
#include "dtfm/Runtime/Cpu/Kernels.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <malloc.h>

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::runtime::worker;

bool Worker::calibrate(std::string &error) {
  // Each worker's speed on a core of its own: compute FLOPs over the compute
  // thread's CPU time in the first steps. Where the plan gives the device a
  // memory bandwidth (the roofline), the device's bandwidth from a short
  // probe, and the speed at which the roofline of that work takes that time
  // at that bandwidth (so that its memory-bound ops are not charged twice).
  double speeds[2] = {
      calibrationSeconds > 0 ? calibrationFlops / calibrationSeconds : 0, 0};
  for (const proto::PlanDevice &d : plan.devices())
    if (d.name() == program.device() && d.memory_bytes_per_second() > 0) {
      planner::RooflineWork timed = plan::forwardWorkOf(plan, program);
      timed.scale(static_cast<double>(calibratedForwards));
      planner::RooflineWork backwards = plan::backwardWorkOf(plan, program);
      backwards.scale(static_cast<double>(calibratedBackwards));
      timed.add(backwards);
      double bandwidth = executor->measureMemoryBandwidth();
      double fitted =
          planner::speedForSeconds(timed, calibrationSeconds, bandwidth);
      if (bandwidth > 0 && fitted > 0) {
        speeds[0] = fitted;
        speeds[1] = bandwidth;
      }
    }
  if (transport && options.rank != 0) {
    std::string blob(reinterpret_cast<const char *>(speeds), sizeof(speeds));
    return sendBlob(*transport, 0, kSpeed, 0, blob, error);
  }
  std::vector<double> flops(size, 0), bandwidths(size, 0);
  flops[0] = speeds[0];
  bandwidths[0] = speeds[1];
  for (int r = 1; r < size; ++r) {
    std::string blob;
    if (!recvBlob(*transport, r, kSpeed, 0, blob, error))
      return false;
    // A peer's figures: two finite non-negative doubles, or none.
    double peer[2] = {0, 0};
    if (blob.size() == sizeof(peer))
      std::memcpy(peer, blob.data(), sizeof(peer));
    if (std::isfinite(peer[0]) && peer[0] > 0)
      flops[r] = peer[0];
    if (std::isfinite(peer[1]) && peer[1] > 0)
      bandwidths[r] = peer[1];
  }
  double cores = options.storeDir.empty()
                     ? 0 // one worker per host (--rendezvous): no sharing
                     : std::max(1u, std::thread::hardware_concurrency());
  if (!calibratedIteration(plan, names, flops, bandwidths, cores,
                           simulatedSeconds, error))
    return false;
  calibrated = true;
  return true;
}


bool Worker::reportMemory(std::string &error) {
  sampleHeapPeak();
  // A GPU's figure beside the process's: the device memory its executor
  // held at most (-1 on the CPU).
  int64_t mine[5] = {startResidentBytes, procStatusBytes("VmHWM"),
                     startHeapBytes, heapPeakBytes(),
                     executor->devicePeakBytes()};
  if (options.rank != 0) {
    std::string blob(reinterpret_cast<const char *>(mine), sizeof mine);
    return sendBlob(*transport, 0, kMemory, 0, blob, error);
  }
  std::ostringstream out;
  std::printf("\n%-12s %10s %10s %10s %10s %7s %7s %10s %7s\n", "memory MiB",
              "start", "resident", "heap", "predicted", "ratio", "heap",
              "device", "device");
  for (int r = 0; r < size; ++r) {
    int64_t figures[5] = {mine[0], mine[1], mine[2], mine[3], mine[4]};
    if (r != 0) {
      std::string blob;
      if (!recvBlob(*transport, r, kMemory, 0, blob, error))
        return false;
      if (blob.size() != sizeof figures) {
        error = "corrupt memory figures from " + transport->describe(r);
        return false;
      }
      std::memcpy(figures, blob.data(), sizeof figures);
    }
    plan::WorkerMemory predicted;
    if (!plan::predictWorkerMemory(plan, r, predicted, error))
      return false;
    double measured = static_cast<double>(figures[1] - figures[0]);
    double heap = static_cast<double>(figures[3] - figures[2]);
    double expected = predicted.total();
    double device = static_cast<double>(figures[4]);
    char deviceColumns[32] = "         -       -";
    if (figures[4] >= 0)
      std::snprintf(deviceColumns, sizeof deviceColumns, "%10.2f %7.3f",
                    device / 1048576.0, expected > 0 ? device / expected : 0.0);
    std::printf("%-12s %10.2f %10.2f %10.2f %10.2f %7.3f %7.3f %s\n",
                names[r].c_str(), figures[0] / 1048576.0, measured / 1048576.0,
                heap / 1048576.0, expected / 1048576.0,
                expected > 0 ? measured / expected : 0.0,
                expected > 0 ? heap / expected : 0.0, deviceColumns);
    out << "{\"device\":\"" << names[r] << "\",\"rank\":" << r
        << ",\"start_rss_bytes\":" << figures[0]
        << ",\"peak_rss_bytes\":" << figures[1]
        << ",\"measured_bytes\":" << figures[1] - figures[0]
        << ",\"start_heap_bytes\":" << figures[2]
        << ",\"peak_heap_bytes\":" << figures[3]
        << ",\"heap_bytes\":" << figures[3] - figures[2];
    if (figures[4] >= 0)
      out << ",\"device_peak_bytes\":" << figures[4];
    out
        << ",\"predicted_bytes\":" << static_cast<int64_t>(predicted.total())
        << ",\"predicted\":" << predicted.json() << "}\n";
  }
  return format::writeFileAtomically(options.memoryReportPath, out.str(),
                                     error);
}

void Worker::markMemoryStart() {
  {
    cpu::Tensor a({1024, 1024}, 1.0f), b({1024, 1024}, 1.0f);
    cpu::Tensor c = cpu::matmul(a, b, false);
  }
  ::malloc_trim(0);
  enableHeapPeak();
  startResidentBytes = procStatusBytes("VmRSS");
  startHeapBytes = heapInUseBytes();
}

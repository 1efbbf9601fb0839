//===- Stream.h - Receive, compute and send stream entries -------*- C++
//-*-===//
//
// Part of dtfm. Plain C++ (no MLIR): shared by the planner, the plan
// exporter, the simulator and the workers.
//
//===----------------------------------------------------------------------===//
//
// Every device runs three ordered streams -- receive, compute, send -- of
// entries naming the forward or backward of one micro-batch; transfers name
// the pipeline stage at the other end. The plan file holds them as
// structured entries (plan.proto StreamEntry); the IR and messages spell
// them "F3<1" (receive the forward of micro-batch 3 from stage 1), "B3"
// (compute the backward of micro-batch 3) and "F3>1" (send to stage 1).
// This file is the only place that reads or writes either form.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_FORMAT_STREAM_H
#define DTFM_FORMAT_STREAM_H

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtfm::proto {
class DeviceProgram;
class Plan;
class StreamEntry;
} // namespace dtfm::proto

namespace dtfm::format {

enum class Slot { Receive = 0, Compute = 1, Send = 2 };
/// A micro-batch's forward, its backward and, in zero-bubble schedules, the
/// weight-gradient half of its backward split off (run later, in the
/// pipeline's idle time; compute entries only).
enum class Phase { Forward, Backward, Weight };
inline constexpr int kPhases = 3;

/// "recv", "compute", "send" / "fwd", "bwd", "wgt".
const char *slotName(Slot slot);
const char *phaseName(Phase phase);
/// 'F', 'B' or 'W', as the entries spell it.
char phaseLetter(Phase phase);

struct StreamEntry {
  Phase phase = Phase::Forward;
  int microBatch = 0;
  /// Stage at the other end (receive and send), -1 for compute.
  int peerStage = -1;

  bool operator==(const StreamEntry &o) const {
    return phase == o.phase && microBatch == o.microBatch &&
           peerStage == o.peerStage;
  }
};

/// The three streams of one device, indexed by Slot.
using Streams = std::array<std::vector<StreamEntry>, 3>;

/// "F3<1", "F3" or "F3>1" for an entry of `slot`.
std::string formatEntry(const StreamEntry &entry, Slot slot);
/// "F3" whatever the slot (trace labels).
std::string entryLabel(const StreamEntry &entry);

/// Parses the text spelling of an entry of `slot` (the marker must match
/// the slot: '<' receive, none compute, '>' send); false when malformed.
bool parseEntry(std::string_view text, Slot slot, StreamEntry &entry);

/// The plan's number of pipeline stages: one more than its programs'
/// highest stage (0 for a plan without programs).
int stageCount(const proto::Plan &plan);

/// The entries of a device program of the plan (its template's, when it
/// names one: format::sharedPart), checked: micro-batches in
/// [0, microBatches), peer stages in [0, stages) and not the program's own.
/// On failure returns false with `error` naming the slot and entry.
bool streamsFromProgram(const proto::Plan &plan,
                        const proto::DeviceProgram &program, int microBatches,
                        int stages, Streams &streams, std::string &error);

/// Writes `streams` into the program's three entry lists.
void streamsToProgram(const Streams &streams, proto::DeviceProgram &program);

} // namespace dtfm::format

#endif // DTFM_FORMAT_STREAM_H

//===- Stream.cpp - Receive, compute and send stream entries --------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/Stream.h"
#include "dtfm/Format/PlanFile.h"

#include "plan.pb.h"

#include <algorithm>
#include <cstdint>
#include <limits>

using namespace dtfm::format;

const char *dtfm::format::slotName(Slot slot) {
  switch (slot) {
  case Slot::Receive:
    return "recv";
  case Slot::Compute:
    return "compute";
  case Slot::Send:
    return "send";
  }
  return "?";
}

const char *dtfm::format::phaseName(Phase phase) {
  switch (phase) {
  case Phase::Forward:
    return "fwd";
  case Phase::Backward:
    return "bwd";
  case Phase::Weight:
    return "wgt";
  }
  return "?";
}

char dtfm::format::phaseLetter(Phase phase) {
  switch (phase) {
  case Phase::Forward:
    return 'F';
  case Phase::Backward:
    return 'B';
  case Phase::Weight:
    return 'W';
  }
  return '?';
}

std::string dtfm::format::entryLabel(const StreamEntry &entry) {
  return phaseLetter(entry.phase) + std::to_string(entry.microBatch);
}

std::string dtfm::format::formatEntry(const StreamEntry &entry, Slot slot) {
  std::string text = entryLabel(entry);
  if (slot == Slot::Receive)
    text += "<" + std::to_string(entry.peerStage);
  else if (slot == Slot::Send)
    text += ">" + std::to_string(entry.peerStage);
  return text;
}

/// Reads the decimal number at `text[at..]` up to the first non-digit;
/// false when there is no digit or it does not fit an int.
static bool readNumber(std::string_view text, size_t &at, int &value) {
  size_t begin = at;
  int64_t n = 0;
  while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
    n = n * 10 + (text[at] - '0');
    if (n > std::numeric_limits<int>::max())
      return false;
    ++at;
  }
  value = static_cast<int>(n);
  return at > begin;
}

bool dtfm::format::parseEntry(std::string_view text, Slot slot,
                              StreamEntry &entry) {
  if (text.empty() || (text[0] != 'F' && text[0] != 'B' && text[0] != 'W'))
    return false;
  entry = StreamEntry();
  entry.phase = text[0] == 'F'   ? Phase::Forward
                : text[0] == 'B' ? Phase::Backward
                                 : Phase::Weight;
  size_t at = 1;
  if (!readNumber(text, at, entry.microBatch))
    return false;
  if (slot == Slot::Compute)
    return at == text.size();
  if (entry.phase == Phase::Weight) // the weight half moves nothing
    return false;
  char marker = slot == Slot::Receive ? '<' : '>';
  if (at == text.size() || text[at] != marker)
    return false;
  ++at;
  return readNumber(text, at, entry.peerStage) && at == text.size();
}

int dtfm::format::stageCount(const proto::Plan &plan) {
  int64_t stages = 0;
  for (const proto::DeviceProgram &p : plan.programs())
    stages = std::max<int64_t>(stages, p.stage() + 1);
  return static_cast<int>(std::min<int64_t>(stages, INT32_MAX));
}

bool dtfm::format::streamsFromProgram(const proto::Plan &plan,
                                      const proto::DeviceProgram &program,
                                      int microBatches, int stages,
                                      Streams &streams, std::string &error) {
  const proto::DeviceProgram &shared = sharedPart(plan, program);
  const google::protobuf::RepeatedPtrField<proto::StreamEntry> *lists[3] = {
      &shared.recv_entries(), &shared.compute_entries(),
      &shared.send_entries()};
  for (int s = 0; s < 3; ++s) {
    Slot slot = static_cast<Slot>(s);
    streams[s].clear();
    int index = 0;
    for (const proto::StreamEntry &in : *lists[s]) {
      auto fail = [&](const std::string &what) {
        error = std::string(slotName(slot)) + " entry #" +
                std::to_string(index) + ": " + what;
        return false;
      };
      StreamEntry entry;
      if (in.phase() != proto::StreamEntry::FORWARD &&
          in.phase() != proto::StreamEntry::BACKWARD &&
          in.phase() != proto::StreamEntry::WEIGHT)
        return fail("unknown phase " + std::to_string(in.phase()));
      if (in.phase() == proto::StreamEntry::WEIGHT && slot != Slot::Compute)
        return fail("a weight-gradient entry outside the compute stream");
      entry.phase = in.phase() == proto::StreamEntry::FORWARD ? Phase::Forward
                    : in.phase() == proto::StreamEntry::BACKWARD
                        ? Phase::Backward
                        : Phase::Weight;
      if (in.micro_batch() < 0 || in.micro_batch() >= microBatches)
        return fail("micro-batch " + std::to_string(in.micro_batch()) +
                    " outside [0, " + std::to_string(microBatches) + ")");
      entry.microBatch = static_cast<int>(in.micro_batch());
      if (slot != Slot::Compute) {
        if (in.peer_stage() < 0 || in.peer_stage() >= stages ||
            in.peer_stage() == program.stage())
          return fail("peer stage " + std::to_string(in.peer_stage()) +
                      " is not another of the plan's " +
                      std::to_string(stages) + " stages");
        entry.peerStage = static_cast<int>(in.peer_stage());
      } else if (in.peer_stage() != 0) {
        return fail("a compute entry names a peer stage");
      }
      streams[s].push_back(entry);
      ++index;
    }
  }
  return true;
}

void dtfm::format::streamsToProgram(const Streams &streams,
                                    proto::DeviceProgram &program) {
  google::protobuf::RepeatedPtrField<proto::StreamEntry> *lists[3] = {
      program.mutable_recv_entries(), program.mutable_compute_entries(),
      program.mutable_send_entries()};
  for (int s = 0; s < 3; ++s) {
    lists[s]->Clear();
    for (const StreamEntry &entry : streams[s]) {
      proto::StreamEntry &out = *lists[s]->Add();
      out.set_phase(entry.phase == Phase::Forward ? proto::StreamEntry::FORWARD
                    : entry.phase == Phase::Backward
                        ? proto::StreamEntry::BACKWARD
                        : proto::StreamEntry::WEIGHT);
      out.set_micro_batch(entry.microBatch);
      if (static_cast<Slot>(s) != Slot::Compute)
        out.set_peer_stage(entry.peerStage);
    }
  }
}

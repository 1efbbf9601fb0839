//===- Transfers.h - Pairing of a plan's sends and receives ------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// The rule that every send of a plan has exactly one receive -- same tag,
// same ends, same bytes -- and every receive a send. --dtfm-verify-plan
// applies it to a planned module and the runtime's plan verifier to a plan
// file, so both say the same about a broken pair.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_TRANSFERS_H
#define DTFM_PLANNER_TRANSFERS_H

#include <cstdint>
#include <string>
#include <vector>

namespace dtfm::planner {

/// One end of a transfer: a send or a receive of `bytes` under `tag`, from
/// one end to the other. Ends are device names in device programs, "stage
/// N" before.
struct TransferEnd {
  bool send = true;
  int64_t tag = 0;
  std::string from, to;
  int64_t bytes = 0;
};

/// What is wrong with one end (`end` indexes the list given to
/// checkTransfers); `message` has no op name ("has no matching recv").
struct TransferProblem {
  size_t end = 0;
  std::string message;
};

/// Every problem, in a deterministic order: a send that reuses a tag between
/// the same ends, a send without its receive (or whose receive names other
/// ends), a second receive for one send, a receive whose bytes differ from
/// its send's, a receive without any send.
std::vector<TransferProblem> checkTransfers(const std::vector<TransferEnd> &ends);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_TRANSFERS_H

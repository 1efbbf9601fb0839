//===- Transfers.cpp - Pairing of a plan's sends and receives -------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Transfers.h"

#include <map>

using namespace dtfm::planner;

std::vector<TransferProblem>
dtfm::planner::checkTransfers(const std::vector<TransferEnd> &ends) {
  std::map<int64_t, std::vector<size_t>> sends, recvs;
  for (size_t i = 0; i < ends.size(); ++i)
    (ends[i].send ? sends : recvs)[ends[i].tag].push_back(i);
  std::vector<TransferProblem> problems;
  auto report = [&](size_t end, std::string message) {
    problems.push_back({end, std::move(message)});
  };
  auto sameEnds = [&](size_t a, size_t b) {
    return ends[a].from == ends[b].from && ends[a].to == ends[b].to;
  };
  for (auto &[tag, list] : sends) {
    std::string tagText = std::to_string(tag);
    const std::vector<size_t> &receivers = recvs[tag];
    for (size_t i = 0; i < list.size(); ++i) {
      const TransferEnd &send = ends[list[i]];
      bool duplicate = false;
      for (size_t j = 0; j < i; ++j)
        duplicate |= sameEnds(list[j], list[i]);
      if (duplicate) {
        report(list[i], "reuses tag " + tagText + " from " + send.from +
                            " to " + send.to);
        continue;
      }
      std::vector<size_t> matches;
      for (size_t r : receivers)
        if (sameEnds(r, list[i]))
          matches.push_back(r);
      if (matches.empty()) {
        if (list.size() == 1 && receivers.size() == 1) {
          const TransferEnd &recv = ends[receivers.front()];
          report(receivers.front(),
                 "and its send (tag " + tagText +
                     ") disagree on ends: send from " + send.from + " to " +
                     send.to + ", recv from " + recv.from + " on " + recv.to);
        } else {
          report(list[i], "with tag " + tagText + " from " + send.from +
                              " to " + send.to + " has no matching recv");
        }
        continue;
      }
      if (matches.size() > 1) {
        report(matches[1],
               "is a second recv for tag " + tagText + " (one per send)");
        continue;
      }
      if (ends[matches.front()].bytes != send.bytes)
        report(matches.front(),
               "receives " + std::to_string(ends[matches.front()].bytes) +
                   " bytes but its send (tag " + tagText + ") sends " +
                   std::to_string(send.bytes));
    }
  }
  for (auto &[tag, list] : recvs)
    if (!sends.count(tag))
      for (size_t r : list)
        report(r, "with tag " + std::to_string(tag) + " has no send");
  return problems;
}

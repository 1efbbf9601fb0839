//===- Validation.cpp - The validation loss -------------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// --val-data: after every --eval-every steps and after the last, each
// worker runs the forward entries of its streams alone on --eval-batches
// batches of the validation data -- the same devices, transfers and
// micro-batch layout as a training step, no gradient, no update -- and the
// last stages send their loss sums to rank 0, which averages them over
// every micro-batch of every pipeline. Batch b takes the plan's samples per
// step from sample b x (samples per step) on, read in order from the start
// of the validation data every time, so that every evaluation sees the
// same windows.
//
//===----------------------------------------------------------------------===//

#include "Messages.h"
#include "Worker/WorkerImpl.h"

#include <algorithm>

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::runtime::worker;

bool Worker::evaluate(int64_t step, double &meanLoss, std::string &error) {
  double lossSum = 0;
  int64_t first = validationPasses;
  for (int64_t b = 0; b < options.evalBatches; ++b) {
    std::vector<MicroBatch> batches(microBatches);
    if (!inputs.empty())
      for (int m = 0; m < microBatches; ++m) {
        BatchPosition position;
        position.microBatch =
            b * layout.total + layout.offsets[program.pipeline()] + m;
        position.firstSample =
            b * samplesPerStep +
            (layout.offsets[program.pipeline()] + m) * microBatchRows;
        uint64_t hash = 0;
        if (!validation.microBatch(position, inputs, batches[m], hash, error))
          return false;
      }
    double passLoss = 0;
    if (!runPasses(kValidationSlotBase + validationPasses++, batches,
                   passLoss, /*forwardOnly=*/true, error)) {
      error = "validation after step " + std::to_string(step) + ": " + error;
      return false;
    }
    lossSum += passLoss;
  }
  if (transport && !transport->flush(error))
    return false;
  // The last stages' sums to rank 0 (one message each, in the slot of the
  // evaluation's first pass).
  bool last = std::find(lastStageRanks.begin(), lastStageRanks.end(),
                        options.rank) != lastStageRanks.end();
  uint64_t slot = controlSlot(kLoss, kValidationSlotBase + first, 0);
  if (options.rank != 0) {
    if (!last)
      return true;
    const char *raw = reinterpret_cast<const char *>(&lossSum);
    return transport->send(0, slot, std::vector<char>(raw, raw + sizeof lossSum),
                           error, nullptr, true) &&
           transport->flush(error);
  }
  double total = last ? lossSum : 0;
  for (int r : lastStageRanks) {
    if (r == 0)
      continue;
    double part = 0;
    if (!transport->recv(r, slot, &part, sizeof part, error))
      return false;
    total += part;
  }
  meanLoss = total / static_cast<double>(options.evalBatches * layout.total);
  return true;
}

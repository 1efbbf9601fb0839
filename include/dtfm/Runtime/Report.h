//===- Report.h - Self-contained HTML report of a plan -----------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_REPORT_H
#define DTFM_RUNTIME_REPORT_H

#include "dtfm/Plan/Simulator.h"
#include "dtfm/Runtime/StepReport.h"

#include <string>

namespace dtfm::runtime {

/// One HTML page with inline SVG and no external resources: the cluster map
/// (regions on a circle, links between regions drawn thicker the more
/// bandwidth they have, labelled in Gbps), the device groups in pipeline
/// order, and a Gantt chart of the simulated iteration (one row per device
/// slot). With `training` (the step log of a run, readStepLog), the
/// training curves come first: train and validation loss against step and
/// against wall time, the learning rate, the gradient norm, and tokens/s
/// measured against the plan's simulated rate, with a summary.
std::string planReport(const std::string &title, const plan::SimInput &input,
                       const plan::SimResult &result,
                       const std::vector<LoggedStep> *training = nullptr);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_REPORT_H

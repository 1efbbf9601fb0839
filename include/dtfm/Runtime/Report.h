//===- Report.h - Self-contained HTML report of a plan -----------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_REPORT_H
#define DTFM_RUNTIME_REPORT_H

#include "dtfm/Plan/Simulator.h"

#include <string>

namespace dtfm::runtime {

/// One HTML page with inline SVG and no external resources: the cluster map
/// (regions on a circle, links between regions drawn thicker the more
/// bandwidth they have, labelled in Gbps), the device groups in pipeline
/// order, and a Gantt chart of the simulated iteration (one row per device
/// slot).
std::string planReport(const std::string &title, const plan::SimInput &input,
                       const plan::SimResult &result);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_REPORT_H

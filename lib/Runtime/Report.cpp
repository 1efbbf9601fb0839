//===- Report.cpp - Self-contained HTML report of a plan ------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

using namespace dtfm;
using namespace dtfm::runtime;

namespace {

std::string escape(const std::string &text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '&':
      out += "&amp;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

const char *kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                          "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                          "#9c755f", "#bab0ac"};

/// Colour of an event by what it does.
const char *eventColour(const plan::SimEvent &e) {
  if (e.name == "grad sync")
    return "#b07aa1";
  if (e.name == "optimizer")
    return "#9c755f";
  if (e.slot == 1)
    return e.name[0] == 'F' ? "#4e79a7" : "#e15759";
  return e.slot == 0 ? "#76b7b2" : "#59a14f";
}

} // namespace

std::string dtfm::runtime::planReport(const std::string &title,
                                      const plan::SimInput &input,
                                      const plan::SimResult &result) {
  const planner::Cluster &cluster = input.cluster;
  std::ostringstream os;
  os.precision(4);
  os << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>"
     << escape(title) << "</title><style>"
     << "body{font-family:sans-serif;margin:24px;color:#222}"
     << "h1{font-size:20px}h2{font-size:16px;margin-top:28px}"
     << "table{border-collapse:collapse}td,th{border:1px solid #ccc;"
        "padding:3px 8px;font-size:12px}"
     << ".chip{display:inline-block;width:10px;height:10px;margin-right:4px}"
     << "</style></head><body>\n";
  os << "<h1>" << escape(title) << "</h1>\n";
  os << "<p>Predicted iteration <b>" << result.iterationSeconds
     << " s</b>, bubble fraction " << result.bubbleFraction << ", "
     << result.achievedFlopsPerSecond() / 1e12 << " TFLOP/s achieved; "
     << input.programs.size() << " device programs, " << input.microBatches
     << " micro-batches.</p>\n";

  // Regions and their colours.
  std::vector<std::string> regions;
  std::map<std::string, std::vector<size_t>> members;
  for (size_t i = 0; i < cluster.size(); ++i) {
    const std::string &r = cluster.devices[i].region.empty()
                               ? cluster.devices[i].name
                               : cluster.devices[i].region;
    if (!members.count(r))
      regions.push_back(r);
    members[r].push_back(i);
  }
  std::map<std::string, std::string> colour;
  for (size_t r = 0; r < regions.size(); ++r)
    colour[regions[r]] = kPalette[r % 10];
  auto regionOf = [&](const std::string &device) -> std::string {
    for (size_t i = 0; i < cluster.size(); ++i)
      if (cluster.devices[i].name == device)
        return cluster.devices[i].region.empty() ? device
                                                 : cluster.devices[i].region;
    return device;
  };

  // Cluster map.
  os << "<h2>Cluster map</h2>\n";
  const double size = 420, centre = size / 2, radius = size * 0.36;
  size_t n = regions.size();
  std::vector<std::pair<double, double>> position(n);
  for (size_t r = 0; r < n; ++r) {
    double angle = 2 * M_PI * r / std::max<size_t>(1, n) - M_PI / 2;
    position[r] = {centre + radius * std::cos(angle),
                   centre + radius * std::sin(angle)};
  }
  double maxBandwidth = 0;
  std::vector<std::vector<double>> mean(n, std::vector<double>(n, 0));
  for (size_t a = 0; a < n; ++a)
    for (size_t b = a + 1; b < n; ++b) {
      double sum = 0;
      int count = 0;
      for (size_t i : members[regions[a]])
        for (size_t j : members[regions[b]]) {
          sum += cluster.bandwidthGbps(i, j);
          ++count;
        }
      mean[a][b] = count ? sum / count : 0;
      maxBandwidth = std::max(maxBandwidth, mean[a][b]);
    }
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << size
     << "\" height=\"" << size << "\" style=\"background:#fafafa\">\n";
  for (size_t a = 0; a < n; ++a)
    for (size_t b = a + 1; b < n; ++b) {
      if (mean[a][b] <= 0)
        continue;
      double width = 0.5 + 6.0 * mean[a][b] / maxBandwidth;
      auto [x1, y1] = position[a];
      auto [x2, y2] = position[b];
      os << "<line x1=\"" << x1 << "\" y1=\"" << y1 << "\" x2=\"" << x2
         << "\" y2=\"" << y2 << "\" stroke=\"#888\" stroke-opacity=\"0.6\" "
         << "stroke-width=\"" << width << "\"><title>" << escape(regions[a])
         << " - " << escape(regions[b]) << ": " << mean[a][b]
         << " Gbps</title></line>\n";
      if (n <= 8)
        os << "<text x=\"" << (x1 + x2) / 2 << "\" y=\"" << (y1 + y2) / 2
           << "\" font-size=\"9\" fill=\"#555\">" << mean[a][b]
           << "</text>\n";
    }
  for (size_t r = 0; r < n; ++r) {
    auto [x, y] = position[r];
    double nodeRadius = 8 + 2 * std::sqrt(members[regions[r]].size());
    os << "<circle cx=\"" << x << "\" cy=\"" << y << "\" r=\"" << nodeRadius
       << "\" fill=\"" << colour[regions[r]] << "\"/>\n";
    os << "<text x=\"" << x + nodeRadius + 2 << "\" y=\"" << y + 4
       << "\" font-size=\"11\">" << escape(regions[r]) << " ("
       << members[regions[r]].size() << ")</text>\n";
  }
  os << "</svg>\n";

  // Groups in pipeline order.
  os << "<h2>Device groups in pipeline order</h2>\n<table><tr><th>stage</th>"
        "<th>devices (pipeline 0, 1, ...)</th></tr>\n";
  std::map<int, std::vector<const plan::SimProgram *>> stages;
  for (const plan::SimProgram &p : input.programs)
    stages[p.stage].push_back(&p);
  for (const auto &[stage, programs] : stages) {
    os << "<tr><td>" << stage << "</td><td>";
    for (const plan::SimProgram *p : programs)
      os << "<span class=\"chip\" style=\"background:"
         << colour[regionOf(p->device)] << "\"></span>" << escape(p->device)
         << " ";
    os << "</td></tr>\n";
  }
  os << "</table>\n";

  // Gantt chart.
  os << "<h2>One iteration</h2>\n";
  const double rowHeight = 6, labelWidth = 110, chartWidth = 900;
  std::vector<std::string> devices;
  for (const auto &[stage, programs] : stages)
    for (const plan::SimProgram *p : programs)
      devices.push_back(p->device);
  std::map<std::string, size_t> rowOf;
  for (size_t i = 0; i < devices.size(); ++i)
    rowOf[devices[i]] = i;
  double height = devices.size() * (3 * rowHeight + 4) + 30;
  double scale =
      result.iterationSeconds > 0 ? chartWidth / result.iterationSeconds : 0;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\""
     << labelWidth + chartWidth + 20 << "\" height=\"" << height << "\">\n";
  for (size_t i = 0; i < devices.size(); ++i) {
    double y = i * (3 * rowHeight + 4);
    os << "<text x=\"0\" y=\"" << y + 2 * rowHeight << "\" font-size=\"9\">"
       << escape(devices[i]) << "</text>\n";
    os << "<rect x=\"" << labelWidth << "\" y=\"" << y << "\" width=\""
       << chartWidth << "\" height=\"" << 3 * rowHeight
       << "\" fill=\"#f2f2f2\"/>\n";
  }
  for (const plan::SimEvent &e : result.events) {
    auto row = rowOf.find(e.device);
    if (row == rowOf.end())
      continue;
    double y = row->second * (3 * rowHeight + 4) + e.slot * rowHeight;
    double x = labelWidth + e.start * scale;
    double w = std::max(0.5, (e.end - e.start) * scale);
    os << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << w
       << "\" height=\"" << rowHeight - 0.5 << "\" fill=\"" << eventColour(e)
       << "\"><title>" << escape(e.device) << " " << escape(e.name) << ": "
       << e.start << " - " << e.end << " s</title></rect>\n";
  }
  double axisY = devices.size() * (3 * rowHeight + 4) + 14;
  for (int tick = 0; tick <= 10; ++tick) {
    double x = labelWidth + chartWidth * tick / 10;
    os << "<text x=\"" << x << "\" y=\"" << axisY
       << "\" font-size=\"9\" text-anchor=\"middle\">"
       << result.iterationSeconds * tick / 10 << "</text>\n";
  }
  os << "</svg>\n<p><span class=\"chip\" style=\"background:#4e79a7\"></span>"
        "forward <span class=\"chip\" style=\"background:#e15759\"></span>"
        "backward <span class=\"chip\" style=\"background:#76b7b2\"></span>"
        "receive <span class=\"chip\" style=\"background:#59a14f\"></span>"
        "send <span class=\"chip\" style=\"background:#b07aa1\"></span>"
        "gradient sync <span class=\"chip\" style=\"background:#9c755f\">"
        "</span>optimizer; rows per device: receive, compute, send; time in "
        "seconds.</p>\n</body></html>\n";
  return os.str();
}

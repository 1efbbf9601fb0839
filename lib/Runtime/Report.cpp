//===- Report.cpp - Self-contained HTML report of a plan ------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
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

/// `value` with up to four significant digits, for labels.
std::string label(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  return text;
}

/// One line (or set of dots) of a chart; NaN points are gaps.
struct Series {
  std::string name;
  const char *colour;
  std::vector<std::pair<double, double>> points;
  bool dots = false, dashed = false;
};

/// A step of about a fifth of `span`: 1, 2 or 5 times a power of ten.
double tickStep(double span) {
  double raw = span / 5, power = std::pow(10, std::floor(std::log10(raw)));
  double unit = raw / power;
  return (unit < 1.5 ? 1 : unit < 3.5 ? 2 : unit < 7.5 ? 5 : 10) * power;
}

/// A line chart as inline SVG: axes with round ticks, the series' lines
/// (at most kMaxPoints points each: a long run is thinned, its last point
/// kept) and a legend; "not in the log" when no series has a point.
void lineChart(std::ostream &os, const std::string &title,
               const std::string &xLabel, std::vector<Series> series) {
  constexpr size_t kMaxPoints = 1500;
  const double width = 520, height = 250, left = 58, right = 12, top = 28,
               bottom = 34;
  double xMin = INFINITY, xMax = -INFINITY, yMin = INFINITY, yMax = -INFINITY;
  for (Series &s : series) {
    std::vector<std::pair<double, double>> kept;
    for (const auto &[x, y] : s.points)
      if (std::isfinite(x) && std::isfinite(y))
        kept.push_back({x, y});
    if (kept.size() > kMaxPoints) {
      std::vector<std::pair<double, double>> thinned;
      double every = static_cast<double>(kept.size() - 1) / (kMaxPoints - 1);
      for (size_t i = 0; i < kMaxPoints; ++i)
        thinned.push_back(kept[static_cast<size_t>(std::llround(i * every))]);
      kept = std::move(thinned);
    }
    s.points = std::move(kept);
    for (const auto &[x, y] : s.points) {
      xMin = std::min(xMin, x), xMax = std::max(xMax, x);
      yMin = std::min(yMin, y), yMax = std::max(yMax, y);
    }
  }
  os << "<div class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" "
        "width=\""
     << width << "\" height=\"" << height << "\">\n<text x=\"" << left
     << "\" y=\"16\" font-size=\"12\" font-weight=\"bold\">"
     << escape(title) << "</text>\n";
  if (!std::isfinite(xMin)) {
    os << "<text x=\"" << left << "\" y=\"" << height / 2
       << "\" font-size=\"11\" fill=\"#888\">not in the log</text>\n"
       << "</svg></div>\n";
    return;
  }
  if (xMax - xMin < 1e-12 * std::max(1.0, std::fabs(xMax)))
    xMin -= 0.5, xMax += 0.5;
  if (yMax - yMin < 1e-12 * std::max(1.0, std::fabs(yMax))) {
    double pad = std::max(std::fabs(yMax) * 0.05, 1e-9);
    yMin -= pad, yMax += pad;
  }
  double plotWidth = width - left - right, plotHeight = height - top - bottom;
  auto px = [&](double x) { return left + (x - xMin) / (xMax - xMin) * plotWidth; };
  auto py = [&](double y) {
    return top + (yMax - y) / (yMax - yMin) * plotHeight;
  };
  char coordinate[64];
  os << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\""
     << plotWidth << "\" height=\"" << plotHeight
     << "\" fill=\"#fafafa\" stroke=\"#ccc\"/>\n";
  double yStep = tickStep(yMax - yMin);
  for (double y = std::ceil(yMin / yStep) * yStep; y <= yMax + yStep * 1e-9;
       y += yStep) {
    std::snprintf(coordinate, sizeof coordinate, "%.1f", py(y));
    os << "<line x1=\"" << left << "\" x2=\"" << left + plotWidth
       << "\" y1=\"" << coordinate << "\" y2=\"" << coordinate
       << "\" stroke=\"#e4e4e4\"/><text x=\"" << left - 4 << "\" y=\""
       << coordinate << "\" font-size=\"9\" text-anchor=\"end\" "
       << "dominant-baseline=\"middle\">" << label(std::fabs(y) < yStep * 1e-9 ? 0 : y)
       << "</text>\n";
  }
  double xStep = tickStep(xMax - xMin);
  for (double x = std::ceil(xMin / xStep) * xStep; x <= xMax + xStep * 1e-9;
       x += xStep) {
    std::snprintf(coordinate, sizeof coordinate, "%.1f", px(x));
    os << "<text x=\"" << coordinate << "\" y=\"" << top + plotHeight + 12
       << "\" font-size=\"9\" text-anchor=\"middle\">"
       << label(std::fabs(x) < xStep * 1e-9 ? 0 : x) << "</text>\n";
  }
  os << "<text x=\"" << left + plotWidth / 2 << "\" y=\"" << height - 4
     << "\" font-size=\"10\" text-anchor=\"middle\">" << escape(xLabel)
     << "</text>\n";
  double legendX = left + plotWidth;
  for (auto it = series.rbegin(); it != series.rend(); ++it) {
    if (it->points.empty())
      continue;
    legendX -= 8 + 6.5 * it->name.size();
    os << "<rect x=\"" << legendX - 12 << "\" y=\"9\" width=\"9\" "
       << "height=\"9\" fill=\"" << it->colour << "\"/><text x=\"" << legendX
       << "\" y=\"17\" font-size=\"11\">" << escape(it->name) << "</text>\n";
    legendX -= 14;
  }
  for (const Series &s : series) {
    if (s.points.empty())
      continue;
    if (!s.dots || s.points.size() > 1) {
      os << "<polyline fill=\"none\" stroke=\"" << s.colour
         << "\" stroke-width=\"1.5\"" << (s.dashed ? " stroke-dasharray=\"5 3\"" : "")
         << " points=\"";
      for (const auto &[x, y] : s.points) {
        std::snprintf(coordinate, sizeof coordinate, "%.1f,%.1f ", px(x),
                      py(y));
        os << coordinate;
      }
      os << "\"><title>" << escape(s.name) << "</title></polyline>\n";
    }
    if (s.dots)
      for (const auto &[x, y] : s.points) {
        std::snprintf(coordinate, sizeof coordinate,
                      "cx=\"%.1f\" cy=\"%.1f\"", px(x), py(y));
        os << "<circle " << coordinate << " r=\"3.5\" fill=\"" << s.colour
           << "\"><title>" << escape(s.name) << " " << label(x) << ": "
           << label(y) << "</title></circle>\n";
      }
  }
  os << "</svg></div>\n";
}

const char *kTrainColour = "#4e79a7", *kValidationColour = "#f28e2b",
           *kLrColour = "#59a14f", *kNormColour = "#e15759",
           *kRateColour = "#76b7b2", *kSimulatedColour = "#9c755f";

/// The median of the finite values of `field` over `steps` (NaN: none).
double median(const std::vector<LoggedStep> &steps,
              double LoggedStep::*field) {
  std::vector<double> values;
  for (const LoggedStep &s : steps)
    if (std::isfinite(s.*field))
      values.push_back(s.*field);
  if (values.empty())
    return NAN;
  std::nth_element(values.begin(), values.begin() + values.size() / 2,
                   values.end());
  return values[values.size() / 2];
}

/// The training section: a summary and the curves of the step log.
void trainingSection(std::ostream &os, const std::vector<LoggedStep> &steps) {
  os << "<h2>Training</h2>\n";
  if (steps.empty()) {
    os << "<p>The step log has no step yet.</p>\n";
    return;
  }
  const LoggedStep &last = steps.back();
  const LoggedStep *best = nullptr;
  for (const LoggedStep &s : steps)
    if (std::isfinite(s.valLoss) && (!best || s.valLoss < best->valLoss))
      best = &s;
  os << "<p>Steps " << steps.front().step << " to " << last.step << " ("
     << steps.size() << " logged)";
  if (std::isfinite(last.loss))
    os << ", last loss <b>" << label(last.loss) << "</b>";
  if (best)
    os << ", best validation loss <b>" << label(best->valLoss)
       << "</b> after step " << best->step;
  if (std::isfinite(last.seen))
    os << ", " << label(last.seen) << " tokens seen";
  if (std::isfinite(last.elapsedSeconds))
    os << " in " << label(last.elapsedSeconds) << " s";
  double medianRate = median(steps, &LoggedStep::rate),
         mfu = median(steps, &LoggedStep::mfu),
         measured = median(steps, &LoggedStep::measuredSeconds),
         simulated = median(steps, &LoggedStep::simulatedSeconds);
  if (std::isfinite(medianRate))
    os << "; median " << label(medianRate) << " per second";
  if (std::isfinite(mfu))
    os << ", MFU " << label(100 * mfu) << "%";
  if (std::isfinite(measured) && std::isfinite(simulated))
    os << ", a step " << label(measured) << " s measured against "
       << label(simulated) << " s simulated";
  os << ".</p>\n";

  Series train{"train", kTrainColour, {}}, validation{"validation",
                                                      kValidationColour,
                                                      {},
                                                      true};
  Series trainByTime = train, validationByTime = validation;
  Series lr{"learning rate", kLrColour, {}}, norm{"gradient norm",
                                                  kNormColour, {}};
  Series rate{"measured", kRateColour, {}},
      simulatedRate{"simulated", kSimulatedColour, {}, false, true};
  for (const LoggedStep &s : steps) {
    double step = static_cast<double>(s.step);
    train.points.push_back({step, s.loss});
    validation.points.push_back({step, s.valLoss});
    trainByTime.points.push_back({s.elapsedSeconds, s.loss});
    validationByTime.points.push_back({s.elapsedSeconds, s.valLoss});
    lr.points.push_back({step, s.lr});
    norm.points.push_back({step, s.gradNorm});
    rate.points.push_back({step, s.rate});
    // The simulated step processes as much as the measured one did.
    simulatedRate.points.push_back(
        {step, s.simulatedSeconds > 0 ? s.rate * s.measuredSeconds /
                                            s.simulatedSeconds
                                      : NAN});
  }
  lineChart(os, "Loss", "step", {train, validation});
  lineChart(os, "Loss against wall time", "seconds",
            {trainByTime, validationByTime});
  lineChart(os, "Learning rate", "step", {lr});
  lineChart(os, "Gradient norm (before clipping)", "step", {norm});
  lineChart(os, "Throughput (per second)", "step",
            {rate, simulatedRate});
}

} // namespace

std::string dtfm::runtime::planReport(const std::string &title,
                                      const plan::SimInput &input,
                                      const plan::SimResult &result,
                                      const std::vector<LoggedStep> *training) {
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
     << ".chart{display:inline-block;margin:0 12px 12px 0}"
     << "</style></head><body>\n";
  os << "<h1>" << escape(title) << "</h1>\n";
  os << "<p>Predicted iteration <b>" << result.iterationSeconds
     << " s</b>, bubble fraction " << result.bubbleFraction << ", "
     << result.achievedFlopsPerSecond() / 1e12 << " TFLOP/s achieved; "
     << input.programs.size() << " device programs, " << input.microBatches
     << " micro-batches.</p>\n";
  if (training)
    trainingSection(os, *training);

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

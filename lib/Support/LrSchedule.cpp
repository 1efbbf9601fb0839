//===- LrSchedule.cpp - Learning-rate schedules ---------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Support/LrSchedule.h"

#include <cmath>
#include <sstream>

using namespace dtfm::optim;

namespace {
struct NamedSchedule {
  LrScheduleKind kind;
  const char *name;
};
constexpr NamedSchedule kSchedules[] = {
    {LrScheduleKind::Constant, "constant"},
    {LrScheduleKind::Cosine, "cosine"},
    {LrScheduleKind::Linear, "linear"},
    {LrScheduleKind::Wsd, "wsd"},
};

// Step counts beyond this are typing errors, and every count below it is
// exact in a double.
constexpr int64_t kMaxSteps = 1000000000000;

std::string num(double value) {
  std::ostringstream os;
  os << value;
  return os.str();
}
} // namespace

const char *dtfm::optim::lrScheduleName(LrScheduleKind kind) {
  for (const NamedSchedule &s : kSchedules)
    if (s.kind == kind)
      return s.name;
  return "?";
}

std::optional<LrScheduleKind>
dtfm::optim::lrScheduleOf(std::string_view name) {
  for (const NamedSchedule &s : kSchedules)
    if (name == s.name)
      return s.kind;
  return std::nullopt;
}

std::string dtfm::optim::lrScheduleNames() {
  std::string out;
  constexpr size_t count = sizeof(kSchedules) / sizeof(kSchedules[0]);
  for (size_t i = 0; i < count; ++i)
    out += std::string(i == 0 ? "" : i + 1 == count ? " or " : ", ") +
           kSchedules[i].name;
  return out;
}

double LrSchedule::at(int64_t step) const {
  double s = static_cast<double>(step < 0 ? 0 : step);
  if (step < warmupSteps)
    return lr * (s + 1) / (static_cast<double>(warmupSteps) + 1);
  double floor = minLr / lr;
  auto between = [&](double fraction) { // 1 at fraction 0, floor at 1
    return lr * (floor + (1 - floor) * fraction);
  };
  switch (kind) {
  case LrScheduleKind::Constant:
    return lr;
  case LrScheduleKind::Cosine:
  case LrScheduleKind::Linear: {
    if (step >= totalSteps)
      return minLr;
    double p = (s - static_cast<double>(warmupSteps)) /
               static_cast<double>(totalSteps - warmupSteps);
    return kind == LrScheduleKind::Cosine
               ? between(0.5 * (1 + std::cos(M_PI * p)))
               : between(1 - p);
  }
  case LrScheduleKind::Wsd: {
    if (step >= totalSteps)
      return minLr;
    int64_t decayFrom = totalSteps - decaySteps;
    if (step < decayFrom)
      return lr;
    double q = (s - static_cast<double>(decayFrom)) /
               static_cast<double>(decaySteps);
    return between(1 - q);
  }
  }
  return lr;
}

std::string LrSchedule::check() const {
  if (!(lr > 0 && std::isfinite(lr)))
    return "lr must be positive and finite, got " + num(lr);
  if (!(minLr >= 0 && minLr <= lr))
    return "min-lr must be in [0, lr] (lr " + num(lr) + "), got " +
           num(minLr);
  for (auto [name, value] : {std::pair{"warmup-steps", warmupSteps},
                             {"total-steps", totalSteps},
                             {"decay-steps", decaySteps}})
    if (value < 0 || value > kMaxSteps)
      return std::string(name) + " must be in [0, 1e12], got " +
             std::to_string(value);
  const char *name = lrScheduleName(kind);
  if (kind == LrScheduleKind::Constant) {
    if (minLr != 0)
      return "min-lr needs a decaying lr-schedule (cosine, linear or wsd)";
    if (decaySteps != 0)
      return "decay-steps needs lr-schedule=wsd";
    if (totalSteps != 0 && totalSteps < warmupSteps)
      return "total-steps " + std::to_string(totalSteps) +
             " is shorter than warmup-steps " + std::to_string(warmupSteps);
    return "";
  }
  if (totalSteps <= warmupSteps)
    return std::string("lr-schedule=") + name +
           " needs total-steps greater than warmup-steps (" +
           std::to_string(warmupSteps) + "), got " +
           std::to_string(totalSteps);
  if (kind == LrScheduleKind::Wsd) {
    if (decaySteps < 1 || decaySteps > totalSteps - warmupSteps)
      return "lr-schedule=wsd needs decay-steps in [1, total-steps - "
             "warmup-steps] = [1, " +
             std::to_string(totalSteps - warmupSteps) + "], got " +
             std::to_string(decaySteps);
  } else if (decaySteps != 0) {
    return "decay-steps needs lr-schedule=wsd";
  }
  return "";
}

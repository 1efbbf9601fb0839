//===- LrSchedule.h - Learning-rate schedules -------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The learning rate of an optimizer update at each step: the one home of
// the schedules' formulas, their names and their checks. The dialect's
// verifiers (dtfm.sgd_update / dtfm.adamw_update's lr_schedule, ...), the
// plan decoder and both backends' optimizer steps read it.
//
// Convention (PyTorch's LambdaLR, stepped after each optimizer step, as
// nanoGPT and torchtitan use it): the update at 0-based step s uses
// lr * factor(s). With W warmup steps, T total steps, D decay steps and
// r = min_lr / lr:
//
//   warmup (s < W):   factor = (s + 1) / (W + 1)    (never 0: the first
//                     step trains; torchtitan #1261's off-by-one)
//   constant:         1 after the warmup
//   cosine:           r + (1 - r) (1 + cos(pi p)) / 2,  p = (s - W) / (T - W)
//   linear:           r + (1 - r) (1 - p)
//   wsd:              1 until T - D, then r + (1 - r) (1 - q),
//                     q = (s - (T - D)) / D  (warmup-stable-decay, linear
//                     decay as torchtitan's default)
//   past T:           r (the decaying schedules), 1 (constant)
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_SUPPORT_LRSCHEDULE_H
#define DTFM_SUPPORT_LRSCHEDULE_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dtfm::optim {

enum class LrScheduleKind { Constant, Cosine, Linear, Wsd };

/// "constant", "cosine", "linear", "wsd".
const char *lrScheduleName(LrScheduleKind kind);
std::optional<LrScheduleKind> lrScheduleOf(std::string_view name);
/// "constant, cosine, linear or wsd", for messages.
std::string lrScheduleNames();

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::Constant;
  double lr = 0;
  double minLr = 0;
  int64_t warmupSteps = 0;
  int64_t totalSteps = 0;
  int64_t decaySteps = 0;

  /// The learning rate of the update at 0-based step `step` (>= 0).
  double at(int64_t step) const;
  /// Whether the rate changes from step to step.
  bool varies() const {
    return warmupSteps > 0 || kind != LrScheduleKind::Constant;
  }
  /// Empty when the schedule is well formed, else what is wrong in the
  /// words of the planning options (lr, min-lr, warmup-steps, ...):
  /// lr > 0 and finite; 0 <= min-lr <= lr; step counts in [0, 1e12];
  /// the decaying schedules need total-steps > warmup-steps; wsd needs
  /// 1 <= decay-steps <= total-steps - warmup-steps; constant takes no
  /// min-lr and no decay-steps, and total-steps only as >= warmup-steps.
  std::string check() const;
};

} // namespace dtfm::optim

#endif // DTFM_SUPPORT_LRSCHEDULE_H

//===- StepReport.cpp - What rank 0 prints for each step ------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/StepReport.h"
#include "dtfm/Format/FileIo.h"
#include "dtfm/Format/JsonReader.h"
#include "dtfm/Format/PlanFile.h"

#include "Messages.h"
#include "dtfm/Runtime/PlanNames.h"
#include "dtfm/Runtime/Transport.h"

#include "dtfm/Support/Json.h"

#include "plan.pb.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

using namespace dtfm::runtime;

IterationWork dtfm::runtime::iterationWork(const proto::Plan &plan) {
  IterationWork work;
  std::map<std::string, double> peakOf;
  for (const proto::PlanDevice &d : plan.devices())
    peakOf[d.name()] = d.peak_flops();
  for (const proto::DeviceProgram &p : plan.programs()) {
    auto peak = peakOf.find(p.device());
    if (peak != peakOf.end() && std::isfinite(peak->second) &&
        peak->second > 0)
      work.peakFlops += peak->second;
    double microBatches =
        static_cast<double>(format::programMicroBatches(plan, p));
    const proto::DeviceProgram &shared = format::sharedPart(plan, p);
    work.flops +=
        (shared.forward_flops() + shared.backward_flops()) * microBatches +
        shared.optimizer_flops();
    if (p.stage() != 0)
      continue;
    for (const proto::PlanOp &op : shared.ops())
      if (opKindOf(op.name()) == OpKind::Input && op.results_size() == 1) {
        const proto::PlanValue &v = op.results(0);
        work.tokenModel =
            !v.dtype().empty() && v.dtype()[0] == 'i' && v.shape_size() == 2;
        work.tokens += (work.tokenModel ? v.shape(0) * v.shape(1)
                                        : (v.shape_size() ? v.shape(0) : 1)) *
                       microBatches;
        break;
      }
  }
  return work;
}

static std::string hex64(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(value));
  return text;
}

static double perSecond(double amount, double seconds) {
  return seconds > 0 ? amount / seconds : 0;
}

/// "0:05", "12:34", "1:02:03".
static std::string duration(double seconds) {
  long long whole = std::isfinite(seconds) && seconds > 0
                        ? static_cast<long long>(std::min(seconds, 1e9))
                        : 0;
  char text[48];
  if (whole >= 3600)
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", whole / 3600,
                  whole / 60 % 60, whole % 60);
  else
    std::snprintf(text, sizeof text, "%lld:%02lld", whole / 60, whole % 60);
  return text;
}

/// Model FLOPs utilisation: achieved FLOP/s over the devices' peak.
static double mfu(const StepFigures &f, const IterationWork &work) {
  return work.peakFlops > 0 ? perSecond(work.flops, f.seconds) / work.peakFlops
                            : 0;
}

std::string dtfm::runtime::stepLine(const StepFigures &f,
                                    const IterationWork &work, int64_t total,
                                    const LogStart &start) {
  char line[384];
  std::snprintf(line, sizeof line,
                "step %lld/%lld loss %.6f | %.0f %s | %.3f GFLOP/s",
                static_cast<long long>(f.step), static_cast<long long>(total),
                f.loss, perSecond(work.tokens, f.seconds),
                work.tokenModel ? "tok/s" : "samples/s",
                perSecond(work.flops, f.seconds) / 1e9);
  std::string text = line;
  if (work.peakFlops > 0) {
    std::snprintf(line, sizeof line, ", MFU %.1f%%", 100 * mfu(f, work));
    text += line;
  }
  std::snprintf(line, sizeof line, " | %.2f ms (simulated %.2f ms%s) | %s elapsed",
                f.seconds * 1e3, f.simulatedSeconds * 1e3,
                f.calibrated ? ", calibrated" : "",
                duration(f.elapsedSeconds).c_str());
  text += line;
  // The pace of this run's steps (a resumed run's earlier ones ran
  // elsewhere, or on another plan).
  int64_t doneHere = f.step - start.step;
  if (f.step < total && doneHere > 0)
    text += ", ETA " + duration((f.elapsedSeconds - start.elapsedSeconds) /
                                doneHere * (total - f.step));
  return text;
}

std::optional<int64_t> dtfm::runtime::loggedStep(const std::string &line) {
  static const std::string key = "{\"step\":";
  if (line.rfind(key, 0) != 0)
    return std::nullopt;
  return std::atoll(line.c_str() + key.size());
}

std::string dtfm::runtime::stepJson(const StepFigures &f,
                                    const IterationWork &work) {
  return "{\"step\":" + std::to_string(f.step) +
         ",\"loss\":" + jsonNumber(f.loss, 9, true) + ",\"" +
         (work.tokenModel ? "tokens_per_s" : "samples_per_s") +
         "\":" + jsonNumber(perSecond(work.tokens, f.seconds), 6, true) +
         ",\"gflops\":" +
         jsonNumber(perSecond(work.flops, f.seconds) / 1e9, 6, true) +
         ",\"measured_s\":" + jsonNumber(f.seconds, 9, true) +
         ",\"simulated_s\":" + jsonNumber(f.simulatedSeconds, 9, true) +
         ",\"calibrated\":" + (f.calibrated ? "true" : "false") +
         (work.tokenModel ? ",\"samples_hash\":\"" + hex64(f.sampleHash) + "\""
                          : std::string()) +
         (f.lr >= 0 ? ",\"lr\":" + jsonNumber(f.lr, 12, true) : std::string()) +
         (f.gradNorm >= 0 ? ",\"grad_norm\":" + jsonNumber(f.gradNorm, 9, true)
                          : std::string()) +
         (std::isnan(f.valLoss) ? std::string()
                                : ",\"val_loss\":" + jsonNumber(f.valLoss, 9, true)) +
         ",\"" + (work.tokenModel ? "tokens" : "samples") +
         "\":" + jsonNumber(f.seen, 17, true) +
         (work.peakFlops > 0 ? ",\"mfu\":" + jsonNumber(mfu(f, work), 6, true)
                             : std::string()) +
         ",\"elapsed_s\":" + jsonNumber(f.elapsedSeconds, 9, true) + "}";
}

LoggedStep::LoggedStep() {
  loss = valLoss = lr = gradNorm = seen = rate = gflops = mfu =
      measuredSeconds = simulatedSeconds = elapsedSeconds =
          std::numeric_limits<double>::quiet_NaN();
}

bool dtfm::runtime::readStepLog(const std::string &path,
                                std::vector<LoggedStep> &steps,
                                bool &incomplete, std::string &error) {
  steps.clear();
  incomplete = false;
  // A regular file only: a FIFO named as the log would never end.
  std::string bytes;
  if (!format::readWholeFile(path, bytes, error)) {
    error = "the step log " + error;
    return false;
  }
  std::istringstream in(bytes);
  // A log line is a few hundred bytes: one far longer is not a step log.
  constexpr size_t kMaxLine = 1 << 16;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    std::string where = path + ":" + std::to_string(number) + ": ";
    if (line.size() > kMaxLine) {
      error = where + "a line of " + std::to_string(line.size()) +
              " bytes: not a step log (--log writes one JSON object a line)";
      return false;
    }
    format::JsonValue record;
    std::string problem;
    if (!format::parseJson(line, record, problem)) {
      // getline stopped at the end of the file, not at a newline: the
      // record a running worker is writing.
      if (in.eof()) {
        incomplete = true;
        break;
      }
      error = where + problem + " (--log writes one JSON object a line)";
      return false;
    }
    if (record.kind != format::JsonValue::Kind::Object) {
      error = where + "a record is a JSON object, not " +
              format::jsonKindName(record.kind);
      return false;
    }
    const format::JsonValue *step = record.find("step");
    if (!step || !step->isInteger || step->integer <= 0) {
      error = where + "a record needs \"step\", a positive integer";
      return false;
    }
    LoggedStep logged;
    logged.step = step->integer;
    if (!steps.empty() && logged.step <= steps.back().step) {
      error = where + "step " + std::to_string(logged.step) + " after step " +
              std::to_string(steps.back().step) +
              ": the steps of a log increase";
      return false;
    }
    std::pair<const char *, double *> fields[] = {
        {"loss", &logged.loss},
        {"val_loss", &logged.valLoss},
        {"lr", &logged.lr},
        {"grad_norm", &logged.gradNorm},
        {"tokens", &logged.seen},
        {"samples", &logged.seen},
        {"tokens_per_s", &logged.rate},
        {"samples_per_s", &logged.rate},
        {"gflops", &logged.gflops},
        {"mfu", &logged.mfu},
        {"measured_s", &logged.measuredSeconds},
        {"simulated_s", &logged.simulatedSeconds},
        {"elapsed_s", &logged.elapsedSeconds}};
    for (auto [key, field] : fields) {
      const format::JsonValue *value = record.find(key);
      if (!value || value->kind == format::JsonValue::Kind::Null)
        continue;
      if (value->kind != format::JsonValue::Kind::Number) {
        error = where + "\"" + key + "\" is " +
                format::jsonKindName(value->kind) + ", not a number";
        return false;
      }
      *field = value->number;
    }
    steps.push_back(logged);
  }
  return true;
}

namespace {
/// What a last stage sends rank 0 each step.
struct LossPart {
  double loss = 0;
  uint64_t sampleHash = 0;
};
static_assert(sizeof(LossPart) == 16);
} // namespace

/// A step rank 0 has finished but not printed (its losses may still be
/// on the way).
struct StepReporter::Pending {
  StepFigures figures;
  // Loss sums and sample hashes from the last stages.
  std::vector<LossPart> parts;
  std::vector<int> handles;
};

StepReporter::StepReporter(Transport *transport, int rank,
                           std::vector<int> lastStageRanks, double lossTerms,
                           IterationWork work, int steps, bool progressBar,
                           std::FILE *log, LogStart start)
    : transport(transport), rank(rank),
      lastStageRanks(std::move(lastStageRanks)), lossTerms(lossTerms),
      work(work), steps(steps), progressBar(progressBar), log(log),
      start(start) {}

StepReporter::~StepReporter() = default;

bool StepReporter::report(const StepFigures &figures, std::string &error) {
  bool last = std::find(lastStageRanks.begin(), lastStageRanks.end(), rank) !=
              lastStageRanks.end();
  if (rank != 0) {
    if (!last)
      return true;
    LossPart part{figures.loss, figures.sampleHash};
    const char *raw = reinterpret_cast<const char *>(&part);
    return transport->send(0, controlSlot(kLoss, figures.step, 0),
                           std::vector<char>(raw, raw + sizeof part), error,
                           nullptr, true);
  }
  auto next = std::make_unique<Pending>();
  next->figures = figures;
  next->figures.loss = last ? figures.loss : 0;
  next->figures.sampleHash = last ? figures.sampleHash : 0;
  next->parts.assign(lastStageRanks.size(), LossPart{});
  for (size_t i = 0; i < lastStageRanks.size(); ++i)
    if (lastStageRanks[i] != 0)
      next->handles.push_back(transport->postRecv(
          lastStageRanks[i], controlSlot(kLoss, figures.step, 0),
          &next->parts[i], sizeof(LossPart)));
  bool ok = !pending || print(*pending, error);
  pending = std::move(next);
  return ok;
}

void StepReporter::validated(double loss) {
  if (pending)
    pending->figures.valLoss = loss;
}

bool StepReporter::flush(std::string &error) {
  bool ok = !pending || print(*pending, error);
  pending.reset();
  return ok;
}

bool StepReporter::print(Pending &p, std::string &error) {
  for (int handle : p.handles)
    if (!transport->waitPosted(handle, error))
      return false;
  StepFigures figures = p.figures;
  for (const LossPart &part : p.parts) {
    figures.loss += part.loss;
    figures.sampleHash += part.sampleHash;
  }
  figures.loss /= lossTerms;
  figures.seen = start.seen + work.tokens * (figures.step - start.step);
  figures.elapsedSeconds += start.elapsedSeconds;
  std::string line = stepLine(figures, work, steps, start);
  if (progressBar) {
    int width = 20;
    int done = static_cast<int>(width * figures.step / std::max(1, steps));
    std::printf("\r[%s%s] %s", std::string(done, '#').c_str(),
                std::string(width - done, '.').c_str(), line.c_str());
    if (figures.step == steps)
      std::printf("\n");
  } else {
    std::printf("%s\n", line.c_str());
  }
  if (!std::isnan(figures.valLoss))
    std::printf("%svalidation after step %lld: loss %.6f\n",
                progressBar && figures.step != steps ? "\n" : "",
                static_cast<long long>(figures.step), figures.valLoss);
  std::fflush(stdout);
  if (log && (std::fprintf(log, "%s\n", stepJson(figures, work).c_str()) < 0 ||
              std::fflush(log) != 0)) {
    error = std::string("writing the training log failed: ") +
            std::strerror(errno);
    return false;
  }
  // A diverged run stops here, naming the step, rather than training on
  // NaN (its log line says "loss":null).
  if (!std::isfinite(figures.loss)) {
    error = "step " + std::to_string(figures.step) + ": the loss is " +
            (std::isnan(figures.loss) ? "nan" : "infinite") +
            ": training diverged (try a lower learning rate) or a parameter "
            "is not finite; stopping (--check-finite names the first op "
            "whose result is not finite, and its operands)";
    return false;
  }
  return true;
}

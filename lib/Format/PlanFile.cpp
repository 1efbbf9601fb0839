//===- PlanFile.cpp - Reading and writing plan files ----------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/PlanFile.h"
#include "dtfm/Format/TensorFile.h"
#include "dtfm/Support/Hash.h"

#include "plan.pb.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cassert>
#include <map>
#include <optional>
#include <memory>
#include <regex>
#include <set>
#include <unordered_map>

using namespace dtfm::format;

static bool readableVersion(uint64_t version) {
  return version >= kOldestPlanFormatVersion && version <= kPlanFormatVersion;
}

static std::string versionMismatch(const std::string &source,
                                   uint64_t version) {
  return source + ": plan format version " + std::to_string(version) +
         ", but this dtfm reads versions " +
         std::to_string(kOldestPlanFormatVersion) + " to " +
         std::to_string(kPlanFormatVersion) +
         (version < kOldestPlanFormatVersion
              ? " (an older dtfm wrote it: export the plan again)"
              : "");
}

static bool checksumInPlace(dtfm::proto::Plan &plan, uint64_t &checksum,
                            std::string &error);

//===----------------------------------------------------------------------===//
// Shared programs (version 3)
//===----------------------------------------------------------------------===//

/// Program attributes that are a device's own (plan.proto's DeviceProgram).
static bool isOwnProgramAttr(const std::string &key) {
  static const std::set<std::string> own = {
      "dtfm.device",        "dtfm.pipeline",          "dtfm.peers",
      "dtfm.param_shards",  "dtfm.peak_memory_bytes", "dtfm.tp_group",
      "dtfm.tp_rank"};
  return own.count(key) != 0;
}

/// Op attributes that are a device's own: the device at the other end of
/// a transfer.
static bool isOwnOpAttr(const std::string &key) { return key == "peer_device"; }

/// Moves the fields that are a device's own (not its attributes) from
/// `from` to `to`; `from` keeps its scalars, loses its lists.
static void moveOwnFields(dtfm::proto::DeviceProgram &from,
                          dtfm::proto::DeviceProgram &to) {
  to.set_device(from.device());
  to.set_stage(from.stage());
  to.set_pipeline(from.pipeline());
  to.set_prev(from.prev());
  to.set_next(from.next());
  to.set_speed_flops(from.speed_flops());
  to.set_tp_rank(from.tp_rank());
  to.mutable_shards()->Swap(from.mutable_shards());
  to.mutable_tp_group()->Swap(from.mutable_tp_group());
}

void dtfm::format::splitProgram(proto::DeviceProgram &program,
                                proto::DeviceProgram &entry) {
  moveOwnFields(program, entry);
  program.clear_device();
  program.clear_stage();
  program.clear_pipeline();
  program.clear_prev();
  program.clear_next();
  program.clear_speed_flops();
  program.clear_tp_rank();
  auto &attrs = *program.mutable_attrs();
  for (auto it = attrs.begin(); it != attrs.end();) {
    if (!isOwnProgramAttr(it->first)) {
      ++it;
      continue;
    }
    (*entry.mutable_attrs())[it->first] = std::move(it->second);
    it = attrs.erase(it);
  }
  for (int i = 0; i < program.ops_size(); ++i) {
    auto &opAttrs = *program.mutable_ops(i)->mutable_attrs();
    dtfm::proto::OpAttrs *own = nullptr;
    for (auto it = opAttrs.begin(); it != opAttrs.end();) {
      if (!isOwnOpAttr(it->first)) {
        ++it;
        continue;
      }
      if (!own) {
        own = entry.add_op_attrs();
        own->set_op(static_cast<uint32_t>(i));
      }
      (*own->mutable_attrs())[it->first] = std::move(it->second);
      it = opAttrs.erase(it);
    }
  }
}

std::string dtfm::format::deterministicBytes(const proto::DeviceProgram &m) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream raw(&bytes);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
  }
  return bytes;
}

dtfm::format::ProgramSharing::ProgramSharing(proto::Plan &plan) : plan(plan) {
  for (int t = 0; t < plan.templates_size(); ++t)
    templateOf.emplace(deterministicBytes(plan.templates(t)),
                       static_cast<uint32_t>(t));
}

uint32_t dtfm::format::ProgramSharing::share(proto::DeviceProgram &program) {
  proto::DeviceProgram entry;
  splitProgram(program, entry);
  auto [it, fresh] = templateOf.emplace(
      deterministicBytes(program), static_cast<uint32_t>(plan.templates_size()));
  if (fresh)
    plan.add_templates()->Swap(&program);
  entry.set_template_index(it->second);
  program.Swap(&entry);
  return it->second;
}

void dtfm::format::sharePrograms(proto::Plan &plan) {
  ProgramSharing sharing(plan);
  for (proto::DeviceProgram &program : *plan.mutable_programs())
    if (!program.has_template_index())
      sharing.share(program);
}

bool dtfm::format::checkSharedPrograms(const proto::Plan &plan,
                                       std::string &error) {
  auto fail = [&](const std::string &what) {
    error = what;
    return false;
  };
  // A template holds nothing that is a device's own.
  for (int t = 0; t < plan.templates_size(); ++t) {
    proto::DeviceProgram shared = plan.templates(t);
    proto::DeviceProgram own;
    splitProgram(shared, own);
    own.clear_stage(); // a template may keep its stage
    if (own.ByteSizeLong() != 0 || shared.has_template_index() ||
        shared.op_attrs_size() != 0)
      return fail("template " + std::to_string(t) +
                  " holds what only a device's entry may (its device, "
                  "pipeline, peers, shards, speed, tensor-parallel group, "
                  "peer devices or a template of its own)");
  }
  std::vector<bool> used(plan.templates_size(), false);
  for (const proto::DeviceProgram &entry : plan.programs()) {
    std::string where = "device '" + entry.device() + "': ";
    if (!entry.has_template_index()) {
      if (entry.op_attrs_size() != 0)
        return fail(where + "op_attrs without a template");
      continue;
    }
    uint32_t t = entry.template_index();
    if (t >= static_cast<uint32_t>(plan.templates_size()))
      return fail(where + "names template " + std::to_string(t) +
                  ", but the plan has " +
                  std::to_string(plan.templates_size()));
    // The entry holds its own fields only.
    proto::DeviceProgram shared = entry;
    proto::DeviceProgram own;
    splitProgram(shared, own);
    shared.clear_template_index();
    shared.clear_op_attrs();
    if (shared.ByteSizeLong() != 0)
      return fail(where + "names template " + std::to_string(t) +
                  " but holds more than its own fields (ops, streams, "
                  "work or shared attributes)");
    const proto::DeviceProgram &body = plan.templates(static_cast<int>(t));
    std::vector<bool> named(static_cast<size_t>(body.ops_size()), false);
    for (const proto::OpAttrs &opAttrs : entry.op_attrs()) {
      if (opAttrs.op() >= static_cast<uint32_t>(body.ops_size()))
        return fail(where + "op_attrs names op " +
                    std::to_string(opAttrs.op()) + ", but template " +
                    std::to_string(t) + " has " +
                    std::to_string(body.ops_size()) + " ops");
      if (named[opAttrs.op()])
        return fail(where + "op_attrs names op " +
                    std::to_string(opAttrs.op()) + " twice");
      named[opAttrs.op()] = true;
      for (const auto &[key, value] : opAttrs.attrs())
        if (!isOwnOpAttr(key))
          return fail(where + "op_attrs sets '" + key + "' on op " +
                      std::to_string(opAttrs.op()) +
                      ", which is its template's to set");
    }
    used[t] = true;
  }
  for (int t = 0; t < plan.templates_size(); ++t)
    if (!used[t])
      return fail("template " + std::to_string(t) + " is named by no device");
  return true;
}

const dtfm::proto::DeviceProgram &
dtfm::format::sharedPart(const proto::Plan &plan,
                         const proto::DeviceProgram &program) {
  if (!program.has_template_index())
    return program;
  // checkSharedPrograms made sure the template is there.
  assert(program.template_index() <
         static_cast<uint32_t>(plan.templates_size()));
  return plan.templates(static_cast<int>(program.template_index()));
}

std::vector<const dtfm::proto::DeviceProgram *>
dtfm::format::distinctPrograms(const proto::Plan &plan) {
  std::vector<const proto::DeviceProgram *> out;
  std::vector<bool> seen(static_cast<size_t>(plan.templates_size()), false);
  for (const proto::DeviceProgram &p : plan.programs()) {
    if (p.has_template_index()) {
      if (p.template_index() >= seen.size() || seen[p.template_index()])
        continue;
      seen[p.template_index()] = true;
    }
    out.push_back(&p);
  }
  return out;
}

std::vector<const dtfm::proto::OpAttrs *>
dtfm::format::ownOpAttrs(const proto::DeviceProgram &program, int ops) {
  std::vector<const proto::OpAttrs *> out(
      program.op_attrs_size() ? static_cast<size_t>(std::max(ops, 0)) : 0);
  for (const proto::OpAttrs &opAttrs : program.op_attrs())
    if (opAttrs.op() < out.size())
      out[opAttrs.op()] = &opAttrs;
  return out;
}

bool dtfm::format::expandPrograms(proto::Plan &plan, std::string &error) {
  if (!checkSharedPrograms(plan, error))
    return false;
  for (proto::DeviceProgram &entry : *plan.mutable_programs()) {
    if (!entry.has_template_index())
      continue;
    // Built on the plan's arena (when it has one), so that the swap below
    // exchanges pointers rather than copying the program twice.
    proto::DeviceProgram &whole =
        *google::protobuf::Arena::CreateMessage<proto::DeviceProgram>(
            plan.GetArena());
    std::unique_ptr<proto::DeviceProgram> owned(plan.GetArena() ? nullptr
                                                                : &whole);
    whole.CopyFrom(sharedPart(plan, entry));
    moveOwnFields(entry, whole);
    for (auto &[key, value] : *entry.mutable_attrs())
      (*whole.mutable_attrs())[key] = std::move(value);
    for (proto::OpAttrs &own : *entry.mutable_op_attrs())
      for (auto &[key, value] : *own.mutable_attrs())
        (*whole.mutable_ops(static_cast<int>(own.op()))->mutable_attrs())[key] =
            std::move(value);
    entry.Swap(&whole);
  }
  plan.clear_templates();
  return true;
}

bool dtfm::format::parsePlan(const std::string &bytes,
                             const std::string &source, proto::Plan &plan,
                             std::string &error) {
  struct Quiet : google::protobuf::io::ErrorCollector {
    void AddError(int, google::protobuf::io::ColumnNumber,
                  const std::string &) override {}
  } quiet;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&quiet);
  // Binary first; then text format, quietly (a failure is reported below;
  // protobuf would log invalid UTF-8 in a string field on stderr).
  google::protobuf::LogSilencer noLog;
  if (!plan.ParseFromString(bytes) && !parser.ParseFromString(bytes, &plan)) {
    // A text plan of another version may not parse with this schema: name
    // its version when it states one.
    std::smatch match;
    static const std::regex versionLine(
        R"((^|\n)\s*format_version\s*:\s*(\d{1,9})\s)");
    if (std::regex_search(bytes, match, versionLine) &&
        !readableVersion(std::stoul(match[2].str()))) {
      error = versionMismatch(source, std::stoul(match[2].str()));
      return false;
    }
    error = source + ": not a plan file (neither binary nor text protobuf)";
    return false;
  }
  if (!readableVersion(plan.format_version())) {
    error = versionMismatch(source, plan.format_version());
    return false;
  }
  if (plan.has_checksum()) {
    uint64_t computed = 0;
    if (!checksumInPlace(plan, computed, error)) {
      error = source + ": " + error;
      return false;
    }
    if (computed != plan.checksum()) {
      error = source + ": checksum mismatch: the plan changed after it was "
                       "written (export it again; a text plan edited on "
                       "purpose drops its checksum line)";
      return false;
    }
  }
  if (plan.format_version() < 3 &&
      (plan.templates_size() != 0 || plan.link_classes_size() != 0)) {
    error = source + ": a version-" + std::to_string(plan.format_version()) +
            " plan with version 3's templates or link classes";
    return false;
  }
  if (!checkSharedPrograms(plan, error)) {
    error = source + ": " + error;
    return false;
  }
  return checkPlanShape(plan, source, error);
}

bool dtfm::format::checkPlanShape(const proto::Plan &plan,
                                  const std::string &source,
                                  std::string &error) {
  auto fail = [&](const std::string &what) {
    error = source + ": " + what;
    return false;
  };
  if (plan.programs_size() == 0)
    return fail("the plan has no device programs");
  if (plan.micro_batches() < 1 || plan.micro_batches() > kMaxMicroBatches)
    return fail("micro_batches " + std::to_string(plan.micro_batches()) +
                " outside [1, " + std::to_string(kMaxMicroBatches) + "]");
  // Programs form a grid: every stage of every pipeline once.
  int64_t stages = 0, pipelines = 0;
  std::set<std::string> devices;
  for (const proto::DeviceProgram &p : plan.programs()) {
    if (p.device().empty())
      return fail("a device program without a device");
    if (!isFileSafeDeviceName(p.device()))
      return fail("device '" + p.device() + "': the name " +
                  kFileSafeDeviceNameRule);
    if (!devices.insert(p.device()).second)
      return fail("device '" + p.device() + "' has two programs");
    if (p.stage() < 0 || p.stage() >= plan.programs_size() ||
        p.pipeline() < 0 || p.pipeline() >= plan.programs_size())
      return fail("device '" + p.device() + "': stage " +
                  std::to_string(p.stage()) + " or pipeline " +
                  std::to_string(p.pipeline()) + " outside [0, " +
                  std::to_string(plan.programs_size()) + ")");
    stages = std::max<int64_t>(stages, p.stage() + 1);
    pipelines = std::max<int64_t>(pipelines, p.pipeline() + 1);
  }
  // Tensor parallelism: each cell holds a group's programs, one per rank.
  std::map<std::string, const proto::DeviceProgram *> programOf;
  for (const proto::DeviceProgram &p : plan.programs())
    programOf[p.device()] = &p;
  std::set<std::pair<int64_t, int64_t>> cells;
  std::map<std::pair<int64_t, int64_t>, std::string> leaderOf;
  std::map<int64_t, int64_t> countOf; // pipeline -> micro-batches
  for (const proto::DeviceProgram &p : plan.programs()) {
    int64_t degree = std::max(1, p.tp_group_size());
    std::string where = "device '" + p.device() + "': ";
    if (p.tp_rank() < 0 || p.tp_rank() >= degree)
      return fail(where + "tensor-parallel rank " +
                  std::to_string(p.tp_rank()) + " outside [0, " +
                  std::to_string(degree) + ")");
    if (degree > 1 && p.tp_group(p.tp_rank()) != p.device())
      return fail(where + "its tensor-parallel group names '" +
                  p.tp_group(p.tp_rank()) + "' at its rank " +
                  std::to_string(p.tp_rank()));
    std::set<std::string> seen;
    for (const std::string &member : p.tp_group()) {
      if (!seen.insert(member).second)
        return fail(where + "its tensor-parallel group names '" + member +
                    "' twice");
      auto it = programOf.find(member);
      if (it == programOf.end())
        return fail(where + "its tensor-parallel group names '" + member +
                    "', which has no program");
      const proto::DeviceProgram &other = *it->second;
      if (other.stage() != p.stage() || other.pipeline() != p.pipeline() ||
          !std::equal(other.tp_group().begin(), other.tp_group().end(),
                      p.tp_group().begin(), p.tp_group().end()))
        return fail(where + "its tensor-parallel group member '" + member +
                    "' is another stage or pipeline, or names another group");
    }
    std::string leader = degree > 1 ? p.tp_group(0) : p.device();
    auto [cell, fresh] =
        leaderOf.emplace(std::make_pair(p.stage(), p.pipeline()), leader);
    if (!fresh && cell->second != leader)
      return fail("two programs for stage " + std::to_string(p.stage()) +
                  " of pipeline " + std::to_string(p.pipeline()));
    cells.insert({p.stage(), p.pipeline()});
    int64_t count = programMicroBatches(plan, p);
    if (count < 1 || count > plan.micro_batches())
      return fail("device '" + p.device() + "': micro_batches " +
                  std::to_string(count) + " outside [1, " +
                  std::to_string(plan.micro_batches()) +
                  "] (the plan's micro_batches is the largest)");
    auto [it, first] = countOf.emplace(p.pipeline(), count);
    if (!first && it->second != count)
      return fail("device '" + p.device() + "': micro_batches " +
                  std::to_string(count) + " but another stage of pipeline " +
                  std::to_string(p.pipeline()) + " runs " +
                  std::to_string(it->second));
  }
  if (static_cast<int64_t>(cells.size()) != stages * pipelines)
    for (int64_t s = 0; s < stages; ++s)
      for (int64_t q = 0; q < pipelines; ++q)
        if (!cells.count({s, q}))
          return fail("stage " + std::to_string(s) + " of pipeline " +
                      std::to_string(q) + " has no device program (" +
                      std::to_string(stages) + " stages x " +
                      std::to_string(pipelines) + " pipelines)");
  return true;
}

int64_t dtfm::format::programMicroBatches(const proto::Plan &plan,
                                         const proto::DeviceProgram &program) {
  int64_t own = sharedPart(plan, program).micro_batches();
  return own != 0 ? own : plan.micro_batches();
}

dtfm::format::MicroBatchLayout
dtfm::format::microBatchLayout(const proto::Plan &plan) {
  MicroBatchLayout layout;
  for (const proto::DeviceProgram &p : plan.programs()) {
    size_t pipeline = static_cast<size_t>(p.pipeline());
    if (layout.counts.size() <= pipeline)
      layout.counts.resize(pipeline + 1, 0);
    layout.counts[pipeline] = programMicroBatches(plan, p);
  }
  for (int64_t count : layout.counts) {
    layout.offsets.push_back(layout.total);
    layout.total += count;
  }
  return layout;
}

double dtfm::format::samplesPerStep(const proto::Plan &plan) {
  // The first dtfm.input of the first program that has one.
  int64_t size = 0;
  for (const proto::DeviceProgram &p : plan.programs()) {
    for (const proto::PlanOp &op : sharedPart(plan, p).ops())
      if (op.name() == "dtfm.input" && op.results_size() > 0 &&
          op.results(0).shape_size() > 0) {
        size = op.results(0).shape(0);
        break;
      }
    if (size != 0)
      break;
  }
  return static_cast<double>(microBatchLayout(plan).total) *
         static_cast<double>(size);
}

bool dtfm::format::readPlanFile(const std::string &path, proto::Plan &plan,
                                std::string &error) {
  std::string bytes;
  if (!readWholeFile(path, bytes, error))
    return false;
  return parsePlan(bytes, path, plan, error);
}

/// The plan's deterministic binary encoding: map fields (attributes)
/// serialise in hash order unless asked not to, and the same plan must give
/// the same bytes.
static bool encodePlan(const dtfm::proto::Plan &plan, std::string &bytes) {
  bytes.clear();
  bool written;
  {
    google::protobuf::io::StringOutputStream raw(&bytes);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.SetSerializationDeterministic(true);
    written = plan.SerializeToCodedStream(&coded) && !coded.HadError();
  } // the coded stream flushes into `bytes` when it goes
  return written;
}

/// planChecksum of a plan this file may change for a moment: its checksum
/// field is taken out while it is encoded (not a copy of the whole plan).
static bool checksumInPlace(dtfm::proto::Plan &plan, uint64_t &checksum,
                            std::string &error) {
  std::optional<uint64_t> stated;
  if (plan.has_checksum())
    stated = plan.checksum();
  plan.clear_checksum();
  std::string bytes;
  bool encoded = encodePlan(plan, bytes);
  if (stated)
    plan.set_checksum(*stated);
  if (!encoded) {
    error = "cannot serialise the plan";
    return false;
  }
  checksum = dtfm::fnv1a(bytes);
  return true;
}

bool dtfm::format::planChecksum(const proto::Plan &plan, uint64_t &checksum,
                                std::string &error) {
  dtfm::proto::Plan unsummed = plan;
  return checksumInPlace(unsummed, checksum, error);
}

bool dtfm::format::serializePlan(const proto::Plan &plan, bool text,
                                 std::string &bytes, std::string &error,
                                 bool share) {
  proto::Plan copy = plan;
  return serializePlan(std::move(copy), text, bytes, error, share);
}

bool dtfm::format::serializePlan(proto::Plan &&plan, bool text,
                                 std::string &bytes, std::string &error,
                                 bool share) {
  bytes.clear();
  if (share)
    sharePrograms(plan);
  else if (!expandPrograms(plan, error))
    return false;
  uint64_t checksum = 0;
  if (!checksumInPlace(plan, checksum, error))
    return false;
  plan.set_checksum(checksum);
  // TextFormat prints map entries sorted by key.
  if (text ? google::protobuf::TextFormat::PrintToString(plan, &bytes)
           : encodePlan(plan, bytes))
    return true;
  error = text ? "cannot print the plan" : "cannot serialise the plan";
  return false;
}

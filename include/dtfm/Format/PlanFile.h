//===- PlanFile.h - Reading and writing plan files ---------------*- C++
//-*-===//
//
// Part of dtfm. Plain C++ (no MLIR): shared by `dtfm-translate
// --export-plan/--import-plan` and the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_FORMAT_PLANFILE_H
#define DTFM_FORMAT_PLANFILE_H

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace dtfm::proto {
class DeviceProgram;
class Plan;
class OpAttrs;
class PlanAttr;
} // namespace dtfm::proto

namespace dtfm::format {

/// The version of plan.proto that this dtfm writes, and the oldest it
/// reads (see the history in plan.proto: version 2 is version 3 without
/// shared programs and link classes).
inline constexpr unsigned kPlanFormatVersion = 3;
inline constexpr unsigned kOldestPlanFormatVersion = 2;

/// The most micro-batches per pipeline a plan may ask for.
inline constexpr int64_t kMaxMicroBatches = 1000000;

/// Decodes a plan from binary or protobuf text format, checks its version
/// and its checksum when it has one, checks its shared programs
/// (checkSharedPrograms) and its shape (checkPlanShape). The programs stay
/// shared as the file has them: a device's entry holds its own fields and
/// sharedPart gives the rest (at 1024 devices, rebuilding every program
/// whole was a third of reading a plan). On failure returns false with a one-line `error` that
/// starts with `source`; a plan of another version is refused by its
/// number, in either form, even when the fields of that version no longer
/// parse.
bool parsePlan(const std::string &bytes, const std::string &source,
               proto::Plan &plan, std::string &error);

/// A file's device programs shared (version 3): the programs that are the
/// same but for what plan.proto's DeviceProgram lists as a device's own
/// become one template in `templates`, and each program the entry that
/// names it. Programs that already name a template are left as they are.
void sharePrograms(proto::Plan &plan);

/// sharePrograms one program at a time, for a writer that adds them: the
/// plan's templates so far, by their bytes.
class ProgramSharing {
public:
  explicit ProgramSharing(proto::Plan &plan);
  /// Turns `program`, a whole program of the plan, into the entry that
  /// names its template (added when no earlier program had it); returns
  /// the template's index.
  uint32_t share(proto::DeviceProgram &program);

private:
  proto::Plan &plan;
  std::unordered_map<std::string, uint32_t> templateOf;
};

/// Moves the fields and attributes that are `program`'s own (plan.proto's
/// DeviceProgram) into `entry`; what is left is its template's.
void splitProgram(proto::DeviceProgram &program, proto::DeviceProgram &entry);

/// A program's deterministic binary encoding (map fields sorted): equal
/// bytes, equal programs.
std::string deterministicBytes(const proto::DeviceProgram &program);

/// Whether the plan's shared programs are well formed. False with a
/// one-line `error` (without the source) for an entry that names a missing
/// template, holds more than its own fields, or sets an op its template
/// lacks (or one op twice, or an attribute that is the template's), and
/// for a template that holds a device's fields or that no entry names.
bool checkSharedPrograms(const proto::Plan &plan, std::string &error);

/// The other way: each entry that names a template becomes the whole
/// program, and `templates` is cleared; false as checkSharedPrograms.
bool expandPrograms(proto::Plan &plan, std::string &error);

/// What `program` shares with its stage's replicas (its ops, streams,
/// work, FLOPs, micro-batches, recomputation and shared attributes): its
/// template when it names one, else `program` itself. Its own fields
/// (device, stage, pipeline, prev, next, speed, shards, tensor-parallel
/// group and rank, its own attributes) are `program`'s, and so are its
/// transfers' peer devices (ownOpAttrs). For a plan whose shared programs
/// were checked (parsePlan).
const proto::DeviceProgram &sharedPart(const proto::Plan &plan,
                                       const proto::DeviceProgram &program);

/// The programs that name no template and the first entry of each
/// template, in plan order: what depends on a program's shared part alone
/// (its ops, its parameters) is read once per template from these.
std::vector<const proto::DeviceProgram *>
distinctPrograms(const proto::Plan &plan);

/// What `program`'s entry sets on each of its template's `ops` ops
/// (plan.proto's op_attrs: a transfer's peer_device), by op index: null
/// where it sets nothing, and empty for a program that sets nothing (a
/// whole one). For a plan whose shared programs were checked.
std::vector<const proto::OpAttrs *>
ownOpAttrs(const proto::DeviceProgram &program, int ops);

/// The plan's shape, before anything runs or imports it: at least one
/// device program, micro_batches in [1, kMaxMicroBatches], named devices
/// each with one program, programs forming stages x pipelines with every
/// cell filled once, and each program's micro-batches within [1, the
/// plan's], the same on every stage of a pipeline.
bool checkPlanShape(const proto::Plan &plan, const std::string &source,
                    std::string &error);

/// Micro-batches `program`'s pipeline runs per iteration: its own count
/// (uneven replicas), else the plan's.
int64_t programMicroBatches(const proto::Plan &plan,
                            const proto::DeviceProgram &program);

/// Where each pipeline's micro-batches sit in the iteration's sequence:
/// `offsets[p]` is the first of pipeline p (pipelines in order, each
/// taking its programMicroBatches); `total` is all of them. For a plan that
/// passed checkPlanShape.
struct MicroBatchLayout {
  std::vector<int64_t> counts, offsets;
  int64_t total = 0;
};
MicroBatchLayout microBatchLayout(const proto::Plan &plan);

/// Samples one training step of the plan takes: every pipeline's
/// micro-batches times the micro-batch size (the leading dimension of the
/// first dtfm.input). A checkpoint records it, and a plan that resumes
/// another's checkpoint (or re-plans it) must take the same, so that the
/// data goes on where it stopped.
double samplesPerStep(const proto::Plan &plan);

/// parsePlan of a file's contents.
bool readPlanFile(const std::string &path, proto::Plan &plan,
                  std::string &error);

/// FNV-1a of the plan's deterministic binary encoding without its checksum
/// field (plan.proto's `checksum`).
bool planChecksum(const proto::Plan &plan, uint64_t &checksum,
                  std::string &error);

/// The plan's bytes, binary or protobuf text format when `text`, with its
/// programs shared (sharePrograms; `share` false: each written whole,
/// expandPrograms) and
/// its checksum set (parsePlan checks it).
bool serializePlan(const proto::Plan &plan, bool text, std::string &bytes,
                   std::string &error, bool share = true);
/// The same, sharing the programs in place (no copy of every program: at
/// 1024 devices the copy was a third of an export).
bool serializePlan(proto::Plan &&plan, bool text, std::string &bytes,
                   std::string &error, bool share = true);

} // namespace dtfm::format

#endif // DTFM_FORMAT_PLANFILE_H

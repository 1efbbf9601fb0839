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
#include <vector>

namespace dtfm::proto {
class DeviceProgram;
class Plan;
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
/// and its checksum when it has one, rebuilds each device program an entry
/// gives by its template (expandPrograms), and checks its shape
/// (checkPlanShape). On failure returns false with a one-line `error` that
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

/// The other way: each entry that names a template becomes the whole
/// program, and `templates` is cleared. False with a one-line `error`
/// (without the source) for an entry that names a missing template, holds
/// more than its own fields, or sets an op its template lacks, and for a
/// template that holds a device's fields or that no entry names.
bool expandPrograms(proto::Plan &plan, std::string &error);

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
/// programs shared (sharePrograms; `share` false: each written whole) and
/// its checksum set (parsePlan checks it).
bool serializePlan(const proto::Plan &plan, bool text, std::string &bytes,
                   std::string &error, bool share = true);
/// The same, sharing the programs in place (no copy of every program: at
/// 1024 devices the copy was a third of an export).
bool serializePlan(proto::Plan &&plan, bool text, std::string &bytes,
                   std::string &error, bool share = true);

} // namespace dtfm::format

#endif // DTFM_FORMAT_PLANFILE_H

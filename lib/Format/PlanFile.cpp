//===- PlanFile.cpp - Reading and writing plan files ----------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/PlanFile.h"
#include "dtfm/Format/TensorFile.h"

#include "plan.pb.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include <regex>

using namespace dtfm::format;

static std::string versionMismatch(const std::string &source,
                                   uint64_t version) {
  return source + ": plan format version " + std::to_string(version) +
         ", but this dtfm reads version " + std::to_string(kPlanFormatVersion) +
         (version < kPlanFormatVersion
              ? " (an older dtfm wrote it: export the plan again)"
              : "");
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
  // Binary first; then text format, quietly (a failure is reported below).
  if (!plan.ParseFromString(bytes) && !parser.ParseFromString(bytes, &plan)) {
    // A text plan of another version may not parse with this schema: name
    // its version when it states one.
    std::smatch match;
    static const std::regex versionLine(
        R"((^|\n)\s*format_version\s*:\s*(\d{1,9})\s)");
    if (std::regex_search(bytes, match, versionLine) &&
        std::stoul(match[2].str()) != kPlanFormatVersion) {
      error = versionMismatch(source, std::stoul(match[2].str()));
      return false;
    }
    error = source + ": not a plan file (neither binary nor text protobuf)";
    return false;
  }
  if (plan.format_version() != kPlanFormatVersion) {
    error = versionMismatch(source, plan.format_version());
    return false;
  }
  return true;
}

bool dtfm::format::readPlanFile(const std::string &path, proto::Plan &plan,
                                std::string &error) {
  std::string bytes;
  if (!readWholeFile(path, bytes, error)) {
    error = path + ": cannot open plan file";
    return false;
  }
  return parsePlan(bytes, path, plan, error);
}

bool dtfm::format::serializePlan(const proto::Plan &plan, bool text,
                                 std::string &bytes, std::string &error) {
  bytes.clear();
  if (text) {
    // TextFormat prints map entries sorted by key.
    if (google::protobuf::TextFormat::PrintToString(plan, &bytes))
      return true;
  } else {
    // Map fields (attributes) serialise in hash order unless asked to be
    // deterministic: the same plan must give the same bytes.
    bool written;
    {
      google::protobuf::io::StringOutputStream raw(&bytes);
      google::protobuf::io::CodedOutputStream coded(&raw);
      coded.SetSerializationDeterministic(true);
      written = plan.SerializeToCodedStream(&coded) && !coded.HadError();
    } // the coded stream flushes into `bytes` when it goes
    if (written)
      return true;
  }
  error = text ? "cannot print the plan" : "cannot serialise the plan";
  return false;
}

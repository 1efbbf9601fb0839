//===- BenchSupport.h - What the benches share ------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The DT-FM paper's five network scenarios, read at run time from
// ../shared/scenarios (or DTFM_SCENARIOS_DIR, or --scenarios DIR); they are
// never copied into the tree. And the benches' command-line reader.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_BENCH_BENCHSUPPORT_H
#define DTFM_BENCH_BENCHSUPPORT_H

#include "dtfm/Planner/Cluster.h"
#include "dtfm/Support/Json.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace dtfm::bench {

/// Numbers in --json lines (dtfm/Support/Json.h).
using ::dtfm::jsonNumber;


/// The scenarios' file prefixes, in the paper's order (§4.1: data center
/// on demand, spot, two data centers, regional, world-wide).
inline const std::vector<std::string> &paperScenarios() {
  static const std::vector<std::string> prefixes = {
      "0_dc_ondemand", "1_dc_spot", "2_multi_dc", "3_geo_regional",
      "4_geo_worldwide"};
  return prefixes;
}

/// DTFM_SCENARIOS_DIR when set, else ../shared/scenarios beside the source
/// tree.
inline std::string defaultScenariosDir() {
  if (const char *env = std::getenv("DTFM_SCENARIOS_DIR"))
    return env;
  return std::string(DTFM_SOURCE_DIR) + "/../shared/scenarios";
}

/// Loads scenario `prefix` from `dir`; when it cannot, says on stderr that
/// `tool` skips the scenarios, and why, and returns false.
inline bool loadScenario(const char *tool, const std::string &dir,
                         const std::string &prefix, planner::Cluster &cluster) {
  std::string error;
  if (planner::loadScenarioMatrices(dir, prefix, cluster, error))
    return true;
  std::fprintf(stderr,
               "%s: skipping the DT-FM scenarios: %s (set DTFM_SCENARIOS_DIR "
               "or --scenarios)\n",
               tool, error.c_str());
  return false;
}

/// Writes a cluster file at `path` naming scenario `prefix`'s matrices in
/// `dir` for 64 V100s (as the DT-FM paper's experiments); when the matrices
/// are missing, says on stderr that `tool` skips the scenarios and returns
/// false.
inline bool writeScenarioCluster(const char *tool, const std::string &dir,
                                 const std::string &prefix,
                                 const std::string &path) {
  std::string delay = dir + "/" + prefix + "_delay_ms.csv";
  if (!std::ifstream(delay)) {
    std::fprintf(stderr,
                 "%s: skipping the DT-FM scenarios: %s not found (set "
                 "DTFM_SCENARIOS_DIR or --scenarios)\n",
                 tool, delay.c_str());
    return false;
  }
  std::ofstream out(path);
  out << "name: \"" << prefix << "\"\n"
      << "devices { name: \"gpu\" count: 64 peak_flops: 125e12 "
         "memory_bytes: 16e9 }\n"
      << "delay_matrix_csv: \"" << delay << "\"\n"
      << "bandwidth_matrix_csv: \"" << dir << "/" << prefix
      << "_bandwidth_gbps.csv\"\n";
  return static_cast<bool>(out);
}

/// bench-shape's mixed clusters, in order: `two-generations` and
/// `far-region`, built from examples/clusters/dc-ondemand.textproto (eight
/// 8-GPU nodes; 32 of the 64 V100s four times slower; 8 devices moved to a
/// region behind 10 Mbit/s and 250 ms links), then
/// examples/clusters/mixed-regions.textproto (48 GPUs of four generations
/// in eight regions). False with `error` when a preset does not load.
inline bool mixedClusters(std::vector<planner::Cluster> &out,
                          std::string &error) {
  out.clear();
  std::string presets = std::string(DTFM_SOURCE_DIR) + "/examples/clusters/";
  planner::Cluster base, mixed;
  if (!planner::loadClusterFile(presets + "dc-ondemand.textproto", base,
                                error) ||
      !planner::loadClusterFile(presets + "mixed-regions.textproto", mixed,
                                error))
    return false;
  planner::Cluster generations = base, far = base;
  generations.name = "two-generations";
  for (size_t d = 32; d < base.size(); ++d)
    generations.devices[d].peakFlops /= 4;
  far.name = "far-region";
  for (size_t d = 56; d < base.size(); ++d) {
    far.devices[d].region = "far";
    for (size_t other = 0; other < 56; ++other) {
      far.bandwidthGbps(d, other) = far.bandwidthGbps(other, d) = 0.01;
      far.delayMs(d, other) = far.delayMs(other, d) = 250;
    }
  }
  out = {generations, far, mixed};
  return true;
}

/// The non-empty items of a comma-separated list.
inline std::vector<std::string> splitList(const std::string &text) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ','))
    if (!part.empty())
      parts.push_back(part);
  return parts;
}

/// A bench's command line, read strictly: a bench runs for minutes to hours,
/// so a mistyped value must stop it at once rather than run it with 0 or a
/// default. Every value is checked (whole text a number, in range, finite);
/// on bad input one line goes to stderr,
///   <tool>: error: <flag>: <what is wrong> (got '<text>')
/// and the process exits with status 2.
///
///   Flags flags("bench-x", argc, argv);
///   while (flags.next())
///     if (flags.is("--json"))
///       json = true;
///     else if (flags.is("--reps"))
///       reps = flags.integer<int>(1);
///     else
///       flags.unknown();
class Flags {
public:
  Flags(const char *tool, int argc, char **argv)
      : tool(tool), argc(argc), argv(argv) {}

  /// Moves to the next argument; false when there is none.
  bool next() {
    value.clear();
    given = false;
    if (++index >= argc)
      return false;
    current = argv[index];
    return true;
  }

  /// Whether the current argument is `name`.
  bool is(const char *name) const { return current == name; }

  /// The current flag's value: the next argument, which must be there and
  /// must not be another flag (`--scenarios --json` forgot the folder).
  std::string text() {
    if (index + 1 >= argc)
      fail("needs a value");
    value = argv[index + 1];
    given = true;
    if (value.rfind("--", 0) == 0)
      fail("needs a value");
    ++index;
    return value;
  }

  /// The non-empty items of the comma-separated value; at least one.
  std::vector<std::string> textList() {
    std::vector<std::string> items = splitList(text());
    if (items.empty())
      fail("needs a comma-separated list");
    return items;
  }

  /// The value as an integer of type T in [min, max].
  template <typename T = int64_t>
  T integer(T min, T max = std::numeric_limits<T>::max()) {
    std::string item = text();
    return parseInteger<T>(item, min, max, "");
  }

  /// The value as a finite number >= min.
  double number(double min) { return parseNumber(text(), min, false, ""); }

  /// The value as a finite number > min.
  double numberAbove(double min) { return parseNumber(text(), min, true, ""); }

  /// The value as a comma-separated list of integers in [min, max], each
  /// checked; at least one.
  template <typename T = int64_t>
  std::vector<T> integerList(T min, T max = std::numeric_limits<T>::max()) {
    std::vector<T> out;
    for (const std::string &item : textList())
      out.push_back(parseInteger<T>(item, min, max, "item '" + item + "': "));
    return out;
  }

  /// The value as a comma-separated list of finite numbers >= min; at least
  /// one.
  std::vector<double> numberList(double min) {
    std::vector<double> out;
    for (const std::string &item : textList())
      out.push_back(parseNumber(item, min, false, "item '" + item + "': "));
    return out;
  }

  /// Ends the run: `what` is wrong with the current flag's value (for checks
  /// the readers cannot make, e.g. a multiple of 8).
  [[noreturn]] void fail(const std::string &what) const {
    if (!given)
      std::fprintf(stderr, "%s: error: %s: %s\n", tool, current.c_str(),
                   what.c_str());
    else
      std::fprintf(stderr, "%s: error: %s: %s (got '%s')\n", tool,
                   current.c_str(), what.c_str(), value.c_str());
    std::exit(2);
  }

  /// Ends the run: the current argument is no flag of this tool.
  [[noreturn]] void unknown() const {
    std::fprintf(stderr, "%s: error: unknown argument '%s'\n", tool,
                 current.c_str());
    std::exit(2);
  }

private:
  template <typename T>
  T parseInteger(const std::string &item, T min, T max,
                 const std::string &prefix) const {
    static_assert(std::is_integral_v<T>, "integer flags only");
    T result{};
    const char *first = item.data(), *last = first + item.size();
    auto [end, error] = std::from_chars(first, last, result);
    // Past T's range, or (from_chars reads no sign into an unsigned T) a
    // negative integer: out of bounds, not garbage.
    bool negative =
        item.size() > 1 && item[0] == '-' &&
        item.find_first_not_of("0123456789", 1) == std::string::npos;
    if (error == std::errc::result_out_of_range ||
        (std::is_unsigned_v<T> && negative))
      fail(prefix + (negative ? "must be >= " + std::to_string(min)
                              : "must be <= " + std::to_string(max)));
    if (error != std::errc() || end != last)
      fail(prefix + "expected an integer");
    if (result < min)
      fail(prefix + "must be >= " + std::to_string(min));
    if (result > max)
      fail(prefix + "must be <= " + std::to_string(max));
    return result;
  }

  double parseNumber(const std::string &item, double min, bool exclusive,
                     const std::string &prefix) const {
    // strtod skips leading blanks and stops at the first bad character;
    // both would let "5 x" or " 5" through.
    if (item.empty() || std::isspace(static_cast<unsigned char>(item[0])))
      fail(prefix + "expected a number");
    char *end = nullptr;
    errno = 0;
    double result = std::strtod(item.c_str(), &end);
    if (end != item.c_str() + item.size())
      fail(prefix + "expected a number");
    // Overflow comes back as an infinity with ERANGE: say which.
    if (errno == ERANGE)
      fail(prefix + "out of range");
    if (!std::isfinite(result))
      fail(prefix + "must be finite");
    if (exclusive ? !(result > min) : !(result >= min)) {
      char bound[64];
      std::snprintf(bound, sizeof bound, "must be %s %g",
                    exclusive ? ">" : ">=", min);
      fail(prefix + bound);
    }
    return result;
  }

  const char *tool;
  int argc;
  char **argv;
  int index = 0;
  std::string current; ///< the current flag (argv[index] before its value)
  std::string value;   ///< the current flag's value, once read
  bool given = false;  ///< whether the current flag has a value to quote
};

} // namespace dtfm::bench

#endif // DTFM_BENCH_BENCHSUPPORT_H

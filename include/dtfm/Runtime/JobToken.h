//===- JobToken.h - The secret a job's processes share ----------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// Every TCP connection of a job's control plane -- a rank to rank 0's
// rendezvous store (or to the one the elastic coordinator serves), an
// agent to its coordinator -- opens with a challenge-response over the
// job token (lib/Runtime/JobAuth.h): a peer that does not hold it is
// refused before anything it says is parsed, and the token itself never
// crosses the wire. The token comes from --job-token FILE (a file only its
// owner can read) or DTFM_JOB_TOKEN; `dtfm-run --new-job-token` prints a
// fresh one, and an elastic coordinator with agents makes one when given
// none.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_JOBTOKEN_H
#define DTFM_RUNTIME_JOBTOKEN_H

#include <string>

namespace dtfm::runtime {

inline constexpr const char *kJobTokenVariable = "DTFM_JOB_TOKEN";
/// At least 128 bits as hex; printable ASCII without spaces, so that it
/// passes through environment variables and shell lines unchanged.
inline constexpr size_t kMinJobTokenChars = 32;
inline constexpr size_t kMaxJobTokenChars = 1024;

/// The job's token: from `path` (--job-token; "" for none) or from the
/// environment's DTFM_JOB_TOKEN (`fromEnvironment`, null when unset).
/// `token` is "" when neither gives one. False with a one-line `error`: a
/// file others can read, a token too short or with spaces, the two sources
/// disagreeing.
bool loadJobToken(const std::string &path, const char *fromEnvironment,
                  std::string &token, std::string &error);

/// Why `token` cannot be a job token ("" when it can); `where` names its
/// source in the message.
std::string jobTokenProblem(const std::string &token,
                            const std::string &where);

/// 32 bytes of the kernel's randomness as 64 hex digits; "" with `error`
/// when the kernel gives none.
std::string freshJobToken(std::string &error);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_JOBTOKEN_H

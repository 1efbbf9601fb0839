//===- JobToken.cpp - The secret a job's processes share ------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/JobToken.h"

#include "dtfm/Format/FileIo.h"
#include "dtfm/Support/Sha256.h"

#include "JobAuth.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

using namespace dtfm;

std::string runtime::jobTokenProblem(const std::string &token,
                                     const std::string &where) {
  if (token.size() < kMinJobTokenChars)
    return where + ": a job token has at least " +
           std::to_string(kMinJobTokenChars) + " characters (this one has " +
           std::to_string(token.size()) +
           "); `dtfm-run --new-job-token` makes one";
  if (token.size() > kMaxJobTokenChars)
    return where + ": a job token has at most " +
           std::to_string(kMaxJobTokenChars) + " characters";
  for (size_t i = 0; i < token.size(); ++i)
    if (token[i] < 0x21 || token[i] > 0x7e)
      return where + ": character " + std::to_string(i + 1) +
             " of the job token is a space, a control character or not "
             "ASCII";
  return "";
}

bool runtime::loadJobToken(const std::string &path,
                           const char *fromEnvironment, std::string &token,
                           std::string &error) {
  token.clear();
  std::string fromFile;
  if (!path.empty()) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        (st.st_mode & 077) != 0) {
      error = "--job-token " + path +
              ": other users can read it (a job token is a secret: chmod "
              "600 it)";
      return false;
    }
    if (!format::readWholeFile(path, fromFile, error, kMaxJobTokenChars + 2)) {
      error = "--job-token " + error;
      return false;
    }
    // One line; its newline is not the token's.
    if (!fromFile.empty() && fromFile.back() == '\n')
      fromFile.pop_back();
    if (!fromFile.empty() && fromFile.back() == '\r')
      fromFile.pop_back();
    if (std::string problem = jobTokenProblem(fromFile, "--job-token " + path);
        !problem.empty()) {
      error = problem;
      return false;
    }
  }
  if (fromEnvironment) {
    std::string value = fromEnvironment;
    if (std::string problem = jobTokenProblem(value, kJobTokenVariable);
        !problem.empty()) {
      error = problem;
      return false;
    }
    if (!path.empty() && !equalInConstantTime(value, fromFile)) {
      error = "--job-token " + path + " and " + kJobTokenVariable +
              " hold different tokens: give one";
      return false;
    }
    token = value;
    return true;
  }
  token = fromFile;
  return true;
}

std::string runtime::freshJobToken(std::string &error) {
  uint8_t bytes[32];
  if (!auth::randomBytes(reinterpret_cast<char *>(bytes), sizeof bytes)) {
    error = std::string("cannot draw a job token from the kernel's "
                        "randomness: ") +
            std::strerror(errno);
    return "";
  }
  std::string token;
  appendHex(token, bytes, sizeof bytes);
  return token;
}

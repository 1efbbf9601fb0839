//===- PlanInputs.cpp - What a plan records to be planned again -----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/PlanInputs.h"

#include <algorithm>

using namespace dtfm::format;

bool dtfm::format::parsePlanOptions(const std::string &text,
                                    std::vector<PlanOption> &items,
                                    std::string &error) {
  items.clear();
  std::string body = text;
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n'; };
  // Outer braces, as PassOptions::print writes them.
  size_t first = 0, last = body.size();
  while (first < last && blank(body[first]))
    ++first;
  while (last > first && blank(body[last - 1]))
    --last;
  body = body.substr(first, last - first);
  if (!body.empty() && body.front() == '{' && body.back() == '}')
    body = body.substr(1, body.size() - 2);

  size_t i = 0;
  while (i < body.size()) {
    if (blank(body[i])) {
      ++i;
      continue;
    }
    size_t start = i;
    while (i < body.size() && !blank(body[i]) && body[i] != '=')
      ++i;
    if (i >= body.size() || body[i] != '=' || i == start) {
      error = "option '" + body.substr(start, i - start) +
              "' is not key=value";
      return false;
    }
    PlanOption item{body.substr(start, i - start), ""};
    ++i; // '='
    if (i < body.size() && body[i] == '{') {
      int depth = 0;
      size_t open = i;
      for (; i < body.size(); ++i) {
        depth += body[i] == '{';
        depth -= body[i] == '}';
        if (depth == 0)
          break;
      }
      if (depth != 0) {
        error = "option '" + item.key + "': unbalanced braces";
        return false;
      }
      item.value = body.substr(open + 1, i - open - 1);
      ++i; // '}'
    } else {
      size_t valueStart = i;
      while (i < body.size() && !blank(body[i]))
        ++i;
      item.value = body.substr(valueStart, i - valueStart);
    }
    items.push_back(std::move(item));
  }
  return true;
}

std::string
dtfm::format::joinPlanOptions(const std::vector<PlanOption> &items) {
  std::string text;
  for (const PlanOption &item : items) {
    if (!text.empty())
      text += ' ';
    bool braced = item.value.find_first_of(" \t\n") != std::string::npos;
    text += item.key + "=" + (braced ? "{" + item.value + "}" : item.value);
  }
  return text;
}

std::optional<std::string>
dtfm::format::findPlanOption(const std::vector<PlanOption> &items,
                             const std::string &key) {
  for (const PlanOption &item : items)
    if (item.key == key)
      return item.value;
  return std::nullopt;
}

void dtfm::format::setPlanOption(std::vector<PlanOption> &items,
                                 const std::string &key,
                                 const std::string &value) {
  auto it = std::find_if(items.begin(), items.end(),
                         [&](const PlanOption &o) { return o.key == key; });
  if (it == items.end()) {
    items.push_back({key, value});
    return;
  }
  it->value = value;
  items.erase(std::remove_if(std::next(it), items.end(),
                             [&](const PlanOption &o) { return o.key == key; }),
              items.end());
}

void dtfm::format::erasePlanOption(std::vector<PlanOption> &items,
                                   const std::string &key) {
  items.erase(std::remove_if(items.begin(), items.end(),
                             [&](const PlanOption &o) { return o.key == key; }),
              items.end());
}

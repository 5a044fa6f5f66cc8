// Test helper for the tool-call and reasoning parsers: feed a text whole, byte by byte or cut at random
// points, merge the deltas (checking their shape on the way), and check that every split agrees.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/serve/frontend/reasoning_parser.h"
#include "lathe/serve/frontend/tool_call_parser.h"

namespace lathe::serve::parser_test {

// "call_0", "call_1", ...: deterministic ids, so results of different splits compare equal.
inline std::function<std::string()> counting_ids() {
  auto next = std::make_shared<int>(0);
  return [next] { return "call_" + std::to_string((*next)++); };
}

// The pieces of `text` cut at the sorted offsets `cuts`.
inline std::vector<std::string_view> split_at(std::string_view text, std::vector<size_t> cuts) {
  std::vector<std::string_view> pieces;
  size_t prev = 0;
  for (size_t c : cuts) {
    pieces.push_back(text.substr(prev, c - prev));
    prev = c;
  }
  pieces.push_back(text.substr(prev));
  return pieces;
}

inline std::vector<std::string_view> bytes_of(std::string_view text) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < text.size(); ++i) cuts.push_back(i);
  return split_at(text, cuts);
}

inline std::vector<std::string_view> random_split(std::string_view text, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<size_t> cuts;
  if (text.size() > 1) {
    std::uniform_int_distribution<size_t> n_cuts(1, std::min<size_t>(text.size() - 1, 12));
    std::uniform_int_distribution<size_t> at(1, text.size() - 1);
    for (size_t n = n_cuts(gen); n > 0; --n) cuts.push_back(at(gen));
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  }
  return split_at(text, cuts);
}

// A tool-call parse, merged: content concatenated, one entry per call with its arguments concatenated.
struct ToolParse {
  std::string content;
  std::vector<ToolCallDelta> calls;
};

inline ToolParse parse_tools(ToolCallFormat format, const std::vector<std::string_view>& pieces) {
  ToolCallParser parser(format, counting_ids());
  ToolParse r;
  auto absorb = [&](ParsedDelta d) {
    r.content += d.content;
    for (ToolCallDelta& t : d.tool_calls) {
      if (t.index == static_cast<int>(r.calls.size())) {  // a call's first fragment: id and name
        EXPECT_FALSE(t.id.empty());
        EXPECT_FALSE(t.name.empty());
        r.calls.push_back(std::move(t));
      } else {  // later fragments: the arguments of the latest call only
        EXPECT_EQ(t.index + 1, static_cast<int>(r.calls.size()));
        EXPECT_TRUE(t.id.empty() && t.name.empty());
        if (!r.calls.empty()) r.calls.back().arguments += t.arguments;
      }
    }
  };
  for (std::string_view piece : pieces) absorb(parser.feed(piece));
  absorb(parser.finish());
  EXPECT_EQ(parser.n_calls(), static_cast<int>(r.calls.size()));
  return r;
}

inline void expect_same(const ToolParse& a, const ToolParse& b, const std::string& how) {
  SCOPED_TRACE(how);
  EXPECT_EQ(a.content, b.content);
  ASSERT_EQ(a.calls.size(), b.calls.size());
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].index, b.calls[i].index);
    EXPECT_EQ(a.calls[i].id, b.calls[i].id);
    EXPECT_EQ(a.calls[i].name, b.calls[i].name);
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments);
  }
}

// The text fed whole; checks that byte-by-byte and 30 random splits give the same.
inline ToolParse parse_tools_all_ways(ToolCallFormat format, std::string_view text) {
  ToolParse whole = parse_tools(format, {text});
  expect_same(whole, parse_tools(format, bytes_of(text)), "byte by byte");
  for (uint64_t seed = 0; seed < 30; ++seed)
    expect_same(whole, parse_tools(format, random_split(text, seed)), "random split " + std::to_string(seed));
  return whole;
}

inline ReasoningDelta parse_reasoning(ReasoningFormat format, bool starts_in_reasoning,
                                      const std::vector<std::string_view>& pieces) {
  ReasoningParser parser(format, starts_in_reasoning);
  ReasoningDelta r;
  auto absorb = [&](const ReasoningDelta& d) {
    r.reasoning += d.reasoning;
    r.content += d.content;
  };
  for (std::string_view piece : pieces) absorb(parser.feed(piece));
  absorb(parser.finish());
  return r;
}

inline ReasoningDelta parse_reasoning_all_ways(ReasoningFormat format, std::string_view text,
                                               bool starts_in_reasoning = false) {
  ReasoningDelta whole = parse_reasoning(format, starts_in_reasoning, {text});
  auto check = [&](const ReasoningDelta& other, const std::string& how) {
    SCOPED_TRACE(how);
    EXPECT_EQ(whole.reasoning, other.reasoning);
    EXPECT_EQ(whole.content, other.content);
  };
  check(parse_reasoning(format, starts_in_reasoning, bytes_of(text)), "byte by byte");
  for (uint64_t seed = 0; seed < 30; ++seed)
    check(parse_reasoning(format, starts_in_reasoning, random_split(text, seed)),
          "random split " + std::to_string(seed));
  return whole;
}

}  // namespace lathe::serve::parser_test

#include "lathe/serve/frontend/reasoning_parser.h"

#include "lathe/base/error.h"
#include "lathe/serve/frontend/marker_scan.h"

namespace lathe::serve {
namespace {

struct Markers {
  std::string_view start, end;
};

Markers markers_of(ReasoningFormat format) {
  switch (format) {
    case ReasoningFormat::kQwen3: return {"<think>", "</think>"};
    case ReasoningFormat::kGemma4: return {"<|channel>thought", "<channel|>"};
    case ReasoningFormat::kNone:
    case ReasoningFormat::kCount: break;
  }
  return {};
}


}  // namespace

ReasoningFormat detect_reasoning_format(std::string_view model_type, std::string_view chat_template) {
  if (!chat_template.empty()) {
    if (chat_template.find("<|channel>") != std::string_view::npos) return ReasoningFormat::kGemma4;
    if (chat_template.find("<think>") != std::string_view::npos || chat_template.find("</think>") != std::string_view::npos) return ReasoningFormat::kQwen3;
    return ReasoningFormat::kNone;
  }
  if (model_type.starts_with("qwen3")) return ReasoningFormat::kQwen3;
  if (model_type.starts_with("gemma4")) return ReasoningFormat::kGemma4;
  return ReasoningFormat::kNone;
}

std::string_view to_string(ReasoningFormat format) {
  switch (format) {
    case ReasoningFormat::kNone: return "none";
    case ReasoningFormat::kQwen3: return "qwen3";
    case ReasoningFormat::kGemma4: return "gemma4";
    case ReasoningFormat::kCount: break;
  }
  return "?";
}

std::optional<ReasoningFormat> reasoning_format_from_string(std::string_view name) {
  for (int i = 0; i < static_cast<int>(ReasoningFormat::kCount); ++i)
    if (to_string(static_cast<ReasoningFormat>(i)) == name) return static_cast<ReasoningFormat>(i);
  if (name == "deepseek_r1") return ReasoningFormat::kQwen3;
  return std::nullopt;
}

bool prompt_opens_reasoning(ReasoningFormat format, std::string_view prompt) {
  // Only the end of the prompt counts: a marker in a message's text (a user asking about <think>) must
  // not start the output in reasoning.
  Markers m = markers_of(format);
  if (m.start.empty()) return false;
  prompt = prompt.substr(0, detail::trailing_space_start(prompt, prompt.size()));
  return prompt.size() >= m.start.size() && prompt.substr(prompt.size() - m.start.size()) == m.start;
}

ReasoningParser::ReasoningParser(ReasoningFormat format, bool starts_in_reasoning) : format_(format) {
  LATHE_CHECK_ARG(format < ReasoningFormat::kCount, "[ReasoningParser] unknown reasoning format ",
                  static_cast<int>(format));
  Markers m = markers_of(format);
  start_ = m.start;
  end_ = m.end;
  if (format == ReasoningFormat::kNone) state_ = State::kContent;
  else if (starts_in_reasoning) state_ = State::kReasoningStart;
}

ReasoningDelta ReasoningParser::feed(std::string_view text) {
  LATHE_CHECK_ARG(!finished_, "[ReasoningParser] feed after finish");
  pending_.append(text);
  return run(false);
}

ReasoningDelta ReasoningParser::finish() {
  LATHE_CHECK_ARG(!finished_, "[ReasoningParser] finish called twice");
  finished_ = true;
  return run(true);
}

ReasoningDelta ReasoningParser::run(bool at_end) {
  ReasoningDelta out;
  // As in ToolCallParser::run: an incomplete UTF-8 sequence at the tail waits for its other bytes.
  const size_t limit = at_end ? pending_.size() : pending_.size() - detail::incomplete_utf8_suffix(pending_);
  size_t pos = 0;
  while (pos < limit) {
    size_t consumed = 0;
    if (!step(std::string_view(pending_).substr(pos, limit - pos), at_end, out, consumed)) {
      LATHE_ASSERT(!at_end, "the reasoning parser asked for more text at the end");
      break;
    }
    LATHE_ASSERT(consumed > 0 && consumed <= limit - pos);
    pos += consumed;
  }
  pending_.erase(0, pos);
  return out;
}

bool ReasoningParser::step(std::string_view text, bool at_end, ReasoningDelta& out, size_t& consumed) {
  using detail::cut_before_marker;
  using detail::leading_space;
  switch (state_) {
    case State::kContent:
      out.content.append(text);
      consumed = text.size();
      return true;

    case State::kStart: {  // a block opens here, or the output is all content
      size_t space = leading_space(text);
      std::string_view rest = text.substr(space);
      if (rest.starts_with(start_)) {
        state_ = State::kReasoningStart;
        consumed = space + start_.size();
        return true;
      }
      if (!at_end && (rest.empty() || start_.starts_with(rest))) return false;  // may still be the marker
      state_ = State::kContent;
      out.content.append(text);  // including the leading whitespace: nothing was dropped
      consumed = text.size();
      return true;
    }

    case State::kReasoningStart:
    case State::kAfterReasoning: {  // drop the whitespace after a marker
      size_t space = leading_space(text);
      if (space == text.size() && !at_end) return false;
      state_ = state_ == State::kReasoningStart ? State::kReasoning : State::kContent;
      if (space == 0) return step(text, at_end, out, consumed);
      consumed = space;
      return true;
    }

    case State::kReasoning: {
      detail::MarkerCut cut = cut_before_marker(text, end_, at_end);
      if (cut.text > 0) {
        out.reasoning.append(text.substr(0, cut.text));
        consumed = cut.text;
      } else if (cut.space > 0) {
        consumed = cut.space;
      } else if (cut.marker) {
        state_ = State::kAfterReasoning;
        consumed = end_.size();
      } else {
        return false;
      }
      return true;
    }
  }
  return false;
}

}  // namespace lathe::serve

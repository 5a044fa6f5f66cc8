#include "lathe/serve/loadgen/stream_record.h"

#include <nlohmann/json.hpp>

namespace lathe::loadgen {

size_t SseParser::next_event_end() const {
  // Events end with a blank line: "\n\n" or "\r\n\r\n".
  const size_t lf = buffer_.find("\n\n"), crlf = buffer_.find("\r\n\r\n");
  if (lf == std::string::npos && crlf == std::string::npos) return std::string::npos;
  if (crlf != std::string::npos && (lf == std::string::npos || crlf < lf)) return crlf + 4;
  return lf + 2;
}

bool SseParser::data_of(const std::string& event, std::string& data) {
  bool found = false;
  size_t at = 0;
  while (at < event.size()) {
    size_t nl = event.find('\n', at);
    if (nl == std::string::npos) nl = event.size();
    std::string_view line(event.data() + at, nl - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.substr(0, 5) == "data:") {
      std::string_view v = line.substr(5);
      if (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      if (found) data += '\n';  // several data lines join with newlines (SSE)
      data.append(v);
      found = true;
    }
    at = nl + 1;
  }
  return found;
}

void StreamRecorder::on_data(const std::string& data, double t) {
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  const nlohmann::json j = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    if (error_.empty()) error_ = "unparsable stream chunk: " + data.substr(0, 200);
    return;
  }
  if (j.contains("error")) {
    if (error_.empty()) error_ = "stream error: " + j["error"].dump().substr(0, 300);
    return;
  }
  if (j.contains("usage") && j["usage"].is_object() && j["usage"].contains("completion_tokens"))
    usage_tokens_ = j["usage"]["completion_tokens"].get<int64_t>();
  const auto it = j.find("choices");
  if (it == j.end() || !it->is_array() || it->empty()) return;
  const nlohmann::json& c = (*it)[0];
  // A completions chunk is a token even when its text is empty (vLLM and llama-server stream one chunk
  // per token; a special token or half a character adds no text), except an empty closing chunk after
  // the tokens; a chat chunk counts when it carries content (the first, role-only chunk does not).
  const auto text = c.find("text");
  const auto finish = c.find("finish_reason");
  const bool closing = finish != c.end() && !finish->is_null();
  const bool completion_token = text != c.end() && text->is_string() &&
                                !(text->get_ref<const std::string&>().empty() && closing && chunks_ > 0);
  const auto delta = c.find("delta");
  const bool chat_token = delta != c.end() && delta->is_object() && delta->contains("content") &&
                          (*delta)["content"].is_string() && !(*delta)["content"].get_ref<const std::string&>().empty();
  if (!completion_token && !chat_token) return;
  if (chunks_ == 0) rec_.ttft_s = t;
  else rec_.itl_s.push_back(t - last_token_t_);
  last_token_t_ = t;
  ++chunks_;
}

RequestRecord StreamRecorder::finish(double t, int http_status, const std::string& transport_error) {
  rec_.e2e_s = t;
  rec_.output_tokens = usage_tokens_ >= 0 ? usage_tokens_ : chunks_;
  if (!transport_error.empty()) rec_.error = transport_error;
  else if (http_status != 200) rec_.error = "HTTP " + std::to_string(http_status) + (error_.empty() ? "" : ": " + error_);
  else if (!error_.empty()) rec_.error = error_;
  else if (chunks_ == 0) rec_.error = "the stream carried no token";
  else if (!done_) rec_.error = "the stream ended without data: [DONE]";
  rec_.ok = rec_.error.empty();
  return rec_;
}

}  // namespace lathe::loadgen

// Turns a streamed OpenAI completion response (server-sent events) into a RequestRecord: the time of each
// `data:` event that carries text is a token arrival (TTFT, inter-token gaps), the usage chunk gives the
// token counts. Transport-free, so every HTTP client of `lathe bench serve` shares it.
#pragma once

#include <string>
#include <string_view>

#include "lathe/serve/loadgen/report.h"

namespace lathe::loadgen {

// Splits a byte stream into SSE events (lines up to a blank line; the `data:` field's value).
class SseParser {
 public:
  // Appends bytes; calls on_data(value) for every complete event's data field.
  template <class F>
  void feed(std::string_view bytes, F&& on_data) {
    buffer_.append(bytes);
    size_t end;
    while ((end = next_event_end()) != std::string::npos) {
      const std::string event = buffer_.substr(0, end);
      buffer_.erase(0, end);
      std::string data;
      if (data_of(event, data)) on_data(data);
    }
  }

 private:
  size_t next_event_end() const;  // one past the blank line that ends the first event, or npos
  static bool data_of(const std::string& event, std::string& data);
  std::string buffer_;
};

// Builds the record of one request event by event. Times in seconds since the request was sent.
class StreamRecorder {
 public:
  explicit StreamRecorder(int64_t prompt_tokens) { rec_.prompt_tokens = prompt_tokens; }
  // One `data:` value received at `t`: a completion chunk (JSON), "[DONE]", or an error object.
  void on_data(const std::string& data, double t);
  // The response ended at `t` (last byte); http_status != 200 or a transport error fails the request.
  RequestRecord finish(double t, int http_status, const std::string& transport_error = "");

 private:
  RequestRecord rec_;
  int64_t chunks_ = 0, usage_tokens_ = -1;
  double last_token_t_ = 0;
  bool done_ = false;
  std::string error_;
};

}  // namespace lathe::loadgen

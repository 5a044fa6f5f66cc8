// Stop strings for streamed generation (OpenAI's `stop`): the text decoded so far is cut at the first
// stop string, and text that might be the start of one is held back until the next tokens decide, so a
// client never receives part of a stop string that a later token completes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lathe {

class StopStringMatcher {
 public:
  // Throws InvalidArgument for an empty stop string. include_stop: the matched string stays in the output
  // (vLLM's include_stop_str_in_output).
  explicit StopStringMatcher(std::vector<std::string> stops, bool include_stop = false);

  struct Output {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string was found: `text` ends where the output ends
  };

  // Appends newly decoded text (whole UTF-8 characters, as StreamDecoder gives them). After a stop
  // every push returns nothing.
  Output push(std::string_view text);
  // Generation ended without a stop string: the text still held back.
  std::string flush();

  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  bool include_stop_;
  std::string pending_;  // decoded, not yet emitted: shorter than the longest stop string
  bool stopped_ = false;
};

}  // namespace lathe

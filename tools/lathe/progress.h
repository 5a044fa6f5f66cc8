// Progress display for long commands: on a terminal one line redrawn in place (at most 10 times a
// second); otherwise (logs, CI) a plain line at most every `log_seconds`, so logs stay readable.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include <unistd.h>

namespace lathe::cli {

class Progress {
 public:
  explicit Progress(double log_seconds = 10.0)
      : tty_(::isatty(STDERR_FILENO) != 0), log_seconds_(log_seconds), start_(Clock::now()), last_(start_) {}

  bool is_tty() const { return tty_; }
  double elapsed() const { return seconds(Clock::now() - start_); }

  // done / total in [0, 1] drives the bar; `text` follows it. `force` draws regardless of the rate limit.
  void update(double fraction, const std::string& text, bool force = false) {
    const auto now = Clock::now();
    const double since = seconds(now - last_);
    if (!force && since < (tty_ ? 0.1 : log_seconds_)) return;
    last_ = now;
    if (fraction < 0) fraction = 0;
    if (fraction > 1) fraction = 1;
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(fraction * kWidth + 0.5);
    std::string bar(filled, '#');
    bar += std::string(kWidth - filled, '.');
    if (tty_) {
      std::fprintf(stderr, "\r\033[K[%s] %5.1f%% %s", bar.c_str(), fraction * 100, text.c_str());
      drawn_ = true;
    } else {
      std::fprintf(stderr, "%5.1f%% %s\n", fraction * 100, text.c_str());
    }
    std::fflush(stderr);
  }
  // Ends the redrawn line so the next output starts on a fresh one.
  void finish() {
    if (tty_ && drawn_) std::fputc('\n', stderr);
    drawn_ = false;
  }
  // A message that must not be overwritten by the bar.
  void println(const std::string& line) {
    if (tty_ && drawn_) std::fputs("\r\033[K", stderr);
    std::fprintf(stderr, "%s\n", line.c_str());
    drawn_ = false;
    last_ = Clock::time_point{};
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
  bool tty_;
  double log_seconds_;
  Clock::time_point start_, last_;
  bool drawn_ = false;
};

}  // namespace lathe::cli

#include "lathe/rollout/command_reward.h"

#include <cmath>
#include <limits>

#include "lathe/base/error.h"

namespace lathe::rollout {

CommandReward::CommandReward(std::vector<std::string> argv, double timeout_s) : timeout_s_(timeout_s) {
  LATHE_CHECK_ARG(!argv.empty() && !argv[0].empty(), "[reward command] the command is empty");
  LATHE_CHECK_ARG(timeout_s_ > 0 && std::isfinite(timeout_s_), "[reward command] timeout must be positive, got ",
                  timeout_s_);
  for (const std::string& a : argv) shown_ += (shown_.empty() ? "" : " ") + a;
  try {
    process_ = std::make_unique<JsonLinesProcess>(std::move(argv), str_cat("[reward command] ", shown_));
  } catch (const EnvironmentError& e) {
    throw InvalidArgument(str_cat("[reward command] ", shown_, ": cannot start it: ", e.how()));
  }
}

CommandReward::~CommandReward() = default;

void CommandReward::fail(const std::string& why) {
  failed_ = str_cat("[reward command] ", shown_, ": ", why);
  throw Error(failed_);
}

std::vector<double> CommandReward::score(const nlohmann::json& requests) {
  if (!failed_.empty()) throw Error(failed_);
  LATHE_ASSERT(requests.is_array());
  const auto timeout = std::chrono::milliseconds(std::llround(timeout_s_ * 1000));
  std::string answer;
  try {
    answer = process_->exchange(requests.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), timeout);
  } catch (const EnvironmentError& e) {
    if (e.kind() == EnvironmentError::Kind::kTimeout)
      fail(str_cat("no answer within ", timeout_s_, " s (the reward's timeout) (killed)"));
    fail(str_cat("it closed its stdout before answering (it ", e.how(), ")"));
  }
  const nlohmann::json a = nlohmann::json::parse(answer, nullptr, /*allow_exceptions=*/false);
  const auto shown = [&] { return answer.size() > 200 ? answer.substr(0, 200) + "..." : answer; };
  if (a.is_discarded()) fail(str_cat("its answer is not JSON: ", shown()));
  if (!a.is_array() || a.size() != requests.size())
    fail(str_cat("expected a JSON array of ", requests.size(), " numbers or nulls (one per request), got: ", shown()));
  std::vector<double> out;
  for (const nlohmann::json& x : a) {
    if (x.is_null()) {
      out.push_back(std::numeric_limits<double>::quiet_NaN());
    } else if (x.is_number() && std::isfinite(x.get<double>())) {
      out.push_back(x.get<double>());
    } else {
      fail(str_cat("an entry of its answer is not a finite number or null: ", shown()));
    }
  }
  return out;
}

}  // namespace lathe::rollout

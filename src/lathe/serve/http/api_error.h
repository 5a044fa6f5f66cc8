// OpenAI-style API errors: {"error": {"message", "type", "param", "code"}} with the HTTP status that goes
// with them (serving spec §9). Thrown by request parsing and by ServingBackend::submit, caught by the
// server, which answers the request with it and keeps serving.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

namespace lathe::serve {

struct ApiError {
  int status = 400;                     // HTTP status
  std::string type;                     // "invalid_request_error", "authentication_error", ...
  std::string message;
  std::optional<std::string> param;     // the offending request field, if one
  std::optional<std::string> code;      // "context_length_exceeded", "model_not_found", ...

  nlohmann::json to_json() const;       // {"error": {...}}
};

// The error kinds of spec §9's table, each with its status, type and code.
ApiError invalid_request(std::string message, std::optional<std::string> param = std::nullopt);
ApiError context_length_exceeded(std::string message, std::optional<std::string> param = std::nullopt);
ApiError invalid_api_key();
ApiError model_not_found(const std::string& model);
ApiError route_not_found(const std::string& method, const std::string& target);
ApiError body_too_large(size_t limit_bytes);
ApiError rate_limited(std::string message);
ApiError server_error(std::string message);
ApiError service_unavailable(std::string message);

// An ApiError as an exception, so parsing can stop at the first bad field.
class ApiException : public std::runtime_error {
 public:
  explicit ApiException(ApiError e) : std::runtime_error(e.message), error_(std::move(e)) {}
  const ApiError& error() const { return error_; }

 private:
  ApiError error_;
};

}  // namespace lathe::serve

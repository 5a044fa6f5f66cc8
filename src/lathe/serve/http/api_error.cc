#include "lathe/serve/http/api_error.h"

#include "lathe/base/error.h"

namespace lathe::serve {

nlohmann::json ApiError::to_json() const {
  nlohmann::json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (param) e["param"] = *param;
  if (code) e["code"] = *code;
  return {{"error", std::move(e)}};
}

ApiError invalid_request(std::string message, std::optional<std::string> param) {
  return {.status = 400, .type = "invalid_request_error", .message = std::move(message), .param = std::move(param)};
}

ApiError context_length_exceeded(std::string message, std::optional<std::string> param) {
  return {.status = 400, .type = "invalid_request_error", .message = std::move(message), .param = std::move(param),
          .code = "context_length_exceeded"};
}

ApiError invalid_api_key() {
  return {.status = 401, .type = "authentication_error",
          .message = "Incorrect API key provided (expected 'Authorization: Bearer <key>')", .code = "invalid_api_key"};
}

ApiError model_not_found(const std::string& model) {
  return {.status = 404, .type = "invalid_request_error",
          .message = str_cat("The model '", model, "' does not exist (GET /v1/models lists the served names)"),
          .param = "model", .code = "model_not_found"};
}

ApiError route_not_found(const std::string& method, const std::string& target) {
  return {.status = 404, .type = "invalid_request_error", .message = str_cat("No route for ", method, " ", target),
          .code = "not_found"};
}

ApiError body_too_large(size_t limit_bytes) {
  return {.status = 413, .type = "invalid_request_error",
          .message = str_cat("Request body is larger than the server's limit of ", limit_bytes, " bytes"),
          .code = "request_too_large"};
}

ApiError rate_limited(std::string message) {
  return {.status = 429, .type = "rate_limit_error", .message = std::move(message)};
}

ApiError server_error(std::string message) {
  return {.status = 500, .type = "server_error", .message = std::move(message)};
}

ApiError service_unavailable(std::string message) {
  return {.status = 503, .type = "server_error", .message = std::move(message), .code = "service_unavailable"};
}

}  // namespace lathe::serve

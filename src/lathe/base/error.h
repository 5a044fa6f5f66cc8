// Typed errors for the library's boundaries and always-on invariant checks (STYLE §12).
// LATHE_CHECK_ARG: bad user input at a public entry point -> typed exception with a message.
// LATHE_ASSERT: an internal invariant -> abort with file:line (a bug in lathe, not in the input).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace lathe {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class InvalidArgument : public Error {
 public:
  using Error::Error;
};
class NotImplemented : public Error {
 public:
  using Error::Error;
};
class IoError : public Error {
 public:
  using Error::Error;
};
class FormatError : public Error {  // a file exists but its content is malformed
 public:
  using Error::Error;
};

template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

[[noreturn]] void assert_fail(const char* expr, const char* file, int line, const std::string& msg);

}  // namespace lathe

#define LATHE_CHECK_ARG(cond, ...) \
  do {                             \
    if (!(cond)) throw ::lathe::InvalidArgument(::lathe::str_cat(__VA_ARGS__)); \
  } while (0)

#define LATHE_CHECK_FORMAT(cond, ...) \
  do {                                \
    if (!(cond)) throw ::lathe::FormatError(::lathe::str_cat(__VA_ARGS__)); \
  } while (0)

#define LATHE_ASSERT(cond, ...)                                                          \
  do {                                                                                   \
    if (!(cond)) ::lathe::assert_fail(#cond, __FILE__, __LINE__, ::lathe::str_cat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)

#ifdef NDEBUG
#define LATHE_DASSERT(cond, ...) ((void)0)
#else
#define LATHE_DASSERT(cond, ...) LATHE_ASSERT(cond __VA_OPT__(, ) __VA_ARGS__)
#endif

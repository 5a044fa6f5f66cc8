#include "lathe/base/context.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "lathe/base/error.h"

namespace lathe {
namespace {
thread_local Context* tls_current = nullptr;
}  // namespace

int default_thread_count() {
  const char* s = std::getenv("LATHE_NUM_THREADS");
  if (!s || !*s) return 0;  // unset or empty: all hardware threads
  char* end = nullptr;
  errno = 0;
  const long long n = std::isdigit(static_cast<unsigned char>(s[0])) ? std::strtoll(s, &end, 10) : -1;
  LATHE_CHECK_ARG(end && *end == '\0' && errno != ERANGE && n >= 0 && n <= kMaxThreadCount, "LATHE_NUM_THREADS='", s,
                  "' is not a thread count (accepted: an integer in [1, ", kMaxThreadCount,
                  "], or 0 / unset for all hardware threads)");
  return static_cast<int>(n);
}

Context& current_context() {
  if (tls_current) return *tls_current;
  static Context process_default(default_thread_count());
  return process_default;
}

Context* scoped_context() { return tls_current; }

ContextScope::ContextScope(Context* ctx) : previous_(tls_current) { tls_current = ctx; }
ContextScope::~ContextScope() { tls_current = previous_; }

}  // namespace lathe

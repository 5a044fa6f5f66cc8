#include "lathe/base/context.h"

#include <cstdlib>

namespace lathe {
namespace {
thread_local Context* tls_current = nullptr;
}  // namespace

int default_thread_count() {
  if (const char* s = std::getenv("LATHE_NUM_THREADS")) return std::atoi(s);
  return 0;
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

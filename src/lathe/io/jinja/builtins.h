// Global functions a chat template can call: Jinja's range(), namespace(), dict(), and the two
// transformers adds, raise_exception(msg) and strftime_now(format).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "lathe/io/jinja/render_options.h"
#include "lathe/io/jinja/value.h"

namespace lathe::jinja {

struct BuiltinEnv {
  const RenderOptions* options = nullptr;
  // Every namespace() created, so the renderer can clear them at the end: a namespace may hold
  // itself (`set ns.me = ns`), a shared_ptr cycle that would otherwise leak.
  std::vector<ObjectPtr>* namespaces = nullptr;
};

// The global function `name`, or undefined when there is none. The returned callable refers to
// `env`, which must outlive it (both live for one render).
Value lookup_builtin(std::string_view name, const BuiltinEnv& env);

}  // namespace lathe::jinja

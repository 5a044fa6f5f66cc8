// Jinja filters (`x | name(args)`), following jinja2/filters.py, with transformers' override of
// `tojson` (json.dumps with ensure_ascii=False, key order kept, optional indent).
#pragma once

#include <string_view>

#include "lathe/io/jinja/render_options.h"
#include "lathe/io/jinja/value.h"

namespace lathe::jinja {

bool has_filter(std::string_view name);
// args.positional are the filter's arguments after the input. Throws EvalError for an unknown
// filter or bad arguments, LimitError when a result exceeds the render limits.
Value apply_filter(std::string_view name, const Value& input, const CallArgs& args, const RenderOptions& limits);

// Filters over sequences (sort, unique, map, select, ...), defined in sequence_filters.cc.
// Returns false when `name` is not one of them.
bool apply_sequence_filter(std::string_view name, const Value& input, const CallArgs& args,
                           const RenderOptions& limits, Value& result);
// Looks up a dotted attribute path ("a.b", "items.0") as map(attribute=...) does.
Value attribute_path(const Value& v, std::string_view path);

}  // namespace lathe::jinja

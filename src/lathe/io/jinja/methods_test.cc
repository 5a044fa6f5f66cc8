// Tests of the Python str and dict methods templates call (strip, split, startswith, get, ...).
#include "lathe/io/jinja/methods.h"

#include <gtest/gtest.h>

#include "lathe/io/jinja/render_case_test_util.h"

namespace lathe::jinja {
namespace {

using testing_util::render_error;
using testing_util::RenderCase;

const RenderCase kMethodCases[] = {
    {"strip_family", R"J([{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ '\n\nx\n'.strip('\n') }}][{{ 'xxaxx'.lstrip('x') }}])J",
     R"J({"s": "  a b  "})J",
     R"J([a b][a b  ][  a b][x][axx])J"},
    {"split_family", R"J({{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'x</think>y'.split('</think>')[-1] }} {{ 'l1\nl2\r\nl3'.splitlines() }})J",
     R"J({})J",
     R"J(['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] ['a,b', 'c'] y ['l1', 'l2', 'l3'])J"},
    {"prefix_suffix", R"J({{ s.startswith('<tool') }} {{ s.endswith('>') }} {{ s.startswith(('a', '<')) }} {{ s.endswith('x') }})J",
     R"J({"s": "<tool_response>"})J",
     R"J(True True True False)J"},
    {"replace_case", R"J({{ 'aXbX'.replace('X', 'y') }} {{ 'aXbX'.replace('X', 'y', 1) }} {{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }})J",
     R"J({})J",
     R"J(ayby aybX AB ab Hello World Hello)J"},
    {"find_count_join_format", R"J({{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'hello'.count('l') }} {{ ', '.join(['a', 'b']) }} {{ '{} and {}'.format(1, 'x') }} {{ '{0}{name}'.format('a', name='b') }})J",
     R"J({})J",
     R"J(2 3 -1 2 a, b 1 and x ab)J"},
    {"predicates", R"J({{ '123'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }} {{ 'AB'.isupper() }} {{ 'ab'.islower() }} {{ 'a1'.isalnum() }})J",
     R"J({})J",
     R"J(True True True True True True)J"},
    {"padding", R"J([{{ 'ab'.center(6, '*') }}][{{ 'ab'.ljust(4) }}][{{ 'ab'.rjust(4, '.') }}][{{ '42'.zfill(5) }}])J",
     R"J({})J",
     R"J([**ab**][ab  ][..ab][00042])J"},
    {"dict_methods", R"J({{ d.items()|list }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 'dflt') }})J",
     R"J({"d": {"a": 1, "b": [2]}})J",
     R"J([('a', 1), ('b', [2])] ['a', 'b'] [1, [2]] 1 None dflt)J"},
    {"method_wins_over_key_like_jinja2", R"J({{ d.get('items') }} {{ d['items'] }} {{ (d.items()|list)[0][0] }})J",
     R"J({"d": {"items": 5}})J",
     R"J(5 5 items)J"},
    {"chained_like_qwen3", R"J({{ c.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') }}|{{ c.split('</think>')[-1].lstrip('\n') }})J",
     R"J({"c": "<think>\nreason\n</think>\n\nanswer"})J",
     R"J(reason|answer)J"},
};

TEST(Methods, MatchJinja2) { testing_util::expect_renders(kMethodCases); }

TEST(Methods, MutatingMethodsAreRejectedLikeTheSandbox) {
  // transformers' ImmutableSandboxedEnvironment forbids list.append / dict.update.
  EXPECT_EQ(render_error("{% set l = [] %}{{ l.append(1) }}").kind(), ChatTemplateError::Kind::kRuntime);
  EXPECT_EQ(render_error("{% set d = {} %}{{ d.update({'a': 1}) }}").kind(), ChatTemplateError::Kind::kRuntime);
}

TEST(Methods, BadArguments) {
  for (const char* source : {"{{ 'a'.split('') }}", "{{ 'a'.startswith(1) }}", "{{ 'a'.index('z') }}", "{{ '{}'.format() }}",
                             "{{ {}.get() }}"}) {
    SCOPED_TRACE(source);
    EXPECT_EQ(render_error(source).kind(), ChatTemplateError::Kind::kRuntime);
  }
}

}  // namespace
}  // namespace lathe::jinja

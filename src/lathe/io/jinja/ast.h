// The syntax tree the parser builds and the interpreter walks. Nodes are plain tagged structs
// (one kind enum each) rather than a class hierarchy: the interpreter switches on the kind.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lathe/io/jinja/value.h"

namespace lathe::jinja {

enum class ExprKind : uint8_t {
  kLiteral,   // literal
  kName,      // name
  kList,      // args = items
  kTuple,     // args = items
  kDict,      // args = key0, value0, key1, value1, ...
  kGetAttr,   // args[0].name
  kGetItem,   // args[0][args[1]]
  kSlice,     // args[0][args[1]:args[2]:args[3]], absent parts are nullptr
  kCall,      // args[0](args[1..], kwargs)
  kFilter,    // args[0] | name(args[1..], kwargs)
  kTest,      // args[0] is [not] name(args[1..], kwargs)
  kUnary,     // op args[0]: kNot, kNeg, kPos
  kBinary,    // args[0] op args[1]
  kCompare,   // args[0] ops[0] args[1] ops[1] args[2] ...: Python's chained comparison
  kCondExpr,  // args[0] if args[1] else args[2] (args[2] may be nullptr)
  kCount
};

enum class Op : uint8_t {
  kNone, kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kConcat, kEq, kNe, kLt, kLe, kGt, kGe,
  kIn, kNotIn, kAnd, kOr, kNot, kNeg, kPos, kCount
};

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  size_t offset = 0;  // source byte offset, for error positions
  Op op = Op::kNone;
  bool negated = false;  // `is not`
  std::string name;
  Value literal;
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> kwargs;
  std::vector<Op> ops;  // kCompare only
};
using ExprPtr = std::unique_ptr<Expr>;

enum class StmtKind : uint8_t {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // branches (cond, body); else_body
  kFor,          // targets in expr [if cond]; body; else_body
  kSet,          // targets (or target.attr) = expr
  kSetBlock,     // {% set target %}body{% endset %}, optional filter chain in expr (args[0] is nullptr)
  kMacro,        // name(params = defaults) body
  kFilterBlock,  // {% filter expr %}body{% endfilter %}; expr's innermost args[0] is nullptr
  kBreak,
  kContinue,
  kScope,        // body rendered as is: {% generation %} (transformers' assistant mask marker)
  kCount
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  StmtKind kind = StmtKind::kText;
  size_t offset = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::string> targets;  // for/set names; one name when attr is set
  std::string attr;                  // `set ns.attr = ...`
  std::string name;                  // macro name
  std::vector<std::string> params;   // macro parameters
  std::vector<ExprPtr> defaults;     // per parameter, nullptr when none
};

struct Template {
  std::string source;  // newline-normalised source, for error positions
  Body body;
};

}  // namespace lathe::jinja

// Tree-walking Jinja interpreter (see interpreter.h).
#include "lathe/io/jinja/interpreter.h"

#include "lathe/io/jinja/builtins.h"
#include "lathe/io/jinja/filters.h"
#include "lathe/io/jinja/methods.h"
#include "lathe/io/jinja/operators.h"
#include "lathe/io/jinja/predicates.h"
#include "lathe/io/jinja/py_format.h"
#include "lathe/io/jinja/template_error.h"

namespace lathe::jinja {

namespace {

struct Scope {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Scope> parent;

  const Value* find(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent.get())
      for (const auto& [k, v] : s->vars)
        if (k == name) return &v;
    return nullptr;
  }
  void set(const std::string& name, Value v) {
    for (auto& [k, old] : vars) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(name, std::move(v));
  }
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Flow : uint8_t { kNormal, kBreak, kContinue, kCount };

class Renderer {
 public:
  Renderer(const Template& t, const RenderOptions& o) : t_(t), o_(o) {
    env_.options = &o_;
    env_.namespaces = &namespaces_;
  }
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;
  ~Renderer() {
    // Break reference cycles through namespaces (`set ns.self = ns`) and scopes.
    for (const ObjectPtr& ns : namespaces_) ns->entries.clear();
  }

  std::string render(const Value& context) {
    scope_ = std::make_shared<Scope>();
    if (context.is_object())
      for (const auto& [k, v] : context.object().entries) scope_->set(k, v);
    std::string out;
    exec_body(t_.body, out);
    scope_.reset();
    return out;
  }

 private:
  // Restores the current scope when a loop iteration or macro call ends (also on errors).
  struct ScopeGuard {
    ScopeGuard(Renderer& r, ScopePtr s) : r_(r), saved_(std::move(r.scope_)) { r_.scope_ = std::move(s); }
    ~ScopeGuard() { r_.scope_ = std::move(saved_); }
    Renderer& r_;
    ScopePtr saved_;
  };

  [[noreturn]] void fail_at(size_t offset, const EvalError& e) const {
    const SourcePosition p = locate(t_.source, offset);
    using K = ChatTemplateError::Kind;
    const K kind = dynamic_cast<const RaisedError*>(&e) ? K::kRaised
                   : dynamic_cast<const LimitError*>(&e) ? K::kLimit
                                                          : K::kRuntime;
    throw ChatTemplateError(kind, e.what(), p.line, p.column);
  }

  void emit(std::string& out, std::string_view s) const {
    if (out.size() + s.size() > o_.max_output_bytes)
      throw LimitError("output longer than the limit (" + std::to_string(o_.max_output_bytes) + " bytes)");
    out += s;
  }

  void count_step() {
    if (++steps_ > o_.max_loop_iterations)
      throw LimitError("more than " + std::to_string(o_.max_loop_iterations) + " loop iterations and macro calls");
  }

  Flow exec_body(const Body& body, std::string& out) {
    for (const auto& s : body) {
      const Flow f = exec(*s, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  // RAII recursion counter for exec / eval: deep template recursion fails with a LimitError instead of
  // overflowing the stack (macro recursion inside nested blocks multiplies the depth).
  struct RenderDepth {
    RenderDepth(int& depth, int limit) : depth_(depth) {
      if (++depth_ > limit) {
        --depth_;
        throw LimitError("template recursion deeper than " + std::to_string(limit) + " levels");
      }
    }
    ~RenderDepth() { --depth_; }
    int& depth_;
  };

  Flow exec(const Stmt& s, std::string& out) {
    RenderDepth guard(render_depth_, o_.max_render_depth);
    try {
      return exec_inner(s, out);
    } catch (const EvalError& e) {
      fail_at(s.offset, e);
    }
  }

  Flow exec_inner(const Stmt& s, std::string& out) {
    switch (s.kind) {
      case StmtKind::kText: emit(out, s.text); return Flow::kNormal;
      case StmtKind::kOutput: emit(out, py_str(eval(*s.expr))); return Flow::kNormal;
      case StmtKind::kIf:
        for (const auto& [cond, body] : s.branches)
          if (eval(*cond).truthy()) return exec_body(body, out);
        return exec_body(s.else_body, out);
      case StmtKind::kFor: return exec_for(s, out);
      case StmtKind::kSet: {
        Value v = eval(*s.expr);
        if (!s.attr.empty()) {
          const Value* target = scope_->find(s.targets[0]);
          if (!target || !target->is_object() || !target->object().is_namespace)
            throw EvalError("cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
          target->object().set(s.attr, std::move(v));
        } else {
          bind_targets(*scope_, s.targets, v);
        }
        return Flow::kNormal;
      }
      case StmtKind::kSetBlock: {
        std::string buf;
        const Flow f = exec_body(s.body, buf);
        Value v(std::move(buf));
        if (s.expr) v = eval_filter(*s.expr, &v);
        scope_->set(s.targets[0], std::move(v));
        return f;
      }
      case StmtKind::kMacro: define_macro(s); return Flow::kNormal;
      case StmtKind::kFilterBlock: {
        std::string buf;
        const Flow f = exec_body(s.body, buf);
        const Value v(std::move(buf));
        emit(out, py_str(eval_filter(*s.expr, &v)));
        return f;
      }
      case StmtKind::kBreak: return Flow::kBreak;
      case StmtKind::kContinue: return Flow::kContinue;
      case StmtKind::kScope: return exec_body(s.body, out);
      default: throw EvalError("unknown statement");
    }
  }

  static void bind_targets(Scope& scope, const std::vector<std::string>& targets, const Value& v) {
    if (targets.size() == 1) {
      scope.set(targets[0], v);
      return;
    }
    const std::vector<Value> items = iterate(v);
    if (items.size() != targets.size())
      throw EvalError(std::string(items.size() < targets.size() ? "not enough" : "too many") +
                      " values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                      std::to_string(items.size()) + ")");
    for (size_t i = 0; i < items.size(); ++i) scope.set(targets[i], items[i]);
  }

  Value loop_object(const std::vector<Value>& items, size_t i) {
    const auto n = static_cast<int64_t>(items.size());
    const auto k = static_cast<int64_t>(i);
    Value loop = Value::dict();
    auto& e = loop.object().entries;
    e = {{"index", Value(k + 1)},      {"index0", Value(k)},          {"revindex", Value(n - k)},
         {"revindex0", Value(n - k - 1)}, {"first", Value(k == 0)},     {"last", Value(k == n - 1)},
         {"length", Value(n)},          {"depth", Value(int64_t{1})},   {"depth0", Value(int64_t{0})}};
    if (k > 0) e.emplace_back("previtem", items[i - 1]);
    if (k + 1 < n) e.emplace_back("nextitem", items[i + 1]);
    e.emplace_back("cycle", Value(std::make_shared<const Callable>(Callable{"loop.cycle", [k](const CallArgs& a) {
                     if (a.positional.empty()) throw EvalError("no items for cycling given");
                     return a.positional[static_cast<size_t>(k) % a.positional.size()];
                   }})));
    return loop;
  }

  Flow exec_for(const Stmt& s, std::string& out) {
    const Value iterable = eval(*s.expr);
    std::vector<Value> items = iterate(iterable);
    if (s.cond) {  // `for x in xs if cond`: filtered before loop.length/index are counted
      std::vector<Value> kept;
      for (const Value& item : items) {
        count_step();
        auto probe = std::make_shared<Scope>();
        probe->parent = scope_;
        bind_targets(*probe, s.targets, item);
        ScopeGuard guard(*this, probe);
        if (eval(*s.cond).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      auto child = std::make_shared<Scope>();
      child->parent = scope_;
      ScopeGuard guard(*this, child);
      return exec_body(s.else_body, out);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      count_step();
      auto child = std::make_shared<Scope>();
      child->parent = scope_;
      bind_targets(*child, s.targets, items[i]);
      child->set("loop", loop_object(items, i));
      ScopeGuard guard(*this, child);
      if (exec_body(s.body, out) == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  void define_macro(const Stmt& s) {
    // weak_ptr: the macro lives in the scope it captures; a shared_ptr would be a leaking cycle.
    std::weak_ptr<Scope> def_scope = scope_;
    const Stmt* m = &s;
    auto fn = [this, m, def_scope](const CallArgs& a) { return call_macro(*m, def_scope, a); };
    scope_->set(s.name, Value(std::make_shared<const Callable>(Callable{s.name, std::move(fn)})));
  }

  Value call_macro(const Stmt& m, const std::weak_ptr<Scope>& def_scope, const CallArgs& a) {
    count_step();
    if (call_depth_ >= o_.max_call_depth)
      throw LimitError("macro calls nested deeper than " + std::to_string(o_.max_call_depth) + " (runaway recursion?)");
    ScopePtr parent = def_scope.lock();
    if (!parent) throw EvalError("macro '" + m.name + "' called after its defining scope ended");
    auto frame = std::make_shared<Scope>();
    frame->parent = std::move(parent);
    ScopeGuard guard(*this, frame);
    struct DepthGuard {
      explicit DepthGuard(int& d) : d_(d) { ++d_; }
      ~DepthGuard() { --d_; }
      int& d_;
    } depth(call_depth_);
    for (size_t i = 0; i < m.params.size(); ++i) {
      const std::string& p = m.params[i];
      const Value* kw = nullptr;
      for (const auto& [k, v] : a.keyword)
        if (k == p) kw = &v;
      if (i < a.positional.size()) {
        if (kw) throw EvalError("macro '" + m.name + "' got multiple values for argument '" + p + "'");
        frame->set(p, a.positional[i]);
      } else if (kw) {
        frame->set(p, *kw);
      } else if (m.defaults[i]) {
        frame->set(p, eval(*m.defaults[i]));  // evaluated per call, seeing earlier parameters
      } else {
        frame->set(p, Value::undefined("parameter '" + p + "' was not provided"));
      }
    }
    std::vector<Value> varargs;
    for (size_t i = m.params.size(); i < a.positional.size(); ++i) varargs.push_back(a.positional[i]);
    Value kwargs = Value::dict();
    for (const auto& [k, v] : a.keyword)
      if (std::find(m.params.begin(), m.params.end(), k) == m.params.end()) kwargs.object().set(k, v);
    frame->set("varargs", Value::list(std::move(varargs)));
    frame->set("kwargs", kwargs);
    std::string buf;
    exec_body(m.body, buf);
    return Value(std::move(buf));
  }

  // ---- expressions ----

  Value eval(const Expr& e) {
    RenderDepth guard(render_depth_, o_.max_render_depth);
    try {
      return eval_inner(e);
    } catch (const EvalError& err) {
      fail_at(e.offset, err);
    }
  }

  CallArgs eval_args(const Expr& e, size_t first) {
    CallArgs a;
    for (size_t i = first; i < e.args.size(); ++i) a.positional.push_back(eval(*e.args[i]));
    for (const auto& [k, v] : e.kwargs) a.keyword.emplace_back(k, eval(*v));
    return a;
  }

  Value lookup(const std::string& name) const {
    if (const Value* v = scope_->find(name)) return *v;
    return lookup_builtin(name, env_);
  }

  Value eval_inner(const Expr& e) {
    switch (e.kind) {
      case ExprKind::kLiteral: return e.literal;
      case ExprKind::kName: return lookup(e.name);
      case ExprKind::kList:
      case ExprKind::kTuple: {
        std::vector<Value> items;
        for (const auto& x : e.args) items.push_back(eval(*x));
        return e.kind == ExprKind::kTuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
      }
      case ExprKind::kDict: {
        Value d = Value::dict();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          const Value key = eval(*e.args[i]);
          if (!key.is_string()) throw EvalError("dict literal keys must be strings, got " + key.type_name());
          d.object().set(key.as_string(), eval(*e.args[i + 1]));
        }
        return d;
      }
      case ExprKind::kGetAttr: {
        const Value obj = eval(*e.args[0]);
        if (has_method(obj, e.name)) return bound_method(obj, e.name);
        return get_attr(obj, e.name);
      }
      case ExprKind::kGetItem: return get_item(eval(*e.args[0]), eval(*e.args[1]));
      case ExprKind::kSlice: {
        const Value obj = eval(*e.args[0]);
        std::optional<int64_t> parts[3];
        for (int i = 0; i < 3; ++i) {
          if (!e.args[i + 1]) continue;
          const Value v = eval(*e.args[i + 1]);
          if (v.is_none()) continue;
          if (!v.is_int() && !v.is_bool()) throw EvalError("slice indices must be integers or None");
          parts[i] = v.as_int();
        }
        return slice(obj, parts[0], parts[1], parts[2]);
      }
      case ExprKind::kCall: return eval_call(e);
      case ExprKind::kFilter: return eval_filter(e, nullptr);
      case ExprKind::kTest: {
        const Value v = eval(*e.args[0]);
        const bool r = apply_test(e.name, v, eval_args(e, 1));
        return Value(e.negated ? !r : r);
      }
      case ExprKind::kUnary: return unary_op(e.op, eval(*e.args[0]));
      case ExprKind::kBinary: {
        if (e.op == Op::kAnd || e.op == Op::kOr) {  // Python returns the deciding operand
          Value left = eval(*e.args[0]);
          if (left.truthy() == (e.op == Op::kOr)) return left;
          return eval(*e.args[1]);
        }
        const Value left = eval(*e.args[0]);
        return binary_op(e.op, left, eval(*e.args[1]), o_);
      }
      case ExprKind::kCompare: {
        Value left = eval(*e.args[0]);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.args[i + 1]);
          if (!binary_op(e.ops[i], left, right, o_).truthy()) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case ExprKind::kCondExpr:
        if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
        if (e.args[2]) return eval(*e.args[2]);
        return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
      default: throw EvalError("unknown expression");
    }
  }

  Value bound_method(const Value& obj, const std::string& name) const {
    const RenderOptions* o = &o_;
    return Value(std::make_shared<const Callable>(Callable{name, [obj, name, o](const CallArgs& a) {
                                                            return *call_method(obj, name, a, *o);
                                                          }}));
  }

  Value eval_call(const Expr& e) {
    const Expr& callee = *e.args[0];
    Value fn;
    if (callee.kind == ExprKind::kGetAttr) {  // obj.method(...): no bound-method object needed
      const Value obj = eval(*callee.args[0]);
      const CallArgs a = eval_args(e, 1);
      if (auto r = call_method(obj, callee.name, a, o_)) return *r;
      fn = get_attr(obj, callee.name);
      return call_value(fn, a);
    }
    fn = eval(callee);
    return call_value(fn, eval_args(e, 1));
  }

  static Value call_value(const Value& fn, const CallArgs& a) {
    if (fn.is_undefined()) throw_undefined(fn);
    if (!fn.is_callable()) throw EvalError("'" + fn.type_name() + "' object is not callable");
    return fn.callable().fn(a);
  }

  // A filter node; `injected` is the input of a {% filter %} / block-set chain (whose innermost
  // node has no input expression).
  Value eval_filter(const Expr& e, const Value* injected) {
    Value input;
    if (!e.args[0]) input = *injected;
    else if (injected && e.args[0]->kind == ExprKind::kFilter) input = eval_filter(*e.args[0], injected);
    else input = eval(*e.args[0]);
    return apply_filter(e.name, input, eval_args(e, 1), o_);
  }

  const Template& t_;
  const RenderOptions& o_;
  std::vector<ObjectPtr> namespaces_;
  BuiltinEnv env_;
  ScopePtr scope_;
  int64_t steps_ = 0;
  int call_depth_ = 0;
  int render_depth_ = 0;
};

}  // namespace

std::string render_template(const Template& tmpl, const Value& context, const RenderOptions& options) {
  return Renderer(tmpl, options).render(context);
}

}  // namespace lathe::jinja

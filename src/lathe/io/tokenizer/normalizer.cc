// Normalizer steps. Unicode normalization runs utf8proc only on the short runs of characters that
// can change (most text is stable under NFC), then rebuilds alignments for the changed clusters.
#include "lathe/io/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "lathe/base/error.h"
#include "lathe/io/tokenizer/unicode.h"

namespace lathe::tokenizer {

namespace {

bool composes(UnicodeForm f) { return f == UnicodeForm::kNfc || f == UnicodeForm::kNfkc; }
bool compat(UnicodeForm f) { return f == UnicodeForm::kNfkc || f == UnicodeForm::kNfkd; }

// True when c is unchanged by the form and cannot combine with a neighbour (a "stable" starter).
// The character before a run of unstable ones may still compose with it; callers include it.
bool is_stable(char32_t c, UnicodeForm form) {
  if (c < 0x80) return true;
  if (c >= 0x1100 && c <= 0x11FF) return false;                            // conjoining jamo
  if (!composes(form) && c >= 0xAC00 && c <= 0xD7A3) return false;         // Hangul decomposes
  const utf8proc_property_t* p = utf8proc_get_property(utf8proc_int32_t(c));
  if (p->combining_class != 0 || p->decomp_seqindex != UINT16_MAX) return false;
  // comb_index >= 0x8000 marks a character that composes as the second of a pair.
  if (composes(form) && p->comb_index != UINT16_MAX && p->comb_index >= 0x8000) return false;
  return true;
}

std::string utf8proc_normalize(std::string_view s, UnicodeForm form) {
  int opts = UTF8PROC_STABLE;
  opts |= composes(form) ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE;
  if (compat(form)) opts |= UTF8PROC_COMPAT;
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), utf8proc_ssize_t(s.size()),
                                    &out, utf8proc_option_t(opts));
  if (n < 0) return std::string(s);  // cannot happen on repaired UTF-8; leave the text as it is
  std::string r(reinterpret_cast<char*>(out), size_t(n));
  std::free(out);
  return r;
}

void decode_all(std::string_view s, std::vector<char32_t>& out) {
  out.clear();
  size_t i = 0;
  while (i < s.size()) out.push_back(utf8_next(s, i));
}

// Appends the changes mapping n_in input chars to `outs`: outputs replace inputs one for one; a
// shorter output's last char also removes the remaining inputs; a longer output's extras are inserted.
void cluster_changes(size_t n_in, const std::vector<char32_t>& outs, std::vector<CharChange>& dest) {
  size_t n_out = outs.size();
  if (n_out == 0) return;  // would drop inputs; normalization never empties a non-empty cluster
  for (size_t k = 0; k < n_out; ++k) {
    int change = 0;
    if (k >= n_in) change = 1;
    else if (k == n_out - 1 && n_out < n_in) change = -int(n_in - n_out);
    dest.push_back({outs[k], change});
  }
}

}  // namespace

void unicode_normalize(NormalizedString& ns, UnicodeForm form) {
  const std::string& t = ns.text();
  // Quick pass: locate runs of unstable characters (with the preceding character).
  struct Run {
    size_t start, end;
  };
  std::vector<Run> runs;
  size_t i = 0, prev_start = 0;
  bool have_prev = false;
  while (i < t.size()) {
    if (uint8_t(t[i]) < 0x80) {
      prev_start = i++;
      have_prev = true;
      continue;
    }
    size_t cs = i;
    char32_t c = utf8_next(t, i);
    if (is_stable(c, form)) {
      prev_start = cs;
      have_prev = true;
      continue;
    }
    size_t rs = have_prev ? prev_start : cs;
    size_t re = i;
    while (re < t.size()) {
      size_t k = re;
      char32_t d = utf8_next(t, k);
      if (is_stable(d, form)) break;
      re = k;
    }
    if (!runs.empty() && runs.back().end > rs) rs = runs.back().end;
    runs.push_back({rs, re});
    i = re;
    have_prev = false;
  }
  if (runs.empty()) return;

  std::vector<CharChange> dest;
  std::vector<char32_t> ins, outs;
  bool changed = false;
  size_t pos = 0;
  auto keep = [&](size_t s, size_t e) {
    size_t k = s;
    while (k < e) dest.push_back({utf8_next(t, k), 0});
  };
  for (const Run& r : runs) {
    std::string_view run(t.data() + r.start, r.end - r.start);
    std::string whole = utf8proc_normalize(run, form);
    if (whole == run) continue;
    if (!changed) dest.reserve(t.size());
    changed = true;
    keep(pos, r.start);
    // Clusters start at each combining-class-0 character.
    std::vector<size_t> starts;
    for (size_t k = 0; k < run.size();) {
      size_t cs = k;
      char32_t c = utf8_next(run, k);
      if (starts.empty() || utf8proc_get_property(utf8proc_int32_t(c))->combining_class == 0) starts.push_back(cs);
    }
    starts.push_back(run.size());
    std::string joined;
    std::vector<std::string> parts;
    for (size_t k = 0; k + 1 < starts.size(); ++k) {
      parts.push_back(utf8proc_normalize(run.substr(starts[k], starts[k + 1] - starts[k]), form));
      joined += parts.back();
    }
    if (joined != whole) {  // clusters interact (e.g. Hangul LV + T): treat the run as one cluster
      starts = {0, run.size()};
      parts = {whole};
    }
    for (size_t k = 0; k + 1 < starts.size(); ++k) {
      std::string_view in = run.substr(starts[k], starts[k + 1] - starts[k]);
      if (parts[k] == in) {
        keep(r.start + starts[k], r.start + starts[k + 1]);
        continue;
      }
      decode_all(in, ins);
      decode_all(parts[k], outs);
      cluster_changes(ins.size(), outs, dest);
    }
    pos = r.end;
  }
  if (!changed) return;
  keep(pos, t.size());
  ns.transform_range(0, ns.size(), dest, 0);
}

namespace {

void lowercase(NormalizedString& ns) {
  const std::string& t = ns.text();
  bool ascii_only = true;
  for (char c : t) ascii_only &= uint8_t(c) < 0x80;
  if (ascii_only) {
    // Byte-for-byte: alignment unchanged.
    std::string lower = t;
    for (char& c : lower) c = (c >= 'A' && c <= 'Z') ? char(c + 32) : c;
    if (lower == t) return;
    std::vector<CharChange> dest;
    dest.reserve(t.size());
    for (char c : lower) dest.push_back({char32_t(uint8_t(c)), 0});
    ns.transform_range(0, ns.size(), dest, 0);
    return;
  }
  std::vector<CharChange> dest;
  size_t i = 0;
  bool any = false;
  while (i < t.size()) {
    char32_t c = utf8_next(t, i);
    if (c == 0x130) {  // full lowercase mapping of U+0130 (Rust to_lowercase) is "i\u0307"
      dest.push_back({U'i', 0});
      dest.push_back({0x307, 1});
      any = true;
      continue;
    }
    char32_t l = char32_t(utf8proc_tolower(utf8proc_int32_t(c)));
    any |= l != c;
    dest.push_back({l, 0});
  }
  if (any) ns.transform_range(0, ns.size(), dest, 0);
}

UnicodeForm form_of(std::string_view type) {
  if (type == "NFC") return UnicodeForm::kNfc;
  if (type == "NFD") return UnicodeForm::kNfd;
  if (type == "NFKC") return UnicodeForm::kNfkc;
  return UnicodeForm::kNfkd;
}

}  // namespace

void Normalizer::append_steps(JsonRef j, std::vector<Step>& steps) {
  if (j.is_null()) return;
  std::string_view type = j["type"].str("normalizer type");
  Step s{};
  if (type == "Sequence") {
    j["normalizers"].for_each_element([&](JsonRef n) { append_steps(n, steps); });
    return;
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    s.kind = Kind::kUnicode;
    s.form = form_of(type);
  } else if (type == "Lowercase") {
    s.kind = Kind::kLowercase;
  } else if (type == "Strip") {
    s.kind = Kind::kStrip;
    s.left = j["strip_left"].is_bool() ? j["strip_left"].boolean() : true;
    s.right = j["strip_right"].is_bool() ? j["strip_right"].boolean() : true;
  } else if (type == "Replace") {
    s.kind = Kind::kReplace;
    s.pattern = Pattern::from_json(j["pattern"]);
    s.content = std::string(j["content"].str("Replace content"));
  } else if (type == "Prepend") {
    s.kind = Kind::kPrepend;
    s.content = std::string(j["prepend"].str("Prepend prepend"));
  } else {
    throw NotImplemented(str_cat("unsupported normalizer type '", type,
                                 "' (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, Replace, Prepend, Sequence)"));
  }
  steps.push_back(std::move(s));
}

Normalizer Normalizer::from_json(JsonRef j) {
  Normalizer n;
  append_steps(j, n.steps_);
  return n;
}

void Normalizer::normalize(NormalizedString& ns) const {
  std::vector<MatchSpan> spans;
  for (const Step& s : steps_) {
    switch (s.kind) {
      case Kind::kUnicode: unicode_normalize(ns, s.form); break;
      case Kind::kLowercase: lowercase(ns); break;
      case Kind::kStrip: ns.strip(s.left, s.right); break;
      case Kind::kReplace:
        s.pattern.find_matches(ns.text(), spans);
        ns.replace(spans, s.content);
        break;
      case Kind::kPrepend: ns.prepend(s.content); break;
      case Kind::kCount: break;
    }
  }
}

}  // namespace lathe::tokenizer

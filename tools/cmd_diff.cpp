// safeweights diff A B [--json] [--entry-a NAME] [--entry-b NAME]
// Exit status: 0 same tensor names, types, shapes and values; 1 any difference; an error's by the one
// policy (cli_common.h: 1 invalid input, 2 usage, 3 environment).
#include <algorithm>
#include <charconv>
#include <optional>
#include <cmath>
#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "commands.h"
#include "safeweights/convert.h"

namespace safeweights::cli {
namespace {

// One common tensor: its two declarations and, when the shapes agree, how the values differ.
struct Row {
  const TensorEntry* a = nullptr;
  const TensorEntry* b = nullptr;
  std::optional<TensorDiff> diff;
  bool same() const { return a->type == b->type && std::ranges::equal(a->shape, b->shape) && diff && diff->identical(); }
};

struct Result_ {
  std::vector<std::string_view> only_a, only_b;
  std::vector<Row> rows;
  bool same() const {
    return only_a.empty() && only_b.empty() && std::ranges::all_of(rows, [](const Row& r) { return r.same(); });
  }
};

Result<Result_> compare(const TensorFile& a, const TensorFile& b) {
  Result_ out;
  for (const TensorEntry& e : a.tensors()) {
    const TensorEntry* other = b.find(e.name);
    if (!other) {
      out.only_a.push_back(e.name);
      continue;
    }
    Row row{&e, other, std::nullopt};
    if (std::ranges::equal(e.shape, other->shape)) {
      auto d = compare_tensors(e, *other);
      if (!d.is_ok()) return std::move(d.error().with_file(a.name()));
      row.diff = *d;
    }
    out.rows.push_back(row);
  }
  for (const TensorEntry& e : b.tensors())
    if (!a.find(e.name)) out.only_b.push_back(e.name);
  return out;
}

// The decimal digits of twice a non-negative number written as "d.ddde+X" (from to_chars or %e),
// doubled digit by digit: how a statistic past the largest double (TensorDiff::scale_exp2 = 1) is
// printed as the finite number it is. Trailing zeros of the fraction are dropped.
std::string doubled(std::string_view sci) {
  const std::size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e))
    if (c >= '0' && c <= '9') digits += c;
  int exp = 0;
  std::from_chars(sci.data() + e + (sci[e + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exp);
  std::string out(digits.size() + 1, '0');
  int carry = 0;
  for (std::size_t i = digits.size(); i-- > 0;) {
    const int v = (digits[i] - '0') * 2 + carry;
    out[i + 1] = static_cast<char>('0' + v % 10);
    carry = v / 10;
  }
  if (carry)
    out[0] = '1', ++exp;
  else
    out.erase(0, 1);
  while (out.size() > 1 && out.back() == '0') out.pop_back();
  if (out.size() > 1) out.insert(1, 1, '.');
  out += exp < 0 ? "e-" : "e+";
  out += std::to_string(exp < 0 ? -exp : exp);
  return out;
}

// A statistic v * 2^exp2: in JSON its shortest round-trip form, in text 6 significant digits.
void stat_json(JsonWriter& w, double v, int exp2) {
  if (exp2 == 0 || !std::isfinite(v)) {
    w.number(v);
    return;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  w.raw(doubled(std::string_view(buf, static_cast<std::size_t>(r.ptr - buf))));
}
std::string stat_text(double v, int exp2) {
  char buf[64];
  if (exp2 == 0) {
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.5e", v);
  return doubled(buf);
}

void names_json(JsonWriter& w, const std::vector<std::string_view>& names) {
  w.array();
  for (std::string_view name : names) w.string(name);
  w.end();
}

// One common tensor: both declarations, and the statistics when the shapes agree (null otherwise).
void row_json(JsonWriter& w, const Row& row) {
  w.object().key("name").string(row.a->name).key("type_a").string(type_name(row.a->type)).key("type_b").string(type_name(row.b->type));
  w.key("shape_a").uints(row.a->shape).key("shape_b").uints(row.b->shape).key("same").boolean(row.same());
  if (const auto& d = row.diff) {
    w.key("elements").uint(d->elements).key("identical").boolean(d->identical()).key("differing").uint(d->differing);
    stat_json(w.key("max_abs_diff"), d->max_abs, d->scale_exp2);
    stat_json(w.key("rmse"), d->rmse, d->scale_exp2);
    w.key("cosine").number(d->cosine).key("nonfinite_mismatches").uint(d->nonfinite_mismatches);
  } else {
    w.key("elements").null().key("identical").boolean(false).key("differing").null().key("max_abs_diff").null().key("rmse").null();
    w.key("cosine").null().key("nonfinite_mismatches").null();
  }
  w.end();
}

void print_json(const DiffArgs& opt, const Result_& r) {
  JsonWriter w;
  w.object().key("a").string(opt.a).key("b").string(opt.b).key("same").boolean(r.same());
  names_json(w.key("only_in_a"), r.only_a);
  names_json(w.key("only_in_b"), r.only_b);
  w.key("tensors").array();
  for (const Row& row : r.rows) row_json(w, row);
  w.end().end();
  std::printf("%s\n", w.text().c_str());
}

// Differences only, one line each, then a summary line.
void print_text(const Result_& r) {
  for (std::string_view n : r.only_a) std::printf("only in A: %s\n", printable(n).c_str());
  for (std::string_view n : r.only_b) std::printf("only in B: %s\n", printable(n).c_str());
  std::size_t differ = 0;
  for (const Row& row : r.rows) {
    if (row.same()) continue;
    ++differ;
    std::string line = printable(row.a->name) + ": " + std::string(type_name(row.a->type)) + " " + shape_string(row.a->shape);
    if (row.a->type != row.b->type || !row.diff) line += " vs " + std::string(type_name(row.b->type)) + " " + shape_string(row.b->shape);
    if (const auto& d = row.diff) {
      line += ": " + std::to_string(d->differing) + " of " + std::to_string(d->elements) + " values differ, max abs " +
              stat_text(d->max_abs, d->scale_exp2) + ", rmse " + stat_text(d->rmse, d->scale_exp2);
      append_format(line, ", cosine %.9g", d->cosine);
      if (d->nonfinite_mismatches) line += ", " + std::to_string(d->nonfinite_mismatches) + " NaN/inf mismatches";
    } else {
      line += ": shapes differ";
    }
    std::printf("%s\n", line.c_str());
  }
  std::printf("%s: %zu common tensors (%zu differ), %zu only in A, %zu only in B\n", r.same() ? "same" : "different", r.rows.size(), differ,
              r.only_a.size(), r.only_b.size());
}

Result<int> diff(const DiffArgs& opt) {
  const FormatOptions options = input_options(opt.backend);
  auto a = open_tensors(opt.a, opt.entry_a, options);
  if (!a.is_ok()) return a.error();
  auto b = open_tensors(opt.b, opt.entry_b, options);
  if (!b.is_ok()) return b.error();
  auto r = compare(**a, **b);
  if (!r.is_ok()) return r.error();
  if (opt.json)
    print_json(opt, *r);
  else
    print_text(*r);
  return r->same() ? kExitOk : kExitInvalid;
}

}  // namespace

int run_diff(const DiffArgs& args) {
  auto r = diff(args);
  return r.is_ok() ? *r : exit_status(r.status());
}

}  // namespace safeweights::cli

// safeweights diff A B [--json] [--entry-a NAME] [--entry-b NAME]
// Exit status: 0 same tensor names, types, shapes and values; 1 any difference; 2 an error (usage or input).
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

constexpr int kExitDiffer = 1;
constexpr int kExitError = 2;

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

// Shortest round-trip form; null for a NaN or an infinity (JSON has none).
std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
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
std::string stat_json(double v, int exp2) {
  if (exp2 == 0 || !std::isfinite(v)) return number(v);
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  return doubled(std::string_view(buf, static_cast<std::size_t>(r.ptr - buf)));
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

// The separator is appended on its own: GCC 12's -Wrestrict misfires on `(i ? "," : "") + std::string`.
std::string json_shape(std::span<const std::uint64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string names_json(const std::vector<std::string_view>& names) {
  std::string s = "[";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) s += ',';
    s += json_quote(names[i]);
  }
  return s + "]";
}

void print_json(const DiffArgs& opt, const Result_& r) {
  std::string s = "{\"a\":" + json_quote(opt.a) + ",\"b\":" + json_quote(opt.b) + ",\"same\":" + (r.same() ? "true" : "false") +
                  ",\"only_in_a\":" + names_json(r.only_a) + ",\"only_in_b\":" + names_json(r.only_b) + ",\"tensors\":[";
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    const Row& row = r.rows[i];
    s += (i ? ",{" : "{") + std::string("\"name\":") + json_quote(row.a->name) + ",\"type_a\":" + json_quote(type_name(row.a->type)) +
         ",\"type_b\":" + json_quote(type_name(row.b->type)) + ",\"shape_a\":" + json_shape(row.a->shape) +
         ",\"shape_b\":" + json_shape(row.b->shape) + ",\"same\":" + (row.same() ? "true" : "false");
    if (const auto& d = row.diff) {
      s += ",\"elements\":" + std::to_string(d->elements) + ",\"identical\":" + (d->identical() ? "true" : "false") +
           ",\"differing\":" + std::to_string(d->differing) + ",\"max_abs_diff\":" + stat_json(d->max_abs, d->scale_exp2) +
           ",\"rmse\":" + stat_json(d->rmse, d->scale_exp2) + ",\"cosine\":" + number(d->cosine) +
           ",\"nonfinite_mismatches\":" + std::to_string(d->nonfinite_mismatches);
    } else {
      s += ",\"elements\":null,\"identical\":false,\"differing\":null,\"max_abs_diff\":null,\"rmse\":null,\"cosine\":null,\"nonfinite_mismatches\":"
           "null";
    }
    s += "}";
  }
  s += "]}\n";
  std::fputs(s.c_str(), stdout);
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
  return r->same() ? kExitOk : kExitDiffer;
}

}  // namespace

int run_diff(const DiffArgs& args) {
  auto r = diff(args);
  if (r.is_ok()) return *r;
  print_error(r.error());
  return kExitError;
}

}  // namespace safeweights::cli

// The pickle machine's memory discipline (src/pytorch/pickle_vm.h): all text it keeps, read or composed,
// counts against max_text; values nothing changes (None, booleans, small ints) are shared; the memo and
// the container opcodes work from the stack with dense and sparse memo indices. Hostile pickles and
// real checkpoints are tested through the CLI (tests/pytorch/test_checkpoints.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "pytorch/pickle_vm.h"

namespace safeweights::pytorch {
namespace {

using namespace std::string_literals;  // "...\x00..."s keeps its NUL bytes

std::string binunicode(const std::string& text) {
  const auto n = static_cast<std::uint32_t>(text.size());
  std::string out = "X";
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  return out + text;
}

Result<std::unique_ptr<Pickle>> run(const std::string& body, PickleOptions options = {}) {
  const std::string bytes = "\x80\x02" + body + ".";
  return Pickle::run(std::as_bytes(std::span(bytes.data(), bytes.size())), options);
}

// STACK_GLOBAL of two memoised 4000-byte strings, repeated: 5 bytes of input each, 8 KB of dotted
// name each. In the permissive mode every one is kept, so the names count against the text limit
// (without that, 4 Mi values of them would ask for 32 GB).
TEST(PickleVm, ComposedGlobalNamesCountAgainstTheTextLimit) {
  std::string body = binunicode(std::string(4000, 'a')) + "q\x00"s + binunicode(std::string(4000, 'b')) + "q\x01" + "00";
  for (int i = 0; i < 300; ++i) body += "h\x00h\x01\x93"s + "0";
  body += "N";
  PickleOptions options;
  options.allow_unknown = true;
  options.limits.max_text = 1u << 20;
  auto result = run(body, options);
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.error().kind(), ErrorKind::ResourceLimit) << result.error().message();
  options.limits.max_text = 8u << 20;  // room for all 300 names
  EXPECT_TRUE(run(body, options).is_ok());
}

// GLOBAL's module and name are lines of at most 4096 bytes; STACK_GLOBAL's strings are held to the same.
TEST(PickleVm, StackGlobalNamesAreBoundedLikeGlobalLines) {
  PickleOptions options;
  options.allow_unknown = true;
  auto result = run(binunicode(std::string(5000, 'a')) + binunicode("b") + "\x93", options);
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.error().kind(), ErrorKind::InvalidPickle) << result.error().message();
  EXPECT_TRUE(run(binunicode(std::string(4000, 'a')) + binunicode("b") + "\x93", options).is_ok());
}

// A list of 1000 Nones, booleans and small ints creates a handful of values, not 1000.
TEST(PickleVm, ImmutableValuesAreShared) {
  std::string body = "(";
  for (int i = 0; i < 250; ++i) body += std::string("N\x88\x89K") + static_cast<char>(i);
  body += "l";
  PickleOptions options;
  options.limits.max_objects = 300;  // None, True, False, 250 ints and the list
  auto result = run(body, options);
  ASSERT_TRUE(result.is_ok()) << result.error().message();
  const Value* list = (*result)->root();
  ASSERT_EQ(list->items.size(), 1000u);
  EXPECT_EQ(list->items[0], list->items[4]);
  EXPECT_EQ(list->items[1]->boolean, true);
  EXPECT_EQ(list->items[2]->boolean, false);
  EXPECT_EQ(list->items[4 * 200 + 3]->integer, 200);
}

// Strings of every size land intact in the text arena (small ones packed in blocks, big ones alone).
TEST(PickleVm, TextArenaKeepsEveryString) {
  std::vector<std::string> texts;
  std::string body = "(";
  for (int i = 0; i < 600; ++i) {
    texts.push_back(std::string(static_cast<std::size_t>(i * 37 % 9000), static_cast<char>('a' + i % 26)) + std::to_string(i));
    body += binunicode(texts.back());
  }
  body += "l";
  auto result = run(body);
  ASSERT_TRUE(result.is_ok()) << result.error().message();
  const Value* list = (*result)->root();
  ASSERT_EQ(list->items.size(), texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(list->items[i]->text, texts[i]) << i;
}

// Memo indices in order (a vector) and out of order (a map), MEMOIZE after both, and the container
// opcodes filling the container below their items.
TEST(PickleVm, MemoAndContainerOpcodes) {
  // {1: [7, 8], "k": 9}: the dict memoised at 0 (in order), 7 at 1000 (out of order), 8 by MEMOIZE
  // (index 2, the memo's size), then 7 and 8 fetched again and appended.
  const std::string body =
      "}q\x00K\x01]K\x07r\xe8\x03\x00\x00"s + "0" + "K\x08\x94" + "0" + "(j\xe8\x03\x00\x00h\x02"s + "es" + binunicode("k") + "K\x09s";
  auto result = run(body);
  ASSERT_TRUE(result.is_ok()) << result.error().message();
  const Value* dict = (*result)->root();
  ASSERT_EQ(dict->kind, Kind::Dict);
  ASSERT_EQ(dict->items.size(), 4u);
  const Value* list = dict->items[1];
  ASSERT_EQ(list->items.size(), 2u);
  EXPECT_EQ(list->items[0]->integer, 7);
  EXPECT_EQ(list->items[1]->integer, 8);
  EXPECT_EQ(dict->items[2]->text, "k");
  EXPECT_EQ(dict->items[3]->integer, 9);
  // APPENDS with nothing under its MARK, SETITEM with one value: malformed, not a crash.
  EXPECT_EQ(run("(K\x01"
                "e")
                .error()
                .kind(),
            ErrorKind::InvalidPickle);
  EXPECT_EQ(run("}K\x01s").error().kind(), ErrorKind::InvalidPickle);
}

// Every opcode that fills a container counts its items against max_items: LIST / TUPLE / DICT /
// FROZENSET from a MARK and TUPLE1-3 as well as APPEND(S) / SETITEM(S) / ADDITEMS.
TEST(PickleVm, EveryContainerOpcodeCountsItems) {
  PickleOptions options;
  options.limits.max_items = 4;
  const std::string five = "(K\x01K\x02K\x03K\x04K\x05";
  for (const std::string& body : {five + "l", five + "t", five + "\x91",
                                  "(K\x01K\x02K\x03K\x04K\x05K\x06"
                                  "d"s,
                                  "K\x01K\x02\x86K\x03K\x04K\x05\x87\x86"s,
                                  "](K\x01K\x02K\x03K\x04K\x05"
                                  "e"s}) {
    auto result = run(body, options);
    ASSERT_FALSE(result.is_ok()) << body;
    EXPECT_EQ(result.error().kind(), ErrorKind::ResourceLimit) << body;
    EXPECT_NE(result.error().message().find("pickle exceeds the limit on container items"), std::string::npos) << result.error().message();
  }
  EXPECT_TRUE(run("(K\x01K\x02K\x03K\x04l", options).is_ok());
  EXPECT_TRUE(run("K\x01K\x02\x86K\x03\x86", options).is_ok());  // (1, 2) then ((1, 2), 3): 4 items
}

}  // namespace
}  // namespace safeweights::pytorch

namespace safeweights::pytorch {
namespace {

// The backticked names between `<!-- NAME -->` and `<!-- /NAME -->` in docs/PYTORCH.md.
std::vector<std::string> documented(const std::string& block) {
  std::ifstream in(PYTORCH_DOC);
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string open = "<!-- " + block + " -->", close = "<!-- /" + block + " -->";
  const std::size_t begin = doc.find(open), end = doc.find(close);
  std::vector<std::string> names;
  if (begin == std::string::npos || end == std::string::npos) return names;
  for (std::size_t at = doc.find('`', begin); at != std::string::npos && at < end; at = doc.find('`', at)) {
    const std::size_t stop = doc.find('`', at + 1);
    names.push_back(doc.substr(at + 1, stop - at - 1));
    at = stop + 1;
  }
  return names;
}

std::vector<std::string> sorted(std::span<const std::string_view> list) {
  std::vector<std::string> out(list.begin(), list.end());
  std::sort(out.begin(), out.end());
  return out;
}

// docs/PYTORCH.md lists exactly the names the machine refuses in the permissive mode (the CLI test
// then reads each documented name from a pickle and checks the refusal names it).
TEST(PickleVm, AlwaysRefusedListsAreTheDocumentedOnes) {
  std::vector<std::string> modules = documented("refused-modules"), paths = documented("refused-paths");
  std::sort(modules.begin(), modules.end());
  std::sort(paths.begin(), paths.end());
  EXPECT_EQ(sorted(refused_modules()), modules);
  EXPECT_EQ(sorted(refused_paths()), paths);
  EXPECT_GT(modules.size(), 100u);
}

// Each refused name, as a GLOBAL, is refused in the permissive mode with a message naming its entry;
// so is a submodule of each module entry (the CVE-2025-10157 bypass), and a STACK_GLOBAL whose name is
// an attribute path through a refused module (`torch` + `os.system`).
TEST(PickleVm, AlwaysRefusedNamesStayRefusedWithAllowUnknown) {
  PickleOptions options;
  options.allow_unknown = true;
  auto expect_refused = [&](const std::string& body, std::string_view entry) {
    auto result = run(body, options);
    ASSERT_FALSE(result.is_ok()) << entry;
    EXPECT_EQ(result.error().kind(), ErrorKind::UnsafePickle) << entry;
    EXPECT_NE(result.error().message().find("`" + std::string(entry) + "` is never read"), std::string::npos) << result.error().message();
  };
  for (std::string_view m : refused_modules()) {
    expect_refused("c" + std::string(m) + "\nanything\n", m);
    expect_refused("c" + std::string(m) + ".sub.module\nanything\n", m);
  }
  for (std::string_view p : refused_paths()) {
    const std::size_t dot = p.rfind('.');
    expect_refused("c" + std::string(p.substr(0, dot)) + "\n" + std::string(p.substr(dot + 1)) + "\n", p);
    expect_refused("c" + std::string(p) + "\nanything\n", p);
    expect_refused(binunicode(std::string(p.substr(0, p.find('.')))) + binunicode(std::string(p.substr(p.find('.') + 1)) + ".x") + "\x93", p);
  }
  expect_refused(binunicode("torch") + binunicode("os.system") + "\x93", "os");
  // Allowlisted names under a refused path keep working, and neighbours of a path are not refused.
  EXPECT_TRUE(run("ctorch.serialization\n_get_layout\n)R", options).is_ok());
  EXPECT_TRUE(run("ctorch\nhubris\n", options).is_ok());
  EXPECT_TRUE(run("cnumpy.random._pickle\n__randomstate_ctor\n", options).is_ok());
}

}  // namespace
}  // namespace safeweights::pytorch

// DDUF in the format registry: an archive of pipeline files whose .safetensors members open as tensor
// files of their own.
#include "dduf/format.h"

#include <cctype>
#include <memory>
#include <utility>

#include "core/status_macros.h"
#include "safeweights/dduf.h"
#include "safeweights/text.h"
#include "safetensors/format.h"

namespace safeweights::dduf {
namespace {

Result<Reader> open_archive(const std::string& path, const FormatOptions& options) {
  SW_ASSIGN_OR_RETURN(SourcePtr source, resolver_of(options).open(path, options.backend));
  return Reader::open(std::move(source));
}

Result<safetensors::Reader> open_member(const Reader& archive, std::string_view entry, const FormatOptions& options) {
  safetensors::ReadOptions read;
  read.reject_unknown_fields = options.strict;
  return archive.open_safetensors(entry, read);
}

std::string inspect_json(const Reader& reader) {
  JsonWriter w;
  w.object().key("format").string("dduf").key("entries").array();
  for (const auto& e : reader.entries()) {
    w.object().key("name").string(e.filename).key("offset").uint(e.offset).key("length").uint(e.length).end();
  }
  // model_index.json was validated as a JSON object; embed it as is, minus surrounding whitespace.
  std::string_view index = reader.model_index();
  while (!index.empty() && std::isspace(static_cast<unsigned char>(index.back()))) index.remove_suffix(1);
  while (!index.empty() && std::isspace(static_cast<unsigned char>(index.front()))) index.remove_prefix(1);
  w.end().key("components").raw(index).end();
  return std::move(w.text()) + "\n";
}

std::string inspect_text(const Reader& reader, const std::string& path) {
  std::uint64_t total = 0;
  std::size_t name_w = 4;
  for (const auto& e : reader.entries()) {
    total += e.length;
    name_w = std::max(name_w, e.filename.size());
  }
  std::string out = "file:        " + path + "\nformat:      dduf" + (reader.archive().uses_zip64() ? " (ZIP64)" : "") +
                    "\nentries:     " + std::to_string(reader.entries().size()) + " (" + human_bytes(total) + " of data)\ncomponents:  ";
  for (std::size_t i = 0; i < reader.components().size(); ++i) out += (i ? ", " : "") + reader.components()[i];
  append_format(out, "\n\n%-*s  %14s  %12s  %s\n", static_cast<int>(name_w), "ENTRY", "OFFSET", "SIZE", "ALIGNMENT");
  for (const auto& e : reader.entries()) {
    std::uint64_t align = 1;
    while (align < 4096 && e.offset % (align * 2) == 0) align *= 2;
    append_format(out, "%-*s  %14llu  %12s  %llu\n", static_cast<int>(name_w), e.filename.c_str(), static_cast<unsigned long long>(e.offset),
                  human_bytes(e.length).c_str(), static_cast<unsigned long long>(e.offset == 0 ? 4096 : align));
  }
  return out;
}

Error needs_member(const std::string& path, std::string_view what) {
  return Error(ErrorKind::InvalidArgument, std::string("a DDUF archive holds several files: ") + std::string(what)).with_file(path);
}

class DdufFormat final : public Format {
 public:
  std::string_view name() const noexcept override { return "dduf"; }
  bool has_members() const noexcept override { return true; }
  std::span<const std::string_view> claimed_extensions() const noexcept override {
    static constexpr std::string_view kClaimed[] = {".dduf"};
    return kClaimed;
  }
  // A ZIP archive starts with a local header, or (when empty) is just an end record.
  int detect(std::span<const std::byte> head, std::uint64_t, std::string_view path) const override {
    if (head.size() >= 4 && head[0] == std::byte{'P'} && head[1] == std::byte{'K'} &&
        ((head[2] == std::byte{3} && head[3] == std::byte{4}) || (head[2] == std::byte{5} && head[3] == std::byte{6}))) {
      return 3;
    }
    // Not a ZIP by its first bytes, but named as one: let the ZIP reader say what is wrong with it.
    return path.size() >= 5 && path.substr(path.size() - 5) == ".dduf" ? 2 : 0;
  }
  Result<std::string> validate(const std::string& path, const FormatOptions& options) const override {
    SW_ASSIGN_OR_RETURN(Reader reader, open_archive(path, options));
    VerifyOptions verify;
    verify.crc = options.crc;
    SW_RETURN_IF_ERROR(reader.verify(verify));
    return std::to_string(reader.entries().size()) + " entries, " + std::to_string(reader.components().size()) + " components" +
           (verify.crc ? ", CRCs checked" : ", CRCs not checked");
  }
  Result<std::string> inspect(const std::string& path, std::span<const std::string> members, const FormatOptions& options, bool json) const override {
    SW_ASSIGN_OR_RETURN(Reader reader, open_archive(path, options));
    if (members.size() > 1) return needs_member(path, "inspect takes one .safetensors ENTRY");
    if (members.size() == 1) {
      SW_ASSIGN_OR_RETURN(safetensors::Reader member, open_member(reader, members[0], options));
      return safetensors::inspect_file(member, path + "!" + members[0], json);
    }
    return json ? inspect_json(reader) : inspect_text(reader, path);
  }
  Result<std::unique_ptr<TensorFile>> open(const std::string& path, std::span<const std::string> members,
                                           const FormatOptions& options) const override {
    if (members.size() != 1) return needs_member(path, "name the .safetensors ENTRY to open");
    SW_ASSIGN_OR_RETURN(Reader reader, open_archive(path, options));
    SW_ASSIGN_OR_RETURN(safetensors::Reader member, open_member(reader, members[0], options));
    return std::unique_ptr<TensorFile>(std::make_unique<safetensors::Reader>(std::move(member)));
  }
  // ENTRY: the member's bytes; ENTRY TENSOR: a tensor of a .safetensors member.
  Result<CatTarget> locate(const std::string& path, std::span<const std::string> names, const FormatOptions& options) const override {
    if (names.size() == 2) {
      SW_ASSIGN_OR_RETURN(std::unique_ptr<TensorFile> file, open(path, names.first(1), options));
      return cat_tensor(std::move(file), names[1]);
    }
    if (names.size() != 1) return needs_member(path, "cat takes ENTRY, or ENTRY TENSOR");
    SW_ASSIGN_OR_RETURN(Reader reader, open_archive(path, options));
    CatTarget target;
    SW_ASSIGN_OR_RETURN(target.source, reader.open_entry(names[0]));
    target.length = target.source->size();
    return target;
  }
};

}  // namespace

const Format& dduf_format() {
  static const DdufFormat format;
  return format;
}

}  // namespace safeweights::dduf

// PyTorch checkpoints in the format registry: detection by magic bytes and structure, then validate,
// inspect, open and cat through the checkpoint reader (safeweights/pytorch.h).
#include "pytorch/format.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/little_endian.h"
#include "core/status_macros.h"
#include "pytorch/index.h"
#include "safeweights/pytorch.h"
#include "safeweights/text.h"
#include "safeweights/zip.h"

namespace safeweights::pytorch {
namespace {

bool starts_with_bytes(std::span<const std::byte> head, std::initializer_list<unsigned char> bytes) {
  if (head.size() < bytes.size()) return false;
  return std::equal(bytes.begin(), bytes.end(), head.begin(), [](unsigned char a, std::byte b) { return std::byte{a} == b; });
}

// torch's ZIP writer: torch.save puts "<root>/data.pkl" first; torch.jit.save (TorchScript, refused
// by name when read) starts with "<root>/data/<key>", "<root>/code/...", "<root>/constants.pkl" or
// "<root>/.data/...". torch.load finds every record by name, so an archive another writer made may start
// with any of them (torch reads "<root>/version" first and data.pkl wherever it lies). A first member
// that is one of torch's records claims the archive (above DDUF's ZIP magic), at any depth: the reader
// then names the depth torch.load needs. None of them is a DDUF entry name (DDUF holds only .json,
// .model, .safetensors and .txt files), so no DDUF archive is claimed.
bool is_torch_record(std::string_view name) {
  const std::size_t slash = name.rfind('/');
  const std::string_view last = slash == std::string_view::npos ? name : name.substr(slash + 1);
  if (last == "data.pkl" || last == "byteorder" || last == "version" || last == ".format_version" || last == ".storage_alignment") return true;
  // data/<key>: torch's storage keys are numbers (a key with a dot could be a DDUF folder's file).
  const std::string_view parent = slash == std::string_view::npos ? std::string_view() : name.substr(0, slash);
  if ((parent == "data" || parent.ends_with("/data")) && !last.empty() && last.find('.') == std::string_view::npos) return true;
  // .data/<anything> (.data/version, .data/serialization_id)
  const std::size_t hidden = name.find(".data/");
  return hidden != std::string_view::npos && (hidden == 0 || name[hidden - 1] == '/');
}

bool is_torch_zip(std::span<const std::byte> head) {
  constexpr std::size_t kNameAt = 30;  // fixed part of a local file header
  if (!starts_with_bytes(head, {'P', 'K', 3, 4}) || head.size() < kNameAt) return false;
  const std::size_t name_length = le::u16(head.data() + 26);
  if (head.size() < kNameAt + name_length) return false;
  const std::string_view name(reinterpret_cast<const char*>(head.data() + kNameAt), name_length);
  if (is_torch_record(name)) return true;
  const std::size_t slash = name.find('/');
  if (slash == std::string_view::npos || slash == 0) return false;
  const std::string_view rest = name.substr(slash + 1);
  return rest == "constants.pkl" || rest.starts_with("code/");
}

// The legacy format (before torch 1.6) opens with a protocol-2 pickle of the magic number
// 0x1950a86a20f9469cfc6c: PROTO 2, LONG1 of 10 bytes.
bool is_legacy_stream(std::span<const std::byte> head) {
  return starts_with_bytes(head, {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19});
}

// torch.save's tar format (torch < 0.4, refused by name when read): a POSIX tar, `ustar` at byte 257
// and the header's checksum right (the octal field at 148 is the sum of the 512 header bytes with the
// field itself counted as spaces). The magic alone is not enough: a safetensors header can hold
// "ustar" at byte 257 in a tensor name.
bool is_tar(std::span<const std::byte> head) {
  constexpr std::string_view kUstar = "ustar";
  constexpr std::size_t kBlock = 512, kSumAt = 148, kSumBytes = 8;
  if (head.size() < kBlock || std::memcmp(head.data() + 257, kUstar.data(), kUstar.size()) != 0) return false;
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i) sum += (i >= kSumAt && i < kSumAt + kSumBytes) ? ' ' : static_cast<unsigned>(head[i]);
  std::uint32_t recorded = 0;
  std::size_t i = kSumAt;
  while (i < kSumAt + kSumBytes && head[i] == std::byte{' '}) ++i;  // leading spaces
  const std::size_t digits_at = i;
  for (; i < kSumAt + kSumBytes && head[i] >= std::byte{'0'} && head[i] <= std::byte{'7'}; ++i)
    recorded = recorded * 8 + static_cast<unsigned>(head[i]) - '0';
  if (i == digits_at) return false;
  for (; i < kSumAt + kSumBytes; ++i) {  // then NULs or spaces only
    if (head[i] != std::byte{0} && head[i] != std::byte{' '}) return false;
  }
  return recorded == sum;
}

bool has_checkpoint_name(std::string_view path) {
  for (std::string_view ext : {".pt", ".pth", ".bin", ".ckpt"}) {
    if (path.size() >= ext.size() && path.substr(path.size() - ext.size()) == ext) return true;
  }
  return false;
}

Result<std::unique_ptr<Checkpoint>> open_with(const std::string& path, const FormatOptions& options) {
  return open_checkpoint_or_index(path, options);
}

std::string where_read(const Checkpoint& c) { return c.root().empty() ? std::string() : " under top-level key `" + printable(c.root()) + "`"; }

std::string inspect_json(const Checkpoint& c) {
  JsonWriter w;
  w.object().key("format").string("pytorch").key("container").string(c.container()).key("key");
  if (c.root().empty()) {
    w.null();
  } else {
    w.string(c.root());
  }
  w.key("tensors").array();
  for (const TensorEntry& e : c.tensors()) {
    w.object().key("name").string(e.name).key("dtype").string(type_name(e.type)).key("shape").uints(e.shape).end();
  }
  w.end().key("shared").array();
  for (const auto& group : c.shared()) {
    w.array();
    for (std::string_view name : group) w.string(name);
    w.end();
  }
  w.end().end();
  return std::move(w.text()) + "\n";
}

std::string inspect_text(const Checkpoint& c, const std::string& path) {
  std::string out;
  append_format(out, "file:        %s\nformat:      pytorch (%s)\ntensors:     %zu%s\n\n", printable(path).c_str(),
                std::string(c.container()).c_str(), c.tensors().size(), where_read(c).c_str());
  for (const TensorEntry& e : c.tensors())
    append_format(out, "%-6s %-20s %s\n", std::string(type_name(e.type)).c_str(), shape_string(e.shape).c_str(), printable(e.name).c_str());
  for (const auto& group : c.shared()) {
    out += "shared storage:";
    for (std::string_view n : group) {
      out += ' ';
      out += printable(n);
    }
    out += "\n";
  }
  return out;
}

class PytorchFormat final : public Format {
 public:
  std::string_view name() const noexcept override { return "pytorch"; }
  std::span<const std::string_view> claimed_extensions() const noexcept override {
    static constexpr std::string_view kClaimed[] = {".pt", ".pth", ".ckpt"};
    return kClaimed;
  }
  int detect(std::span<const std::byte> head, std::uint64_t, std::string_view path) const override {
    if (is_torch_zip(head) || is_legacy_stream(head)) return 4;  // magic bytes and structure: above DDUF's ZIP magic
    if (is_bin_index(head, path)) return 3;                      // above the safetensors index, which would read the shards as safetensors
    if (is_tar(head)) return 3;                                  // tar magic, any name: no other format reads tar
    return has_checkpoint_name(path) ? 1 : 0;
  }
  Result<std::string> validate(const std::string& path, const FormatOptions& options) const override {
    SW_ASSIGN_OR_RETURN(auto checkpoint, open_with(path, options));
    std::uint64_t bytes = 0;
    for (const TensorEntry& e : checkpoint->tensors()) bytes += e.nbytes;
    if (options.crc && checkpoint->container() == "zip") {
      SW_ASSIGN_OR_RETURN(SourcePtr source, resolver_of(options).open(path, options.backend));
      SW_ASSIGN_OR_RETURN(zip::Archive archive, zip::Archive::open(source, zip::ArchivePolicy::Container));
      if (Status s = archive.verify_all_crcs(); !s.is_ok()) return error_of(s).with_file(path);
    }
    return std::to_string(checkpoint->tensors().size()) + " tensors, " + human_bytes(bytes) + " of data" + where_read(*checkpoint);
  }
  Result<std::string> inspect(const std::string& path, std::span<const std::string> members, const FormatOptions& options, bool json) const override {
    SW_RETURN_IF_ERROR(no_members(path, members));
    SW_ASSIGN_OR_RETURN(auto checkpoint, open_with(path, options));
    return json ? inspect_json(*checkpoint) : inspect_text(*checkpoint, path);
  }
  Result<std::unique_ptr<TensorFile>> open(const std::string& path, std::span<const std::string> members,
                                           const FormatOptions& options) const override {
    SW_RETURN_IF_ERROR(no_members(path, members));
    SW_ASSIGN_OR_RETURN(auto checkpoint, open_with(path, options));
    return std::unique_ptr<TensorFile>(std::move(checkpoint));
  }

 private:
  static Status no_members(const std::string& path, std::span<const std::string> members) {
    if (members.empty()) return Status::ok();
    return Error(ErrorKind::InvalidArgument, "a PyTorch checkpoint has no members (ENTRY is for DDUF archives)").with_file(path);
  }
};

}  // namespace

const Format& pytorch_format() {
  static const PytorchFormat format;
  return format;
}

}  // namespace safeweights::pytorch

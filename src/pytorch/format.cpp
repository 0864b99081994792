// PyTorch checkpoints in the format registry. They are recognised (torch's ZIP format and the legacy
// pickle stream) and their ZIP container is checked, but their pickle is not read yet: every operation
// says so by name rather than failing somewhere in the ZIP layer.
#include "pytorch/format.h"

#include <algorithm>

#include "core/little_endian.h"
#include "core/status_macros.h"
#include "safeweights/zip.h"

namespace safeweights::pytorch {
namespace {

bool starts_with_bytes(std::span<const std::byte> head, std::initializer_list<unsigned char> bytes) {
  if (head.size() < bytes.size()) return false;
  return std::equal(bytes.begin(), bytes.end(), head.begin(), [](unsigned char a, std::byte b) { return std::byte{a} == b; });
}

// torch.save's ZIP format: the first member is "<root>/data.pkl".
bool is_torch_zip(std::span<const std::byte> head) {
  constexpr std::size_t kNameAt = 30;  // fixed part of a local file header
  if (!starts_with_bytes(head, {'P', 'K', 3, 4}) || head.size() < kNameAt) return false;
  const std::size_t name_length = le::u16(head.data() + 26);
  if (head.size() < kNameAt + name_length) return false;
  const std::string_view name(reinterpret_cast<const char*>(head.data() + kNameAt), name_length);
  constexpr std::string_view kPickle = "/data.pkl";
  return name.size() > kPickle.size() && name.substr(name.size() - kPickle.size()) == kPickle;
}

// The legacy format (before torch 1.6) opens with a protocol-2 pickle of the magic number
// 0x1950a86a20f9469cfc6c: PROTO 2, LONG1 of 10 bytes.
bool is_legacy_stream(std::span<const std::byte> head) {
  return starts_with_bytes(head, {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19});
}

bool has_checkpoint_name(std::string_view path) {
  for (std::string_view ext : {".pt", ".pth", ".bin", ".ckpt"}) {
    if (path.size() >= ext.size() && path.substr(path.size() - ext.size()) == ext) return true;
  }
  return false;
}

Error not_yet(const std::string& path, const std::string& what) {
  return Error(ErrorKind::NotSupported, what + ": PyTorch checkpoints are not supported yet").with_file(path);
}

// Checks what can be checked today (the ZIP container, every member's CRC), then says what is missing.
Error check_container(const std::string& path, const FormatOptions& options) {
  auto source = resolver_of(options).open(path, options.backend);
  if (!source.is_ok()) return std::move(source).error();
  std::byte head[16] = {};
  const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(sizeof head, (*source)->size()));
  if (Status s = (*source)->read_at(0, std::span<std::byte>(head, n)); !s.is_ok()) return std::move(s).error();
  if (is_legacy_stream(std::span<const std::byte>(head, n))) return not_yet(path, "a legacy (pre-1.6) PyTorch checkpoint");
  auto archive = zip::Archive::open(*source, zip::ArchivePolicy::Container);
  if (!archive.is_ok()) return std::move(archive).error();
  if (options.crc) {
    if (Status s = archive->verify_all_crcs(); !s.is_ok()) return std::move(s).error();
  }
  return not_yet(path, "a PyTorch checkpoint (ZIP container of " + std::to_string(archive->entries().size()) +
                           " members, structure" + (options.crc ? " and CRCs" : "") + " valid)");
}

class PytorchFormat final : public Format {
 public:
  std::string_view name() const noexcept override { return "pytorch"; }
  int detect(std::span<const std::byte> head, std::uint64_t, std::string_view path) const override {
    if (is_torch_zip(head) || is_legacy_stream(head)) return 4;  // magic bytes and structure: above DDUF's ZIP magic
    return has_checkpoint_name(path) ? 1 : 0;
  }
  Result<std::string> validate(const std::string& path, const FormatOptions& options) const override {
    return check_container(path, options);
  }
  Result<std::string> inspect(const std::string& path, std::span<const std::string>, const FormatOptions& options,
                              bool) const override {
    return check_container(path, options);
  }
  Result<std::unique_ptr<TensorFile>> open(const std::string& path, std::span<const std::string>,
                                           const FormatOptions& options) const override {
    return check_container(path, options);
  }
};

}  // namespace

const Format& pytorch_format() {
  static const PytorchFormat format;
  return format;
}

}  // namespace safeweights::pytorch

#include <mutex>
#include <optional>

#include "core/status_macros.h"
#include "safeweights/safetensors.h"

namespace safeweights::safetensors {

struct Reader::State {
  explicit State(Header h) : header(std::move(h)) {}
  Header header;
  // Built on first use: a caller that only parses (Python's safe_open, validate) never pays for them.
  std::once_flag entries_once, metadata_once;
  std::vector<TensorEntry> entries;  // in the order of header.tensors()
  std::optional<Metadata> metadata;
};

Reader::Reader(SourcePtr source, std::shared_ptr<State> state) : source_(std::move(source)), state_(std::move(state)), header_(&state_->header) {}

Result<Reader> Reader::open(const std::string& path, FileBackend backend, const ReadOptions& options) {
  SW_ASSIGN_OR_RETURN(SourcePtr source, open_file(path, backend));
  return open(std::move(source), options);
}

Result<Reader> Reader::open(SourcePtr source, const ReadOptions& options) {
  SW_ASSIGN_OR_RETURN(Header header, Header::parse(*source, options));
  return Reader(std::move(source), std::make_shared<State>(std::move(header)));
}

std::span<const TensorEntry> Reader::tensors() const noexcept {
  std::call_once(state_->entries_once, [&] {
    const auto infos = header_->tensors();
    state_->entries.reserve(infos.size());
    for (const TensorInfo& info : infos) state_->entries.push_back(entry(info));
  });
  return state_->entries;
}

const TensorEntry* Reader::find(std::string_view name) const noexcept {
  const TensorInfo* info = header_->find(name);
  return info ? &tensors()[static_cast<std::size_t>(info - header_->tensors().data())] : nullptr;
}

const Metadata* Reader::metadata() const noexcept {
  if (!header_->has_metadata()) return nullptr;
  std::call_once(state_->metadata_once, [&] { state_->metadata = Metadata::from_string_map(header_->metadata().entries()); });
  return &*state_->metadata;
}

}  // namespace safeweights::safetensors

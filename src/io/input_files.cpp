#include "io/input_files.h"

#include <sys/stat.h>

#include <cstdlib>
#include <optional>

#include "core/status_macros.h"
#include "core/strings.h"
#include "safeweights/http.h"

namespace safeweights {
namespace {

struct Identity {
  dev_t device;
  ino_t inode;
};

// The file `path` names, symbolic links followed; none for a URL or a name that is no local file.
std::optional<Identity> identity_of(const std::string& path) {
  struct stat st {};
  if (path.empty() || is_url(path) || ::stat(path.c_str(), &st) != 0) return std::nullopt;
  return Identity{st.st_dev, st.st_ino};
}

// `path` with every symbolic link, `.` and `..` resolved; empty when it cannot be.
std::string real_path(const std::string& path) {
  char* resolved = ::realpath(path.c_str(), nullptr);
  if (resolved == nullptr) return {};
  std::string real(resolved);
  std::free(resolved);
  return real;
}

class RecordingResolver final : public Resolver {
 public:
  RecordingResolver(const Resolver& inner, InputFiles& inputs) : inner_(inner), inputs_(inputs) {}
  Result<SourcePtr> open(const std::string& name, FileBackend backend) const override {
    auto opened = inner_.open(name, backend);
    if (opened.is_ok()) inputs_.add(name);
    return opened;
  }
  Result<std::vector<FolderEntry>> list(const std::string& name) const override { return inner_.list(name); }

 private:
  const Resolver& inner_;
  InputFiles& inputs_;
};

}  // namespace

void InputFiles::add(const std::string& path) {
  const auto id = identity_of(path);
  if (!id) return;
  std::lock_guard lock(mutex_);
  inputs_.push_back({id->device, id->inode, path});
}

Status InputFiles::check_output(const std::string& output) const {
  const auto id = identity_of(output);
  if (!id) return Status::ok();
  std::lock_guard lock(mutex_);
  for (const Input& input : inputs_) {
    if (input.device == id->device && input.inode == id->inode) {
      return Error(ErrorKind::InvalidArgument,
                   "the output is the input " + input.name + " (the same file): writing it would replace what is being read")
          .with_file(output);
    }
  }
  return Status::ok();
}

Status InputFiles::check_outputs(std::span<const std::string> outputs) const {
  for (const std::string& output : outputs) SW_RETURN_IF_ERROR(check_output(output));
  return Status::ok();
}

Status InputFiles::check_outside(const std::string& folder) const {
  const auto target = identity_of(folder);
  if (!target) return Status::ok();
  std::lock_guard lock(mutex_);
  for (const Input& input : inputs_) {
    // Every folder above the input's real path, up to the root.
    for (std::string above = folder_of(real_path(input.name)); !above.empty() && above != "."; above = folder_of(above)) {
      const auto id = identity_of(above);
      if (id && id->device == target->device && id->inode == target->inode) {
        return Error(ErrorKind::InvalidArgument, "the folder holds the input " + input.name + ": replacing it would remove what is being read")
            .with_file(folder);
      }
      if (above == "/") break;
    }
  }
  return Status::ok();
}

std::vector<std::string> InputFiles::names() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> names;
  for (const Input& input : inputs_) names.push_back(input.name);
  return names;
}

std::shared_ptr<const Resolver> recording_resolver(const Resolver& inner, InputFiles& inputs) {
  return std::make_shared<RecordingResolver>(inner, inputs);
}

}  // namespace safeweights

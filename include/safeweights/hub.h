// safeweights/hub.h — hf:// names: files of Hugging Face Hub repositories, resolved as huggingface_hub does.
//
// hf://ORG/REPO[@REVISION]/PATH names a file of a model repository, hf://datasets/ORG/REPO/... and
// hf://spaces/ORG/REPO/... of the other repository types (huggingface_hub's HfFileSystem spells them
// so). A revision holding '/' (refs/pr/1) is written percent-encoded (@refs%2Fpr%2F1). Such a name is
// read through the endpoint's resolve URL, $HF_ENDPOINT (default https://huggingface.co)
// /[TYPE/]ORG/REPO/resolve/REVISION/PATH, with every rule of safeweights/http.h; the hub answers with
// a redirect to its storage, which is followed without the token.
//
// The token: $HF_TOKEN, else the token file ($HF_TOKEN_PATH, else $HF_HOME/token, else
// ~/.cache/huggingface/token), sent only over https and only to huggingface.co, its subdomains and the
// origin of $HF_ENDPOINT, never to a host a redirect leads to (docs/REMOTE.md).
//
// Thread safety: the functions are reentrant; they read the environment (and the token file) when called.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "safeweights/error.h"
#include "safeweights/export.h"

namespace safeweights {
SAFEWEIGHTS_API_BEGIN

// True when `s` starts with hf:// (scheme case-insensitive).
bool is_hf_url(std::string_view s) noexcept;

struct HfLocation {
  std::string repo_type;  // "model", "dataset" or "space"
  std::string repo_id;    // "ORG/REPO"
  std::string revision;   // decoded; "main" when the name gives none
  std::string path;       // the file's path in the repository; empty for the repository itself
};

// Splits an hf:// name. InvalidArgument for a name without ORG/REPO, an empty revision, a bad
// percent-escape, a path with "." or ".." segments or a NUL.
Result<HfLocation> parse_hf_url(std::string_view url);

// $HF_ENDPOINT without trailing slashes, else "https://huggingface.co".
std::string hf_endpoint();

// The resolve URL of a file: ENDPOINT/[datasets/|spaces/]ORG/REPO/resolve/REVISION/PATH, with the
// revision and the path percent-encoded ('/' kept between path segments, not in the revision).
std::string hf_resolve_url(const HfLocation& location);

// The token, as huggingface_hub finds it: $HF_TOKEN, else the first line of the token file. nullopt
// when there is none. The token found is remembered, so that no error of this library repeats it
// (docs/REMOTE.md, "Credentials in messages").
std::optional<std::string> hf_token();

SAFEWEIGHTS_API_END
}  // namespace safeweights

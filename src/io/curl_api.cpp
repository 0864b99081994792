#include "io/curl_api.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace safeweights::curl {
namespace {

// The runtime name of the libcurl the headers came from (CMake passes the SONAME of the library it
// found, so a libcurl-gnutls build loads libcurl-gnutls.so.4).
#ifndef SAFEWEIGHTS_CURL_SONAME
#define SAFEWEIGHTS_CURL_SONAME "libcurl.so.4"
#endif

template <typename Fn>
bool resolve(void* lib, const char* symbol, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
  if (fn == nullptr && missing.empty()) missing = std::string("libcurl lacks ") + symbol;
  return fn != nullptr;
}

struct Loaded {
  Api table{};
  bool ok = false;
  std::string why;
};

Loaded load() {
  Loaded out;
  // Never unloaded: handles and global state live until the process ends.
  void* lib = dlopen(SAFEWEIGHTS_CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    out.why = std::string("cannot load " SAFEWEIGHTS_CURL_SONAME ": ") + (err ? err : "unknown error");
    return out;
  }
  Api& t = out.table;
  std::string& why = out.why;
  resolve(lib, "curl_global_init", t.global_init, why);
  resolve(lib, "curl_easy_init", t.easy_init, why);
  resolve(lib, "curl_easy_cleanup", t.easy_cleanup, why);
  resolve(lib, "curl_easy_reset", t.easy_reset, why);
  resolve(lib, "curl_easy_setopt", t.easy_setopt, why);
  resolve(lib, "curl_easy_getinfo", t.easy_getinfo, why);
  resolve(lib, "curl_easy_perform", t.easy_perform, why);
  resolve(lib, "curl_easy_strerror", t.easy_strerror, why);
  resolve(lib, "curl_slist_append", t.slist_append, why);
  resolve(lib, "curl_slist_free_all", t.slist_free_all, why);
  resolve(lib, "curl_url", t.url, why);
  resolve(lib, "curl_url_cleanup", t.url_cleanup, why);
  resolve(lib, "curl_url_set", t.url_set, why);
  resolve(lib, "curl_url_get", t.url_get, why);
  resolve(lib, "curl_free", t.free, why);
  if (!why.empty()) return out;
  if (t.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    why = "curl_global_init failed";
    return out;
  }
  out.ok = true;
  return out;
}

}  // namespace

const Api* api(const char** why) noexcept {
  // A function-local static: initialised on the first call only (thread-safe), not at start-up.
  static const Loaded loaded = load();
  if (!loaded.ok && why != nullptr) *why = loaded.why.c_str();
  return loaded.ok ? &loaded.table : nullptr;
}

}  // namespace safeweights::curl

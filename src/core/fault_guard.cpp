// The SIGBUS guard for reads from mappings (see fault_guard.h).
#include "core/fault_guard.h"

#include <atomic>
#include <csetjmp>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace safeweights {
namespace {

struct sigaction g_previous {};
std::once_flag g_installed;
// -1: not decided yet (the environment is read on first use), 0: off, 1: on.
std::atomic<int> g_enabled{-1};
// The innermost guarded section of this thread, or null. Set before the guarded code runs, so its
// storage exists by the time the handler reads it (no lazy TLS allocation inside the handler).
thread_local sigjmp_buf* t_section = nullptr;

// Faults outside a section get the behaviour they had before we installed ours.
void pass_on(int sig, siginfo_t* info, void* context) {
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) return g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    return g_previous.sa_handler(sig);
  }
  // Default action (a hardware fault cannot be ignored): restore it and return; the faulting
  // instruction runs again and the process ends with SIGBUS, as it would have without us.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGBUS, &dfl, nullptr);
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  if (sigjmp_buf* section = t_section) siglongjmp(*section, 1);
  pass_on(sig, info, context);
}

void install() {
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  // SA_NODEFER: SIGBUS stays unblocked after the jump, so the sections can use sigsetjmp(.., 0),
  // which saves no signal mask and makes no system call.
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, &g_previous);
}

// SAFEWEIGHTS_NO_FAULT_GUARD=1 turns the guard off. Read once, while the library is initialised (before
// main, on one thread), so no read of the environment can race with a host's setenv later.
const bool g_env_turns_guard_off = [] {
  const char* env = std::getenv("SAFEWEIGHTS_NO_FAULT_GUARD");
  return env != nullptr && std::strcmp(env, "1") == 0;
}();

bool guard_enabled() noexcept {
  int enabled = g_enabled.load(std::memory_order_relaxed);
  if (enabled < 0) {
    // A caller's set_mapping_fault_guard() made first wins over the environment.
    g_enabled.compare_exchange_strong(enabled, g_env_turns_guard_off ? 0 : 1, std::memory_order_relaxed);
    enabled = g_enabled.load(std::memory_order_relaxed);
  }
  return enabled == 1;
}

}  // namespace

void set_mapping_fault_guard(bool enabled) noexcept { g_enabled.store(enabled ? 1 : 0, std::memory_order_relaxed); }
bool mapping_fault_guard() noexcept { return guard_enabled(); }

bool run_guarded(void (*fn)(void*), void* ctx) noexcept {
  if (!guard_enabled()) {
    fn(ctx);
    return true;
  }
  std::call_once(g_installed, install);
  sigjmp_buf section;
  sigjmp_buf* const outer = t_section;
  if (sigsetjmp(section, 0) != 0) {
    t_section = outer;
    return false;
  }
  t_section = &section;
  // The handler reads t_section, which the compiler cannot see: without the fences, once fn is inlined
  // (run_guarded is internal, so GCC clones it per callback) the store above is dead to it and is dropped,
  // and a fault inside fn finds no section.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  fn(ctx);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_section = outer;
  return true;
}

Error mapping_shrank(const std::string& name, std::uint64_t offset) {
  return Error(ErrorKind::IoError, "unexpected end of file: the file shrank while it was read through its mapping")
      .with_file(name)
      .with_offset(offset);
}

Status guarded_copy(std::byte* dst, const std::byte* src, std::size_t n, const std::string& name, std::uint64_t offset) {
  if (n == 0) return Status::ok();
  if (!guarded([&] { std::memcpy(dst, src, n); })) return mapping_shrank(name, offset);
  return Status::ok();
}

}  // namespace safeweights

// Test servers for the HTTP tests: a real nginx (Debian package) and tests/http/fault_server.py, each
// started by this process on a free 127.0.0.1 port with everything (config, pid, logs, temp folders,
// served files) in a fresh temporary folder, and stopped when the tests end. Each child gets
// PR_SET_PDEATHSIG, so a crashed test cannot leave a server running.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace swhttp {

namespace fs = std::filesystem;

inline bool under_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

inline pid_t spawn(const std::vector<std::string>& argv, int stdout_fd = -1) {
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  if (stdout_fd >= 0) ::dup2(stdout_fd, 1);
  int devnull = ::open("/dev/null", O_RDWR);
  if (devnull >= 0) {
    ::dup2(devnull, 0);
    if (stdout_fd < 0) ::dup2(devnull, 1);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  ::_exit(127);
}

inline void stop(pid_t& pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  for (int i = 0; i < 200; ++i) {  // at most 2 s, then no more patience
    if (::waitpid(pid, nullptr, WNOHANG) == pid) {
      pid = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  pid = -1;
}

inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

inline bool can_connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

struct Servers {
  fs::path dir, www;
  int nginx_port = -1, fault_port = -1;
  int tls_port = -1;  // nginx's https listener, with a self-signed certificate for 127.0.0.1 (ca_file())
  pid_t nginx_pid = -1, fault_pid = -1;
  std::string problem;  // why the servers could not start

  std::string nginx_url(const std::string& file) const { return "http://127.0.0.1:" + std::to_string(nginx_port) + "/" + file; }
  std::string fault_url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(fault_port) + path; }
  fs::path access_log() const { return dir / "access.log"; }
  std::string nginx_https_url(const std::string& file) const { return "https://127.0.0.1:" + std::to_string(tls_port) + "/" + file; }
  fs::path ca_file() const { return dir / "cert.pem"; }

  // A throwaway self-signed certificate for 127.0.0.1 (openssl, Debian's), which is also the CA file
  // clients must be given to trust it.
  bool make_certificate() {
    const char* openssl = "/usr/bin/openssl";
    if (::access(openssl, X_OK) != 0) return false;
    pid_t pid =
        spawn({openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", (dir / "key.pem").string(),
               "-out", ca_file().string(), "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"});
    int status = 0;
    return pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0 && fs::exists(ca_file());
  }

  bool start_nginx() {
    const char* nginx = "/usr/sbin/nginx";
    if (::access(nginx, X_OK) != 0) {
      problem = "nginx is not installed (/usr/sbin/nginx); scripts/install-deps.sh installs it";
      return false;
    }
    const bool tls = make_certificate();
    for (int attempt = 0; attempt < 5; ++attempt) {
      nginx_port = free_port();
      tls_port = tls ? free_port() : -1;
      const std::string tls_listen = tls ? " listen 127.0.0.1:" + std::to_string(tls_port) + " ssl; ssl_certificate " + ca_file().string() +
                                               "; ssl_certificate_key " + (dir / "key.pem").string() + ";"
                                         : "";
      const fs::path conf = dir / "nginx.conf", pid = dir / "nginx.pid";
      fs::remove(pid);
      std::ofstream(conf)
          << "daemon off;\nmaster_process off;\nworker_processes 1;\n"
          << "pid " << pid.string() << ";\nerror_log " << (dir / "error.log").string() << " warn;\n"
          << "events { worker_connections 512; }\nhttp {\n"
          << "  access_log " << access_log().string() << ";\n"
          << "  client_body_temp_path " << (dir / "t1").string() << "; proxy_temp_path " << (dir / "t2").string() << "; fastcgi_temp_path "
          << (dir / "t3").string() << "; uwsgi_temp_path " << (dir / "t4").string() << "; scgi_temp_path " << (dir / "t5").string() << ";\n"
          << "  keepalive_requests 100000;\n"
          << "  server { listen 127.0.0.1:" << nginx_port << ";" << tls_listen << " root "
          << www.string()
          // /auth/: only for "Authorization: Bearer tok" (where HF_TOKEN may go, and where not)
          << "; location /auth/ { if ($http_authorization != \"Bearer tok\") { return 401; } }"
          // A hostile Hub: the repository org/reflect refuses its files and its tree with
          // the request's Authorization in X-Error-Message.
          << " location ~ ^/(api/models/)?org/reflect/ { add_header X-Error-Code GatedRepo always;"
          << " add_header X-Error-Message \"Access to this model is restricted for $http_authorization\" always; return 401; } }\n}\n";
      nginx_pid = spawn({nginx, "-p", dir.string(), "-c", conf.string(), "-e", (dir / "error.log").string()});
      // nginx writes its pid file after binding the port: both together mean it serves.
      for (int i = 0; i < 500; ++i) {
        if (::waitpid(nginx_pid, nullptr, WNOHANG) == nginx_pid) {
          nginx_pid = -1;
          break;
        }
        if (fs::exists(pid) && can_connect(nginx_port) && (tls_port < 0 || can_connect(tls_port))) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      stop(nginx_pid);
    }
    problem = "nginx did not start; see " + (dir / "error.log").string();
    return false;
  }

  bool start_fault_server(const std::string& script) {
    const char* python = "/usr/bin/python3";
    if (::access(python, X_OK) != 0) {
      problem = "python3 is not installed (/usr/bin/python3)";
      return false;
    }
    int fds[2];
    if (::pipe(fds) != 0) return false;
    fault_pid = spawn({python, script, "--root", www.string()}, fds[1]);
    ::close(fds[1]);
    std::string line;
    pollfd p{fds[0], POLLIN, 0};
    while (line.find('\n') == std::string::npos && ::poll(&p, 1, 10'000) > 0) {
      char buf[64];
      ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n <= 0) break;
      line.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fds[0]);
    fault_port = std::atoi(line.c_str());
    if (fault_port <= 0) {
      problem = "the fault server did not start";
      stop(fault_pid);
      return false;
    }
    return true;
  }

  bool start(const std::string& fault_script) {
    char tmpl[] = "/tmp/safeweights-http-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      problem = "cannot create a temporary folder";
      return false;
    }
    dir = tmpl;
    www = dir / "www";
    fs::create_directories(www);
    // No script: nginx only (the benchmark).
    return start_nginx() && (fault_script.empty() || start_fault_server(fault_script));
  }

  void shutdown() {
    stop(nginx_pid);
    stop(fault_pid);
    if (!dir.empty()) {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  }
};

}  // namespace swhttp

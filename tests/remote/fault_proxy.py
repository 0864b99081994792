"""A fault-injecting HTTP proxy in front of the S3 server: requests pass through unchanged (Host included,
so SigV4 signatures stay valid) unless the current fault says otherwise.

Faults (Proxy.fault, set by a test; each counts the GETs it has seen in Proxy.gets):
  None                      pass everything through
  ("slowdown", n)           the first n GETs get 503 SlowDown, as S3 throttles
  ("truncate", n)           the first n GETs with a body are cut after half of it (the connection closes)
  ("drip", seconds)         every body byte waits `seconds` (a server that stalls)
  ("redirect", url)         every GET gets 307 to url + the path (another origin)
  ("after_first", callback) callback() runs when the first GET has its upstream answer, before it is
                            sent on (an object replaced between two requests of one read)
"""

from __future__ import annotations

import http.client
import http.server
import threading
import time

SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request rate.'
            b'</Message></Error>')


class Proxy:
    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.fault = None
        self.gets = 0
        self.lock = threading.Lock()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def set(self, fault) -> None:
        with self.lock:
            self.fault = fault
            self.gets = 0

    def _handler(self):
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802
                with proxy.lock:
                    proxy.gets += 1
                    n, fault = proxy.gets, proxy.fault
                kind = fault[0] if fault else None
                if kind == "slowdown" and n <= fault[1]:
                    return self.reply(503, SLOWDOWN, {"Content-Type": "application/xml"})
                if kind == "redirect":
                    return self.reply(307, b"", {"Location": fault[1] + self.path})
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                upstream.request("GET", self.path, headers=dict(self.headers))
                resp = upstream.getresponse()
                body = resp.read()
                upstream.close()
                headers = {k: v for k, v in resp.getheaders() if k.lower() not in ("content-length", "transfer-encoding", "connection")}
                if kind == "truncate" and n <= fault[1] and len(body) > 1:
                    self.send_response(resp.status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if kind == "drip":
                    self.send_response(resp.status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    try:
                        for i in range(len(body)):
                            self.wfile.write(body[i:i + 1])
                            self.wfile.flush()
                            time.sleep(fault[1])
                    except OSError:
                        pass
                    self.close_connection = True
                    return
                if kind == "after_first" and n == 1:
                    fault[1]()  # before the reply: the client's next request finds the new object
                self.reply(resp.status, body, headers)

            def reply(self, status, body, headers):
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler

    def stop(self) -> None:
        self.server.shutdown()

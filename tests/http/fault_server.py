#!/usr/bin/env python3
"""An HTTP/1.1 file server for the faults nginx cannot produce on demand (tests only, loopback only).

Serves files from --root with Range support, ETag and Last-Modified, like nginx. Query parameters
make a URL misbehave; each counter is kept per full request path (query included), so tests choose
independent behaviour by adding e.g. `&tag=name`:

  fail500=K       the first K requests answer 500
  always500=1     every request answers 500
  drop=K          the first K ranged responses over 100 kB send half the body, then close the connection
  cut=K           every ranged response over 100 kB sends 1/K of its body, then closes the connection
  trickle=1       correct headers, then the body 2 bytes every 0.5 s
  slowheaders=1   the status line, then one header line every 0.5 s, forever
  endless=1       the status line, then header lines as fast as the client takes them, forever
  bigheader=1     a 1 MB header line
  gzip=1          the body gzip-compressed, with Content-Encoding: gzip (never asked for), no length
  novalidator=1   no ETag nor Last-Modified (with change_after: a new version nobody can see)
  norange=1       ignore Range: always 200 with the whole file
  pad_to=N        the file is N bytes long: its bytes, then zeros (a server claiming a huge file)
  change_after=K  after K requests the file is a new version (new ETag; with grow=1 also one byte longer)
  forbid_auth=1   400 if an Authorization header arrives (checks a redirect dropped it)
  require_auth=V  401 unless Authorization is exactly V
  reflect=1       401 whose X-Error-Message and body repeat the request's Authorization and X-Api-Key
                  (after pad=N dots: a credential where a client cuts the message)
  /redirect?to=URL        302 to URL
  /count?path=P           the number of requests seen for P (P as the server saw it, query included)

Hostile listings and a hostile S3 (path-style buckets, any credentials accepted):

  /endless/?list-type=2...          ListObjectsV2 pages, each after PAGE_PAUSE s, each truncated with
                                    a next continuation token, ENDLESS_PAGES pages in all
  /api/models/org/endless/tree/...  the same as Hub tree pages with a Link to the next page
  /reflect/... (bucket "reflect")   403 with an S3 XML error whose <Message> repeats the session token
                                    (as is and percent-encoded), the access key id of the signature,
                                    and REFLECTED_SECRET, a secret key the server "knows"

Prints the port it listens on (127.0.0.1, chosen by the kernel) on stdout, then serves until killed.
"""
import argparse
import gzip
import http.server
import os
import re
import sys
import threading
import time
import urllib.parse

COUNTS = {}
LOCK = threading.Lock()
# The endless listings: a page every PAGE_PAUSE seconds, always with a next one until ENDLESS_PAGES (a
# bound only so that a client with no overall deadline still ends, after ENDLESS_PAGES * PAGE_PAUSE s).
PAGE_PAUSE = 0.25
ENDLESS_PAGES = 40
# The secret key /reflect/ repeats, as a server that knows it (a hostile proxy, a leaking log) would.
REFLECTED_SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYREFLECTED0"


def bump(key):
    with LOCK:
        COUNTS[key] = COUNTS.get(key, 0) + 1
        return COUNTS[key]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    root = "."

    def log_message(self, *args):  # quiet: the tests read counters, not logs
        pass

    def small(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        if url.path == "/count":
            self.small(200, str(COUNTS.get(q.get("path", ""), 0)).encode())
            return
        n = bump(self.path)
        if url.path.strip("/") == "endless" and "list-type" in q:
            return self.s3_page(q)
        if url.path.startswith("/api/models/org/endless/tree/"):
            return self.hub_page(url.path, q)
        if url.path.strip("/").split("/")[0] == "reflect":
            return self.s3_reflect()
        if q.get("reflect"):
            said = "." * int(q.get("pad", 0)) + "bad credentials: Authorization: %s; X-Api-Key: %s" % (
                self.headers.get("Authorization"), self.headers.get("X-Api-Key"))
            self.small(401, said.encode(), headers=[("X-Error-Code", "Unauthorized"), ("X-Error-Message", said)])
            return
        if url.path == "/redirect":
            self.small(302, headers=[("Location", q["to"])])
            return
        auth = self.headers.get("Authorization")
        if q.get("forbid_auth") and auth is not None:
            self.small(400, b"authorization header leaked")
            return
        if "require_auth" in q and auth != q["require_auth"]:
            self.small(401, b"authorization required")
            return
        if q.get("always500") or n <= int(q.get("fail500", 0)):
            self.small(500, b"try again")
            return
        if q.get("slowheaders") or q.get("endless"):
            self.wfile.write(b"HTTP/1.1 206 Partial Content\r\n")
            for i in range(10_000_000 if q.get("endless") else 1200):
                self.wfile.write(b"X-Filler-%d: %s\r\n" % (i, b"x" * 64))
                if q.get("slowheaders"):
                    time.sleep(0.5)
            self.close_connection = True
            return
        name = os.path.basename(url.path)
        path = os.path.join(self.root, name)
        if not name or not os.path.isfile(path):
            self.small(404, b"not found")
            return
        with open(path, "rb") as f:
            data = f.read()
        version = 1
        if "change_after" in q and n > int(q["change_after"]):
            version = 2
            if q.get("grow"):
                data = data + b"\0"
        total = int(q["pad_to"]) if "pad_to" in q else len(data)
        etag = '"v%d-%d"' % (version, total)
        common = [("ETag", etag), ("Last-Modified", "Mon, 0%d Jan 2024 00:00:00 GMT" % version),
                  ("Accept-Ranges", "bytes")]
        if q.get("novalidator"):
            common = common[2:]
            if version == 2:  # same size, other bytes: only a comparison with earlier bytes can tell
                data = bytes(b ^ 0xFF for b in data[:4096]) + data[4096:]
        if q.get("bigheader"):
            common.append(("X-Big", "b" * 1_000_000))
        rng = self.headers.get("Range")
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng or "")
        if q.get("norange") or not m:
            self.send_response(200)
            for k, v in common:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client cut the transfer once it had its bytes
            return
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) else total - 1
        if first >= total:
            self.small(416, headers=[("Content-Range", "bytes */%d" % total)])
            return
        last = min(last, total - 1)
        body = data[first:last + 1]
        body += b"\0" * (last + 1 - first - len(body))  # pad_to: zeros past the real bytes
        if q.get("gzip"):
            body = gzip.compress(body)
            common.append(("Content-Encoding", "gzip"))
        self.send_response(206)
        for k, v in common:
            self.send_header(k, v)
        self.send_header("Content-Range", "bytes %d-%d/%d" % (first, last, total))
        if q.get("gzip"):  # as proxies that compress on the fly do: no length, the end is the close
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if q.get("trickle"):
            for i in range(0, min(len(body), 2400), 2):
                self.wfile.write(body[i:i + 2])
                time.sleep(0.5)
            self.close_connection = True
            return
        if len(body) > 100_000 and int(q.get("cut", 0)) > 0:
            self.wfile.write(body[: len(body) // int(q["cut"])])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        # Only bodies over 100 kB are cut, so the opening request (64 KiB) gets through and the
        # cut lands in a large read, which must resume after the bytes it already has.
        if len(body) > 100_000 and bump(self.path + "#drop") <= int(q.get("drop", 0)):
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


    def s3_page(self, q):
        page = int(q.get("continuation-token", "t0")[1:])
        time.sleep(PAGE_PAUSE)
        more = page + 1 < ENDLESS_PAGES
        body = ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>endless</Name><Prefix></Prefix>'
                "<Contents><Key>f%d</Key><Size>1</Size></Contents><IsTruncated>%s</IsTruncated>%s</ListBucketResult>"
                % (page, "true" if more else "false", "<NextContinuationToken>t%d</NextContinuationToken>" % (page + 1) if more else ""))
        self.small(200, body.encode(), headers=[("Content-Type", "application/xml")])

    def hub_page(self, path, q):
        page = int(q.get("cursor", "0"))
        time.sleep(PAGE_PAUSE)
        headers = [("Content-Type", "application/json")]
        if page + 1 < ENDLESS_PAGES:
            headers.append(("Link", '<http://%s%s?cursor=%d>; rel="next"' % (self.headers["Host"], path, page + 1)))
        self.small(200, ('[{"type": "file", "path": "f%d", "size": 1}]' % page).encode(), headers=headers)

    def s3_reflect(self):
        token = self.headers.get("x-amz-security-token", "")
        credential = re.search(r"Credential=([^/,]*)", self.headers.get("Authorization", ""))
        message = ("Access Denied for %s with session token %s (encoded %s); the secret key is %s"
                   % (credential.group(1) if credential else "nobody", token, urllib.parse.quote(token, safe=""), REFLECTED_SECRET))
        body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied</Code><Message>%s</Message></Error>" % message
        self.small(403, body.encode(), headers=[("Content-Type", "application/xml")])


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # clients cutting transfers on purpose is the point of several tests


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    Handler.root = args.root
    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""A fake Hugging Face hub on 127.0.0.1 for the kernrt-fetch tests (ctest, no network).

Serves ROOT/<org>/<repo>/<revision>/<path> at /<org>/<repo>/resolve/<revision>/<path>
with HTTP Range support (206 + Content-Range), and a few paths that misbehave on
purpose, chosen by a path segment:
  truncated/  sends half the body of a full Content-Length, then closes (a request with
              a Range is served whole, so a resume completes it)
  slow/       sends 1,000 bytes, then stalls for LIFETIME seconds
  moved/      302 to http://localhost:PORT/cdn/<org>/<repo>/<revision>/<rest>; /cdn/
              answers 403 when the request carries an Authorization header (a token must
              not follow a redirect to another host)
  private/    401 unless "Authorization: Bearer sekrit"
Anything else missing is a 404. Every request is appended to LOG as one line:
"<path> range=<Range or -> auth=<yes|no>". The server writes its port to PORT_FILE once
listening and exits by itself after LIFETIME seconds, so a test can never leave it
running. Python 3 standard library only. Usage:
  fake_hub.py ROOT PORT_FILE LOG [LIFETIME]
"""
import http.server
import os
import socketserver
import sys
import threading
import time


class Hub(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet: the LOG file records requests
        pass

    def record(self):
        with open(self.server.log, "a") as f:
            f.write("%s range=%s auth=%s\n" % (self.path, self.headers.get("Range", "-"),
                                               "yes" if self.headers.get("Authorization") else "no"))

    def fail(self, code):
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self.record()
        parts = self.path.lstrip("/").split("/")
        if parts and parts[0] == "cdn":
            if self.headers.get("Authorization"):
                return self.fail(403)
            return self.serve(os.path.join(self.server.root, *parts[1:]), parts)
        if len(parts) < 5 or parts[2] != "resolve":
            return self.fail(404)
        org, repo, _, rev = parts[:4]
        rest = parts[4:]
        if "moved" in rest:
            self.send_response(302)
            self.send_header("Location", "http://localhost:%d/cdn/%s" % (
                self.server.server_address[1], "/".join([org, repo, rev] + rest)))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if "private" in rest and self.headers.get("Authorization") != "Bearer sekrit":
            return self.fail(401)
        self.serve(os.path.join(self.server.root, org, repo, rev, *rest), parts)

    def serve(self, path, parts):
        if not os.path.isfile(path):
            return self.fail(404)
        with open(path, "rb") as f:
            body = f.read()
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= len(body):
                return self.fail(416)
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(body) - 1, len(body)))
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        payload = body[start:]
        if "truncated" in parts and not rng:
            self.wfile.write(payload[:len(payload) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        if "slow" in parts:
            self.wfile.write(payload[:1000])
            self.wfile.flush()
            time.sleep(self.server.lifetime)
            return
        self.wfile.write(payload)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    root, port_file, log = sys.argv[1:4]
    lifetime = float(sys.argv[4]) if len(sys.argv) > 4 else 120.0
    server = Server(("127.0.0.1", 0), Hub)
    server.root, server.log, server.lifetime = root, log, lifetime
    threading.Timer(lifetime, lambda: os._exit(0)).start()
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()

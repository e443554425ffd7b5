"""What an EC2 instance reaches besides AWS's APIs, on loopback, for
boot_script_runs.rs: the instance metadata service (IMDSv2 only: a GET
without a session token is refused) over HTTP, and Elastic's artifact server
over HTTPS (a certificate for artifacts.elastic.co that the test made).
curl reaches both through `connect-to` lines in the test's .curlrc, so the
boot script's own curl runs unchanged.

Usage: endpoints.py INSTANCE_ID ZONE ARTIFACTS_DIR CERT KEY LOG
Prints "IMDS_PORT HTTPS_PORT" once both listen, then serves until killed.
"""

import http.server
import os
import secrets
import ssl
import sys
import threading

instance_id, zone, artifacts, cert, key, log_path = sys.argv[1:7]
token = secrets.token_hex(16)
lock = threading.Lock()


def log(line):
    with lock, open(log_path, "a") as f:
        f.write(line + "\n")


class Imds(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, body=b""):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self):
        ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        log(f"imds PUT {self.path} ttl={ttl}")
        if self.path == "/latest/api/token" and ttl:
            self.reply(200, token.encode())
        else:
            self.reply(400)

    def do_GET(self):
        ok = self.headers.get("X-aws-ec2-metadata-token") == token
        log(f"imds GET {self.path} token={'valid' if ok else 'missing'}")
        if not ok:
            return self.reply(401)
        values = {
            "/latest/meta-data/instance-id": instance_id,
            "/latest/meta-data/placement/availability-zone": zone,
            "/latest/meta-data/local-ipv4": "10.0.1.23",
        }
        if self.path in values:
            self.reply(200, values[self.path].encode())
        else:
            self.reply(404)


class Artifacts(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        log(f"artifacts GET {self.path} host={self.headers.get('Host')}")
        prefix = "/downloads/elasticsearch/"
        name = self.path[len(prefix):] if self.path.startswith(prefix) else ""
        path = os.path.join(artifacts, name)
        if not name or "/" in name or not os.path.isfile(path):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        with open(path, "rb") as f:
            body = f.read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


imds = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Imds)
https = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Artifacts)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
https.socket = context.wrap_socket(https.socket, server_side=True)
threading.Thread(target=https.serve_forever, daemon=True).start()
print(imds.server_address[1], https.server_address[1], flush=True)
imds.serve_forever()

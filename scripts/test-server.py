"""Test fixture server for scripts/fake-internet: serves a directory over HTTP or HTTPS,
answers POST, and appends one line per request ("METHOD PATH") to a log file, so tests can
prove what did or did not reach it. Usage: test-server.py PORT ADDR DIR LOG [CERT KEY] MARK"""
import http.server
import os
import socketserver
import ssl
import sys

port, addr, root, log = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
cert = sys.argv[5] if len(sys.argv) > 7 else None
key = sys.argv[6] if len(sys.argv) > 7 else None
os.chdir(root)


class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass

    def log_request(self, code="-", size="-"):
        with open(log, "a") as f:
            f.write(f"{self.command} {self.path}\n")

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        body = b"posted"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(http.server.ThreadingHTTPServer):
    # No reverse DNS lookup at bind time: no resolver answers on the test machines.
    def server_bind(self):
        socketserver.TCPServer.server_bind(self)
        self.server_name = "test"
        self.server_port = self.server_address[1]


srv = Server((addr, port), Handler)
if cert:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()

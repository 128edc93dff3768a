#!/usr/bin/env python3
"""A test HTTP server: answers every GET with TEXT.  serve.py ADDRESS PORT TEXT

Used by tests/nix/build.sh (host loopback servers) and the NixOS VM checks (the same servers,
and the fake internet host)."""
import http.server
import sys

address, port, text = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(text)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(text)

    def log_message(self, *args):
        pass


class Server(http.server.HTTPServer):
    # No reverse DNS lookup of the address at bind time: no resolver answers in the tests.
    def server_bind(self):
        http.server.socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "test", self.server_address[1]


Server((address, port), Handler).serve_forever()

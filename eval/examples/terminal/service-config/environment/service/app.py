"""A tiny health-check service configured by config.ini."""

import configparser
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

config = configparser.ConfigParser()
config.read("config.ini")
server = config["server"]
if not server.getboolean("enabled", fallback=False):
    sys.exit("the service is disabled in config.ini ([server] enabled)")
port = server.getint("port")


class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"ok" if self.path == "/health" else b"not found"
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


HTTPServer((server.get("host", "127.0.0.1"), port), Health).serve_forever()

# The smallest agent behind the pipeline: an HTTP service that reads the E2A
# envelope and answers E2A frames as NDJSON. Python's standard library only.
#   python3 examples/httpagent/agent.py 8001 &
#   e2a agent --pool py --http http://127.0.0.1:8001/
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Agent(BaseHTTPRequestHandler):
    def do_GET(self): self.send_response(204); self.end_headers()  # the pool's check at start
    def do_POST(self):
        p = json.loads(self.rfile.read(int(self.headers["Content-Length"]))).get("params") or {}
        blocks = p.get("prompt") if isinstance(p.get("prompt"), list) else []  # ACP: a list of content blocks
        prompt = [str(b["text"]) for b in blocks if isinstance(b, dict) and b.get("type") == "text" and b.get("text") is not None]
        text = p["text"] if isinstance(p.get("text"), str) else "".join(prompt)  # A2A and E2A: params.text
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.end_headers()
        def frame(kind, body): self.wfile.write((json.dumps({"response_kind": kind, "body": body}) + "\n").encode())
        for word in ("Python heard: " + text).split(" "):
            frame("e2a.chunk", {"delta_kind": "text", "delta": word + " "})
        frame("e2a.complete", {"result": {"words": len(text.split())}})

srv = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 8001), Agent)
print("listening on", srv.server_address[1], flush=True)
srv.serve_forever()

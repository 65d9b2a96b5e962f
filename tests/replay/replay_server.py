#!/usr/bin/env python3
"""replay_server.py: a stand-in for the Anthropic and OpenAI APIs in tests.

It listens on 127.0.0.1 on a port the OS picks, writes that port to a file,
and answers POST /v1/messages (Anthropic) and POST /v1/chat/completions
(OpenAI-compatible) from a JSON script: one queue of responses per API,
served in order. Every request it receives is appended to a log file as one
JSON line (api, path, headers, body), which tests read to check the prompts.

Script format:
  {"anthropic": [RESPONSE, ...], "openai": [RESPONSE, ...]}
RESPONSE:
  {"status": 200,                 # default 200
   "headers": {"retry-after": "1"},
   "delay_s": 0.5,                # wait before answering (timeouts)
   "text": "...",                 # an assistant message, wrapped in the API's JSON,
   "usage": {"input": 100, "output": 20, "cached": 0},  # with this usage
   "stop": "end_turn",            # optional stop reason
   "body": {...} | "raw text"}    # or the exact body (overrides text)
When a queue is empty the server answers 400 "replay script exhausted".

Usage: replay_server.py SCRIPT PORT_FILE LOG_FILE
Python 3 standard library only.
"""
import http.server
import json
import os
import sys
import threading
import time


class Replay:
    def __init__(self, script, log_path):
        self.queues = {"anthropic": list(script.get("anthropic", [])),
                       "openai": list(script.get("openai", []))}
        self.log_path = log_path
        self.lock = threading.Lock()
        self.counter = 0

    def next(self, api, record):
        with self.lock:
            self.counter += 1
            record["seq"] = self.counter
            with open(self.log_path, "a") as log:
                log.write(json.dumps(record) + "\n")
            queue = self.queues[api]
            return queue.pop(0) if queue else None


def wrap(api, resp):
    usage = resp.get("usage", {})
    text = resp.get("text", "")
    if api == "anthropic":
        return {
            "id": "msg_replay", "type": "message", "role": "assistant",
            "model": resp.get("model", "replay"),
            "content": [{"type": "text", "text": text}],
            "stop_reason": resp.get("stop", "end_turn"),
            "usage": {"input_tokens": usage.get("input", 0),
                      "output_tokens": usage.get("output", 0),
                      "cache_read_input_tokens": usage.get("cached", 0)},
        }
    cached = usage.get("cached", 0)
    return {
        "id": "chatcmpl-replay", "object": "chat.completion",
        "model": resp.get("model", "replay"),
        "choices": [{"index": 0, "finish_reason": resp.get("stop", "stop"),
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": usage.get("input", 0) + cached,
                  "completion_tokens": usage.get("output", 0),
                  "prompt_tokens_details": {"cached_tokens": cached}},
    }


def make_handler(replay):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def do_POST(self):
            length = int(self.headers.get("content-length", "0"))
            raw = self.rfile.read(length).decode("utf-8", "replace")
            if self.path == "/v1/messages":
                api = "anthropic"
            elif self.path == "/v1/chat/completions":
                api = "openai"
            else:
                self.send(404, {}, json.dumps({"error": {"message": "no such path"}}))
                return
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw
            record = {"api": api, "path": self.path, "time": time.time(),
                      "headers": {k.lower(): v for k, v in self.headers.items()},
                      "body": body}
            resp = replay.next(api, record)
            if resp is None:
                self.send(400, {}, json.dumps(
                    {"error": {"type": "invalid_request_error",
                               "message": "replay script exhausted"}}))
                return
            if resp.get("delay_s"):
                time.sleep(float(resp["delay_s"]))
            if "body" in resp:
                out = resp["body"]
                out = out if isinstance(out, str) else json.dumps(out)
            else:
                out = json.dumps(wrap(api, resp))
            self.send(int(resp.get("status", 200)), resp.get("headers", {}), out)

        def send(self, status, headers, text):
            data = text.encode("utf-8")
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, str(v))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout): nothing to do

    return Handler


def watch_parent(max_life_s):
    """Exits when the test that started the server is gone (a failed test
    must not leave servers behind) or after max_life_s."""
    parent = os.getppid()
    start = time.time()
    while True:
        time.sleep(0.2)
        if os.getppid() != parent or time.time() - start > max_life_s:
            os._exit(0)


def main():
    if len(sys.argv) != 4:
        sys.stderr.write("usage: replay_server.py SCRIPT PORT_FILE LOG_FILE\n")
        return 2
    script_path, port_file, log_path = sys.argv[1:]
    with open(script_path) as f:
        script = json.load(f)
    open(log_path, "w").close()
    replay = Replay(script, log_path)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(replay))
    server.daemon_threads = True
    threading.Thread(target=watch_parent,
                     args=(float(os.environ.get("REPLAY_MAX_LIFE_S", "600")),),
                     daemon=True).start()
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(tmp, port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""cdp_live_click.py: drives headless Chromium over the DevTools protocol
(--remote-debugging-pipe, so nothing but the standard library is needed) to
check what a dumped DOM cannot show:

  1. a real mouse click on a lineage node opens the side panel with that
     program's diff against its parent;
  2. the open page updates by itself while the database is written: a
     program inserted after the page loaded appears in the table and the
     tree without a reload.

Usage: cdp_live_click.py CHROMIUM URL DB NODE_ID SCREENSHOT.png
Prints one line per check; exits 1 with "FAIL: ..." on the first failure.
The screenshot is taken at the end: the clicked panel open, the program
written live in the tree and the table.
"""
import base64
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time


class Browser:
    """One headless Chromium and one page, spoken to over the pipe."""

    def __init__(self, chromium, profile):
        # Chromium reads commands on fd 3 and writes answers on fd 4.
        cmd_r, self.cmd_w = os.pipe()
        self.res_r, res_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            # via high numbers first: the pipes themselves may sit on 3 or 4
            os.dup2(cmd_r, 100)
            os.dup2(res_w, 101)
            os.dup2(100, 3)
            os.dup2(101, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(os.open(os.environ.get("CDP_LOG", os.devnull), os.O_WRONLY | os.O_CREAT | os.O_APPEND), 2)
            os.execv(chromium, [chromium, "--headless", "--no-sandbox", "--disable-gpu",
                                "--disable-dev-shm-usage", "--no-first-run",
                                "--hide-scrollbars", "--remote-debugging-pipe",
                                "--user-data-dir=" + profile, "about:blank"])
        os.close(cmd_r)
        os.close(res_w)
        self.pid = pid
        self.next_id = 0
        self.pending = b""
        self.session = None

    def close(self):
        try:
            self.call("Browser.close")
        except Exception:
            pass
        for _ in range(50):
            done, _status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                return
            time.sleep(0.1)
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)

    def _read_message(self, deadline):
        while b"\0" not in self.pending:
            if time.time() > deadline:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self.res_r, 1 << 16)
            if not chunk:
                raise EOFError("Chromium closed the pipe")
            self.pending += chunk
        msg, self.pending = self.pending.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=True, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})

    def open(self, url, width, height):
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)
        att = self.call("Target.attachToTarget",
                        {"targetId": target["targetId"], "flatten": True}, session=False)
        self.session = att["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.call("Page.enable")
        self.call("Page.navigate", {"url": url})

    def js(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError("JS error in %r: %s" % (expr, r["exceptionDetails"]))
        return r["result"].get("value")

    def wait_for(self, expr, what, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.js(expr):
                return
            time.sleep(0.2)
        fail("timed out waiting for " + what)

    def click(self, x, y):
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y,
                                                   "button": "left", "clickCount": 1})


def fail(why):
    print("FAIL: " + why)
    sys.exit(1)


def run_of(db_path, program_id):
    con = sqlite3.connect(db_path, timeout=10)
    row = con.execute("SELECT run_id FROM programs WHERE id=?", (program_id,)).fetchone()
    con.close()
    if not row:
        fail("program %d not in the database" % program_id)
    return row[0]


def add_program(db_path, parent_id):
    """Writes one new evaluated child of parent_id as 'cuco evolve' would."""
    con = sqlite3.connect(db_path, timeout=10)
    with con:
        row = con.execute("SELECT run_id, island, generation, code FROM programs WHERE id=?",
                          (parent_id,)).fetchone()
        if not row:
            fail("program %d not in the database" % parent_id)
        run_id, island, generation, code = row
        baseline = con.execute("SELECT baseline_ms FROM runs WHERE id=?", (run_id,)).fetchone()[0]
        time_ms = 4.8
        cols = [r[1] for r in con.execute("PRAGMA table_info(programs)")]
        values = {"run_id": run_id, "parent_id": parent_id, "island": island,
                  "generation": generation + 1, "code": code + "// live edit\n",
                  "code_hash": "live-%d" % time.time_ns(), "mutator": "knob",
                  "status": "ok", "score": baseline / time_ms if baseline else None,
                  "time_ms": time_ms,
                  "created_at": time.time()}
        values = {k: v for k, v in values.items() if k in cols}
        cur = con.execute("INSERT INTO programs (%s) VALUES (%s)" % (
            ", ".join(values), ", ".join("?" * len(values))), list(values.values()))
        new_id = cur.lastrowid
    con.close()
    return new_id


def main():
    if len(sys.argv) != 6:
        print(__doc__)
        sys.exit(2)
    chromium, url, db_path, node_id, shot = sys.argv[1:]
    node_id = int(node_id)
    profile = tempfile.mkdtemp(prefix="cuco-cdp-")
    b = Browser(chromium, profile)
    try:
        b.open(url, 1400, 1600)
        b.wait_for("document.querySelectorAll('#lineage .node').length > 0", "the lineage tree")
        # the node's run, picked in the run menu as a user would
        run_id = run_of(db_path, node_id)
        b.js("(() => { const s = document.getElementById('run-select'); s.value = '%d';"
             " s.dispatchEvent(new Event('change')); })()" % run_id)
        b.wait_for("document.getElementById('node-%d') !== null" % node_id,
                   "node %d in the tree of run %d" % (node_id, run_id))

        # 1. a real click on the node (its circle's centre, scrolled into view)
        b.js("document.getElementById('node-%d').scrollIntoView({block: 'center'})" % node_id)
        rect = b.js("(() => { const r = document.querySelector('#node-%d circle')"
                    ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
                    % node_id)
        if not rect:
            fail("node %d has no circle" % node_id)
        if b.js("!document.getElementById('panel').hidden"):
            fail("the panel was open before the click")
        b.click(rect[0], rect[1])
        b.wait_for("!document.getElementById('panel').hidden && "
                   "document.getElementById('panel-diff').textContent.length > 0",
                   "the side panel after the click")
        diff = b.js("document.getElementById('panel-diff').textContent")
        title = b.js("document.getElementById('panel-title').textContent")
        if ("program #%d" % node_id) not in title:
            fail("panel title %r does not name program %d" % (title, node_id))
        if not diff.startswith("--- program ") or "+++ program %d" % node_id not in diff:
            fail("the panel shows no diff against the parent: %r" % diff[:200])
        if b.js("location.hash") != "#program=%d" % node_id:
            fail("the click did not set #program=%d" % node_id)
        print("ok   click on node %d opened its panel with the diff (%d lines)"
              % (node_id, diff.count("\n") + 1))

        # 2. live: a program written now appears without a reload
        b.js("window.__cuco_loaded_once = true")
        rows0 = b.js("document.querySelectorAll('#programs tbody tr').length")
        new_id = add_program(db_path, node_id)
        b.wait_for("document.getElementById('node-%d') !== null && "
                   "[...document.querySelectorAll('#programs tbody tr')].some("
                   "tr => tr.dataset.id === '%d')" % (new_id, new_id),
                   "program %d to appear on the open page" % new_id, timeout=15)
        if not b.js("window.__cuco_loaded_once === true"):
            fail("the page was reloaded instead of updated")
        rows1 = b.js("document.querySelectorAll('#programs tbody tr').length")
        if rows1 != rows0 + 1:
            fail("table rows %d -> %d, expected one more" % (rows0, rows1))
        print("ok   program %d written after the page loaded appeared live (rows %d -> %d)"
              % (new_id, rows0, rows1))
        # the page as it stands: panel opened by the click, the live program in
        b.js("window.scrollTo(0, 0)")
        shot_data = b.call("Page.captureScreenshot", {"format": "png"})["data"]
        with open(shot, "wb") as f:
            f.write(base64.b64decode(shot_data))
        print("ok   screenshot %s" % shot)
    finally:
        b.close()
        subprocess.run(["rm", "-rf", profile], check=False)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The HTML report in a real browser: headless Chromium loads the page that
html_report_page writes (every section of the text report filled, and the diagnosis) and
this script fails when

  - the page logs a console message of level error or warning, throws, or fails to load
    anything (Runtime.consoleAPICalled, Runtime.exceptionThrown, Log.entryAdded);
  - the page asks for anything but its own file (Network.requestWillBeSent);
  - a section of the text report is not a <section data-section=ID> with a heading in the
    rendered DOM, or a picture the report calls for is not an <svg> the browser laid out
    with a size and marks in it;
  - printed (@media print, on an A4 page's width), a picture is hidden, or a picture, a
    table or a line of text runs off the page.

The same checks run on the page of that report written as JSON and read back (what a
program does with a saved report), in --out/from-json/. It writes the screenshot
(report.png, the whole page), the printed page (report.pdf), the page itself and what the
browser said (chromium.log) into the log folder, --out.

Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe: no port,
no network), with Python's standard library only. The checks are tested on each run: a
copy of the page with a planted console error, a script exception, a request to the
network and a section removed must fail all four ways, or the test fails.

Without chromium the test is skipped (exit 77). Usage:
  html_report_check.py --page-program PATH --out DIR [--report REPORT.json]
"""
import argparse
import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77
TIMEOUT_S = 60
PRINT_WIDTH_PX = 680  # A4 (8.27 in) at 96 px an inch, less 12 mm margins


def find_chromium():
    names = [os.environ.get("CHROMIUM", "")] + ["chromium", "chromium-browser", "google-chrome",
                                                "google-chrome-stable"]
    for name in names:
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class Browser:
    """One headless Chromium and one page, over the DevTools protocol on fds 3 and 4."""

    def __init__(self, chromium, log_path):
        self.profile = tempfile.mkdtemp(prefix="kscope-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def child_fds():
            # Chromium reads commands on fd 3 and writes replies on fd 4. dup first: a
            # pipe end that already is 3 or 4 would keep its close-on-exec flag.
            read_end, write_end = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self.log = open(log_path, "wb")
        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--user-data-dir=" + self.profile, "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking", "--disable-sync",
             "--disable-component-update", "--hide-scrollbars", "--mute-audio",
             # Nothing on the page may need the network: make any host unresolvable.
             "--host-resolver-rules=MAP * ~NOTFOUND", "--window-size=1280,1000", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, close_fds=False,
            preexec_fn=child_fds)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events = []
        self.session = None

    def _receive(self, deadline):
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from chromium in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe (see chromium.log)")
                self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def call(self, method, params=None, session=True, timeout=TIMEOUT_S):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._to_browser, data):]
        deadline = time.monotonic() + timeout
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError("%s: %s" % (method, reply["error"]))
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method, timeout=TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._receive(deadline))

    def open_page(self):
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)
        self.session = self.call("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(domain + ".enable")

    def load(self, url):
        self.events = []
        self.call("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")
        # Let late console messages and requests arrive: one round trip after the load.
        self.call("Runtime.evaluate", {"expression": "0"})

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError("evaluate failed: %s" % result["exceptionDetails"])
        return result["result"].get("value")

    def close(self):
        try:
            self.call("Browser.close", session=False, timeout=10)
        except Exception:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)


# What the DOM holds: the sections (id, heading) and every report picture with its laid-out
# size and number of marks, the page's width, whether the contents list shows.
DOM_QUERY = r"""JSON.stringify({
  sections: [...document.querySelectorAll('[data-section]')].map(e => ({
    id: e.dataset.section,
    heading: (e.querySelector('h1, h2') || {textContent: ''}).textContent.trim(),
    height: e.getBoundingClientRect().height})),
  pictures: [...document.querySelectorAll('svg[class^="kscope-"]')].map(e => {
    const box = e.getBoundingClientRect();
    return {cls: e.getAttribute('class'), width: box.width, height: box.height,
            right: box.right, marks: e.querySelectorAll('rect, path, circle, line').length,
            visible: getComputedStyle(e).display !== 'none' && getComputedStyle(e).visibility !== 'hidden'};
  }),
  overflowing: [...document.querySelectorAll('table, figure, p, li, h1, h2, h3')].filter(
    e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1).map(
    e => e.tagName + ' ' + (e.closest('[data-section]') || {dataset: {}}).dataset.section + ': ' +
         e.textContent.slice(0, 60)),
  page_width: document.documentElement.clientWidth,
  nav_shown: [...document.querySelectorAll('nav')].some(n => getComputedStyle(n).display !== 'none'),
  title: document.title})"""


def problems_of(browser, url, expected_sections, expected_pictures, out_dir=None):
    """Loads `url` and returns what is wrong with it, one line each."""
    browser.call("Emulation.setEmulatedMedia", {"media": "screen"})
    browser.load(url)
    problems = []
    for e in browser.events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            problems.append("console %s: %s" % (params["type"], text))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            problems.append("exception: %s %s" % (details.get("text", ""),
                                                  details.get("exception", {}).get("description", "")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
            entry = params["entry"]
            problems.append("browser log %s: %s %s" % (entry["level"], entry.get("text", ""), entry.get("url", "")))
        elif method == "Network.requestWillBeSent":
            requested = params.get("request", {}).get("url", "")
            if requested != url and not requested.startswith("data:"):
                problems.append("request outside the page: %s" % requested)
    dom = json.loads(browser.evaluate(DOM_QUERY))
    shown = {s["id"]: s for s in dom["sections"]}
    for section in expected_sections:
        s = shown.get(section)
        if s is None:
            problems.append("section missing from the page: %s" % section)
        elif not s["heading"] or s["height"] <= 0:
            problems.append("section %s has no heading or no height" % section)
    pictures = {}
    for p in dom["pictures"]:
        pictures.setdefault(p["cls"], p)
    for picture in expected_pictures:
        p = pictures.get(picture)
        if p is None:
            problems.append("picture missing from the page: svg.%s" % picture)
        elif p["width"] < 100 or p["height"] < 50 or p["marks"] < 3 or not p["visible"]:
            problems.append("picture svg.%s not drawn: %s" % (picture, p))
    if out_dir:
        metrics = browser.call("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        shot = browser.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}})
        with open(os.path.join(out_dir, "report.png"), "wb") as f:
            f.write(base64.b64decode(shot["data"]))
    # Printed, on the width of an A4 or Letter page less its margins (about 680 CSS px):
    # the contents list goes, the pictures are shown, nothing runs off the page's edge.
    browser.call("Emulation.setEmulatedMedia", {"media": "print"})
    browser.call("Emulation.setDeviceMetricsOverride",
                 {"width": PRINT_WIDTH_PX, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
    printed = json.loads(browser.evaluate(DOM_QUERY))
    if printed["nav_shown"] and dom["nav_shown"]:
        problems.append("print: the contents list is printed")
    for p in printed["pictures"]:
        if p["cls"] in expected_pictures and (not p["visible"] or p["width"] < 100):
            problems.append("print: picture svg.%s hidden: %s" % (p["cls"], p))
    for e in printed["overflowing"]:
        problems.append("print: wider than the page: %s" % e)
    browser.call("Emulation.clearDeviceMetricsOverride")
    if out_dir:
        pdf = browser.call("Page.printToPDF", {"printBackground": True, "paperWidth": 8.27, "paperHeight": 11.69})
        with open(os.path.join(out_dir, "report.pdf"), "wb") as f:
            f.write(base64.b64decode(pdf["data"]))
    browser.call("Emulation.setEmulatedMedia", {"media": "screen"})
    return problems


def sabotaged(page, section):
    """The page with a console error, an exception, a request to the network and one section
    removed: what the checks must catch."""
    planted = ('<script>console.error("planted error"); undefined_function();</script>'
               '<img alt="" src="https://example.invalid/planted.png">')
    page = page.replace('data-section="%s"' % section, 'data-removed="%s"' % section, 1)
    return page.replace("</body>", planted + "</body>", 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page-program", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--report", help="a kscope.report/1 file instead of the full test report")
    args = parser.parse_args()
    chromium = find_chromium()
    if chromium is None:
        print("html_report_check: SKIPPED: chromium not found (apt-get install chromium, or set CHROMIUM)")
        return SKIP
    started = time.monotonic()
    out = os.path.abspath(args.out)
    from_json = os.path.join(out, "from-json")
    pages = [(out, [args.report] if args.report else [])]
    if not args.report:
        pages.append((from_json, [os.path.join(out, "report.json")]))
    expected = []
    for directory, report in pages:
        os.makedirs(directory, exist_ok=True)
        command = [args.page_program, directory] + report
        made = subprocess.run(command)
        if made.returncode != 0:
            print("html_report_check: FAILED: %s exited with %d" % (" ".join(command), made.returncode))
            return 1
        with open(os.path.join(directory, "sections.txt")) as f:
            lines = f.read().split("\n")
        cut = lines.index("--")
        expected.append(([l for l in lines[:cut] if l], [l for l in lines[cut + 1:] if l]))
    sections, pictures = expected[0]
    page_path = os.path.join(out, "report.html")
    bad_path = os.path.join(out, "sabotaged.html")
    with open(page_path, encoding="utf-8") as f:
        page = f.read()
    with open(bad_path, "w", encoding="utf-8") as f:
        f.write(sabotaged(page, sections[-1]))

    browser = Browser(chromium, os.path.join(out, "chromium.log"))
    problems = []
    try:
        browser.open_page()
        for (directory, _), (want_sections, want_pictures) in zip(pages, expected):
            found = problems_of(browser, "file://" + os.path.join(directory, "report.html"), want_sections,
                                want_pictures, directory)
            where = "" if directory == out else os.path.basename(directory) + ": "
            problems += [where + p for p in found]
        planted = problems_of(browser, "file://" + bad_path, sections, pictures)
    finally:
        browser.close()
    expected_catches = ["console error: planted error", "exception:", "request outside the page: https://example.invalid",
                        "section missing from the page: %s" % sections[-1]]
    missed = [c for c in expected_catches if not any(p.startswith(c) for p in planted)]
    elapsed = time.monotonic() - started
    for (directory, _), (want_sections, want_pictures) in zip(pages, expected):
        print("html_report_check: %s: %d sections (%s), %d pictures (%s); screenshot %s" %
              (os.path.relpath(os.path.join(directory, "report.html"), out), len(want_sections),
               " ".join(want_sections), len(want_pictures), " ".join(want_pictures),
               os.path.join(directory, "report.png")))
    print("html_report_check: %s, %.1f s" % (os.path.basename(chromium), elapsed))
    for p in problems:
        print("html_report_check: FAILED: %s" % p)
    for c in missed:
        print("html_report_check: FAILED: the check did not catch a planted fault: %s (it saw: %s)" % (c, planted))
    return 1 if problems or missed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Renders a report's HTML in headless Chromium and checks the DOM against the report JSON.

    check_html_dom.py REPORT.json REPORT.html SCREENSHOT.png [--expect-benchmarks]

Passes when Chromium's DOM (--dump-dom, i.e. after the browser parsed the page) holds one cell
element (class "cell", data-check / data-recipe / data-device) for every cell of the JSON with the
same verdict and role, one mark per cell, for every judged cell whose metrics hold loss curves a
link from the cell to an inline SVG loss chart of that same cell (each chart once, below the matrix),
a row for every benchmark, and no external resource (the page is self-contained). Then it takes a screenshot
(--screenshot) for people to look at. Chromium missing is a FAILURE, not a skip: CI installs it
(Debian package `chromium`, in TC_DEBS of ci/common.sh).
"""
import html.parser
import json
import os
import shutil
import subprocess
import sys
import tempfile


class Dom(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.cells = {}
        self.roles = {}
        self.marks = {}
        self.bench_rows = set()
        self.links = {}        # cell -> the ids it links to
        self.charts = {}       # chart id -> the cell its data-* name
        self.svg_charts = set()  # chart ids holding an svg.chart
        self.svgs_in_cells = set()
        self.external = []
        self._open_cell = None
        self._depth = 0
        self._open_chart = None
        self._chart_depth = 0
        self._summary_of = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("src", "href"):
            if key in a and a[key] and not a[key].startswith(("#", "data:")):
                self.external.append((tag, a[key]))
        if tag == "link" or tag == "script":
            self.external.append((tag, a.get("src") or a.get("href") or "inline"))
        classes = (a.get("class") or "").split()
        if tag == "td" and "cell" in classes and "data-check" in a:
            key = (a["data-check"], a["data-recipe"], a["data-device"])
            self.cells[key] = a.get("data-verdict")
            self.roles[key] = a.get("data-role")
            self._open_cell, self._depth = key, 0
        if tag == "div" and (a.get("id") or "").startswith("loss-") and "data-check" in a:
            self.charts[a["id"]] = (a["data-check"], a["data-recipe"], a["data-device"])
            self._open_chart, self._chart_depth = a["id"], 0
        if self._open_chart is not None:
            if tag == "div":
                self._chart_depth += 1
            if tag == "svg" and "chart" in classes:
                self.svg_charts.add(self._open_chart)
        if "bench" in classes and "data-name" in a:
            self.bench_rows.add((a["data-name"], a.get("data-device")))
        if self._open_cell is not None:
            if tag == "td":
                self._depth += 1
            if tag == "svg" and "chart" in classes:
                self.svgs_in_cells.add(self._open_cell)
            if tag == "a" and (a.get("href") or "").startswith("#"):
                self.links.setdefault(self._open_cell, []).append(a["href"][1:])
            if tag == "summary" and self._open_cell not in self.marks:
                self._summary_of = self._open_cell
                self.marks[self._open_cell] = ""

    def handle_data(self, data):
        if self._summary_of is not None:
            self.marks[self._summary_of] += data

    def handle_endtag(self, tag):
        if tag == "summary":
            self._summary_of = None
        if self._open_chart is not None and tag == "div":
            self._chart_depth -= 1
            if self._chart_depth <= 0:
                self._open_chart = None
        if self._open_cell is not None and tag == "td":
            self._depth -= 1
            if self._depth <= 0:
                self._open_cell = None


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def main():
    report_json, report_html, screenshot = sys.argv[1:4]
    chromium = find_chromium()
    if not chromium:
        print("FAIL: chromium not found on PATH; install the Debian package 'chromium' "
              "(ci/common.sh TC_DEBS installs it)")
        return 1
    url = "file://" + os.path.abspath(report_html)
    with tempfile.TemporaryDirectory() as profile:
        common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-dev-shm-usage",
                  "--user-data-dir=" + profile]
        dom = subprocess.run(common + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
        if dom.returncode != 0 or "<html" not in dom.stdout:
            print("FAIL: chromium --dump-dom failed (%d): %s" % (dom.returncode, dom.stderr[-2000:]))
            return 1
        shot = subprocess.run(common + ["--hide-scrollbars", "--window-size=1400,2400",
                                        "--screenshot=" + os.path.abspath(screenshot), url],
                              capture_output=True, text=True, timeout=120)
    parser = Dom()
    parser.feed(dom.stdout)
    report = json.load(open(report_json))
    problems = []
    if "--expect-benchmarks" in sys.argv and not report["benchmarks"]:
        problems.append("the report has no benchmarks (expected `bench` to have merged some)")
    if not report["cells"]:
        problems.append("the report has no cells")
    for c in report["cells"]:
        key = (c["check"], c["recipe"], c["device"])
        if key not in parser.cells:
            problems.append("cell %s missing from the DOM" % (key,))
        elif parser.cells[key] != c["verdict"]:
            problems.append("cell %s shows %s, the JSON says %s" % (key, parser.cells[key], c["verdict"]))
        elif "role" in c and parser.roles.get(key) != c["role"]:
            problems.append("cell %s shows role %s, the JSON says %s" % (key, parser.roles.get(key), c["role"]))
        elif len(parser.marks.get(key, "").strip()) != 1:
            problems.append("cell %s shows %r, not one mark" % (key, parser.marks.get(key)))
        m = c.get("metrics", {})
        judged = c["expected"] != "any"  # a cell recorded, not judged, keeps its curves in the JSON only
        if judged and any(k in m for k in ("loss_curve_a", "loss_curve_straight")):
            charts = [i for i in parser.links.get(key, []) if parser.charts.get(i) == key and i in parser.svg_charts]
            if not charts:
                problems.append("cell %s has loss curves but no link to an SVG chart of its own" % (key,))
    if parser.svgs_in_cells:
        problems.append("%d cells carry a chart inline (each chart belongs once, below the matrix)"
                        % len(parser.svgs_in_cells))
    for b in report["benchmarks"]:
        if (b["name"], b["device"]) not in parser.bench_rows:
            problems.append("benchmark %s/%s missing from the DOM" % (b["name"], b["device"]))
    if len(parser.cells) != len(report["cells"]):
        problems.append("DOM has %d cells, JSON %d" % (len(parser.cells), len(report["cells"])))
    if parser.external:
        problems.append("page is not self-contained: %s" % parser.external[:5])
    if shot.returncode != 0 or not os.path.exists(screenshot) or os.path.getsize(screenshot) < 1000:
        problems.append("no screenshot (%d): %s" % (shot.returncode, shot.stderr[-1000:]))
    else:
        with open(screenshot, "rb") as f:
            if f.read(8) != b"\x89PNG\r\n\x1a\n":
                problems.append("screenshot is not a PNG")
    for p in problems:
        print("FAIL:", p)
    if problems:
        return 1
    print("ok: %d cells, %d loss charts, %d benchmarks in the DOM; page %d bytes; screenshot %s" %
          (len(parser.cells), len(parser.svg_charts), len(parser.bench_rows), os.path.getsize(report_html),
           os.path.abspath(screenshot)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

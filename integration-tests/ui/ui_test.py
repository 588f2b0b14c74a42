"""Caravan's web UI in a real browser: headless Chromium driven by Selenium
against `caravan dev -acl-enabled` (started by scripts/ui-test).

Signs in with a token, runs a job from the UI and watches its allocation
reach running, follows its log live, runs commands in it from the Exec tab
(a terminal, then a line of stdin), stops it; follows a deployment with a
canary and promotes it; reads why a blocked job cannot be placed, on its
page and its evaluation's; reads the servers page; writes a variable; opens
a node and drains it; checks that a 403 names the missing capability (and
that an exec refused names alloc-exec). Saves
screenshots of the main pages. With --bench it only measures how long the
main pages take to load against an existing cluster.

Any failure exits non-zero with a screenshot of the page it failed on.
"""

import argparse
import json
import os
import re
import statistics
import sys
import time
import traceback
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

TICKER_HCL = """job "ticker" {
  group "g" {
    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "i=0; while true; do echo tick $i; echo oops $i >&2; i=$((i+1)); sleep 1; done"]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
"""


class Failed(Exception):
    """A check that did not hold."""


class Api:
    """Plain calls to the HTTP API, for what the test sets up beside the UI."""

    def __init__(self, base, token):
        self.base = base
        self.token = token

    def call(self, method, path, body=None, token=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("X-Nomad-Token", token or self.token)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=30) as res:
            text = res.read().decode()
            return json.loads(text) if text else None

    def parse(self, hcl):
        return self.call("POST", "/v1/jobs/parse", {"JobHCL": hcl, "Canonicalize": True})

    def register(self, job):
        return self.call("POST", "/v1/jobs", {"Job": job})


class Browser:
    """One headless Chromium and the helpers the checks use."""

    def __init__(self, base, shots, chromium, chromedriver):
        opts = webdriver.ChromeOptions()
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                    "--disable-gpu", "--window-size=1440,1000", "--hide-scrollbars"):
            opts.add_argument(arg)
        opts.binary_location = chromium
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.d = webdriver.Chrome(service=Service(chromedriver), options=opts)
        self.base = base
        self.shots = shots
        os.makedirs(shots, exist_ok=True)

    def go(self, path):
        self.d.get(self.base + path)

    def wait(self, what, fn, timeout=30.0):
        """Polls `fn` until it answers something truthy; fails naming `what`."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                got = fn()
                if got:
                    return got
            except WebDriverException as err:
                last = err
            time.sleep(0.1)
        raise Failed(f"timed out after {timeout:.0f}s waiting for {what}" + (f" ({last.msg})" if last else ""))

    def find(self, css):
        return self.d.find_elements(By.CSS_SELECTOR, css)

    def one(self, what, css, timeout=30.0):
        return self.wait(what, lambda: (self.find(css) or [None])[0], timeout)

    def text(self, css="body"):
        found = self.find(css)
        return found[0].text if found else ""

    def click(self, what, css, timeout=30.0):
        """Clicks the first shown, enabled match; a page that re-rendered
        under the click (a live update) is retried."""
        def attempt():
            el = next((e for e in self.find(css) if e.is_displayed() and e.is_enabled()), None)
            if el is None:
                return None
            el.click()
            return el
        return self.wait(f"{what} to be clicked", attempt, timeout)

    def confirm(self):
        self.click("the confirmation dialog", "dialog[open] button[data-confirm]")
        self.wait("the dialog to close", lambda: not self.find("dialog[open]"))

    def shot(self, name):
        path = os.path.join(self.shots, f"{name}.png")
        # The whole page, not only the window: tables run below the fold.
        height = self.d.execute_script("return Math.max(document.body.scrollHeight, 1000)")
        self.d.set_window_size(1440, min(int(height) + 40, 3000))
        self.d.save_screenshot(path)
        self.d.set_window_size(1440, 1000)
        print(f"  screenshot {path}")
        return path

    def console_errors(self):
        return [e for e in self.d.get_log("browser")
                if e["level"] == "SEVERE" and "Failed to load resource" not in e["message"]]


def check(name):
    def wrap(fn):
        fn.check_name = name
        return fn
    return wrap


@check("anonymous requests are refused and the 403 names the capability")
def anonymous_refused(b, api, ctx):
    b.go("/")
    b.wait("/ to redirect to the job list", lambda: b.d.current_url.endswith("/ui/jobs"))
    b.one("the not-authorized notice", ".notice.error[data-status='403']")
    b.wait("the 403 notice to name list-jobs", lambda: "list-jobs" in b.text(".notice.error[data-status='403']"))


@check("sign in with a token (kept in localStorage, sent on every call)")
def sign_in(b, api, ctx):
    b.go("/ui/settings/tokens")
    b.one("the secret field", "input[name=secret]").send_keys(api.token)
    b.click("the sign-in button", "button[data-action=sign-in]")
    b.wait("the job list after signing in", lambda: b.d.current_url.endswith("/ui/jobs"))
    b.wait("the token's name in the top bar", lambda: "Bootstrap Token" in b.text("#whoami"))
    stored = b.d.execute_script("return localStorage.getItem('caravan.token')")
    if stored != api.token:
        raise Failed("the token is not kept in localStorage")
    b.wait("the (empty) job list", lambda: b.find("table.list") and not b.find(".notice.error"))


@check("run a job from the UI: plan, run, its allocation reaches running")
def run_job(b, api, ctx):
    b.go("/ui/jobs/run")
    editor = b.one("the job editor", "textarea.editor")
    b.d.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'))", editor, TICKER_HCL)
    b.click("Plan", "button[data-action=plan]")
    b.wait("the plan to show one placement", lambda: "Every allocation of this plan can be placed" in b.text(".plan"))
    b.shot("run-plan")
    b.click("Run", "button[data-action=run]")
    b.wait("the job's page", lambda: "/ui/jobs/ticker%40default" in b.d.current_url or "/ui/jobs/ticker@default" in b.d.current_url)
    b.wait("the allocation to reach running",
           lambda: any("running" in row.text for row in b.find("table.list tbody tr") if row.find_elements(By.CSS_SELECTOR, "a.alloc-link")),
           timeout=60)
    ctx["ticker_alloc"] = b.wait("the allocation's id", lambda: b.one("the allocation link", "a.alloc-link").get_attribute("data-alloc"))


@check("the allocation's log appears and grows live (stdout and stderr)")
def follow_logs(b, api, ctx):
    b.click("the allocation link", "a.alloc-link")
    b.wait("the allocation page", lambda: "/ui/allocations/" in b.d.current_url)
    b.one("the task table", "tr[data-task=t]")
    b.wait("CPU and memory charts of several samples", lambda: len(b.find(".chart polyline.line")) == 2, timeout=20)
    b.shot("alloc")
    b.click("the Logs tab", ".tabs a[href*='/logs']")
    ticks = lambda: [int(n) for n in re.findall(r"tick (\d+)", b.text("pre.logs"))]
    first = b.wait("the task's output in the log", lambda: max(ticks(), default=None) is not None and ticks(), timeout=30)
    seen = max(first)
    b.wait(f"a line after 'tick {seen}' to arrive without a reload", lambda: max(ticks(), default=-1) >= seen + 2, timeout=20)
    b.wait("the log view to say it follows live", lambda: "following (live)" in b.text(".log-status"))
    b.shot("alloc-logs")
    b.click("stderr", "button.toggle[data-type=stderr]")
    b.wait("stderr's output", lambda: "oops" in b.text("pre.logs[data-stream=stderr]"), timeout=20)
    b.click("the Files tab", ".tabs a[href*='/files']")
    b.click("the alloc directory", "a.dir")
    b.wait("the alloc directory listing", lambda: "logs/" in b.text(".files"))


def terminal_text(b):
    return b.d.execute_script("const t = document.querySelector('pre.terminal'); return t ? t.textContent : ''")


def terminal_lines(b):
    return [line.strip() for line in terminal_text(b).split("\n")]


@check("the Exec tab runs a shell in the task: its output, then its exit code")
def exec_terminal(b, api, ctx):
    b.go(f"/ui/allocations/{ctx['ticker_alloc']}")
    b.click("the Exec tab", ".tabs a[href*='/exec']")
    command = b.one("the command field", "input.exec-command")
    if command.get_attribute("value") != "/bin/sh":
        raise Failed(f"the default command is {command.get_attribute('value')!r}")
    b.click("Open", "button[data-action=exec-open]")
    term = b.one("the open terminal", "pre.terminal[data-state=open]")
    b.wait("the shell's prompt", lambda: terminal_text(b).rstrip().endswith(("#", "$")), timeout=20)
    # The terminal's size comes from the element: far wider than a default 80 columns.
    term.send_keys("stty size" + Keys.ENTER)
    size = b.wait("stty's rows and columns",
                  lambda: next((m for m in (re.fullmatch(r"(\d+) (\d+)", line) for line in terminal_lines(b)) if m), None), timeout=20)
    rows, cols = int(size.group(1)), int(size.group(2))
    if cols <= 100 or rows < 10:
        raise Failed(f"the terminal's size is {rows} rows of {cols} columns, not the element's")
    term.send_keys("echo hello-from-exec" + Keys.ENTER)
    b.wait("the command's output on a line of its own", lambda: "hello-from-exec" in terminal_lines(b), timeout=20)
    b.shot("exec")
    term.send_keys("exit 3" + Keys.ENTER)
    b.wait("the exit code", lambda: "exited with code 3" in b.text(".exec-status"), timeout=20)
    if term.get_attribute("data-exit-code") != "3":
        raise Failed(f"the terminal's exit code is {term.get_attribute('data-exit-code')!r}")
    # Without a terminal, stdin is typed a line at a time and stderr shows apart.
    b.click("the Terminal checkbox", ".exec-view label.check input")
    command.clear()
    command.send_keys('sh -c "read l; echo got $l; echo warned >&2; exit 4"')
    b.click("Open", "button[data-action=exec-open]")
    line = b.one("the stdin line", ".exec-stdin:not([hidden]) input.exec-line")
    b.wait("the session to open", lambda: b.find("pre.terminal[data-state=open]"))
    line.send_keys("abc" + Keys.ENTER)
    b.wait("the line read back", lambda: "got abc" in terminal_lines(b), timeout=20)
    b.wait("stderr, shown apart", lambda: "warned" in b.text("pre.terminal .stderr"), timeout=20)
    b.wait("the exit code", lambda: "exited with code 4" in b.text(".exec-status"), timeout=20)
    # Close ends a session that has not exited, without an error.
    b.click("Open", "button[data-action=exec-open]")
    b.wait("the session to open", lambda: b.find("pre.terminal[data-state=open]"))
    b.click("Close", "button[data-action=exec-close]")
    b.wait("the session to close", lambda: b.find("pre.terminal[data-state=closed]"))
    if b.find(".exec-view .notice"):
        raise Failed(f"closing the session shows {b.text('.exec-view .notice')!r}")


@check("a deployment with a canary shows its progress and is promoted from the UI")
def deployment(b, api, ctx):
    hcl = TICKER_HCL.replace('job "ticker"', 'job "web"').replace('group "g" {', 'group "g" {\n    count = 2\n\n    update {\n      canary           = 1\n      max_parallel     = 1\n      min_healthy_time = "1s"\n      healthy_deadline = "1m"\n    }\n')
    job = api.parse(hcl)
    api.register(job)
    # Wait until the first version's deployment is over, then change the job.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        d = api.call("GET", "/v1/job/web/deployment")
        if d and d.get("Status") == "successful":
            break
        time.sleep(0.5)
    else:
        raise Failed(f"the first deployment of web did not succeed: {d}")
    job["TaskGroups"][0]["Tasks"][0]["Config"]["args"][1] = job["TaskGroups"][0]["Tasks"][0]["Config"]["args"][1].replace("sleep 1", "sleep 2")
    api.register(job)
    b.go("/ui/jobs/web@default")
    b.one("the active deployment", ".deployment.active[data-status=running]")
    b.one("the Promote button", "button[data-action=promote]", timeout=60)
    b.wait("the canary to be placed", lambda: "1 / 1" in b.text(".deployment tr[data-group=g]"), timeout=60)
    b.wait("Promote to be enabled once the canary is healthy",
           lambda: any(e.is_enabled() for e in b.find("button[data-action=promote]")), timeout=60)
    b.shot("job-deployment")
    b.click("Promote", "button[data-action=promote]")
    b.wait("the deployment to succeed", lambda: b.find(".deployment[data-status=successful]"), timeout=90)
    b.go("/ui/jobs/web@default/versions")
    b.wait("the diff between versions 0 and 1", lambda: "sleep 2" in b.text("table.diff"), timeout=20)
    b.shot("job-versions")


@check("a job that cannot be placed says why")
def blocked(b, api, ctx):
    job = api.parse(TICKER_HCL.replace('job "ticker"', 'job "blocked"').replace('group "g" {', 'constraint {\n    attribute = "${attr.kernel.name}"\n    value     = "windows"\n  }\n\n  group "g" {'))
    api.register(job)
    b.go("/ui/jobs/blocked@default")
    b.one("the placement failure", ".placement-failure[data-group=g]", timeout=30)
    want = 'Constraint "${attr.kernel.name} = windows" filtered 1 node.'
    b.wait("the constraint that filtered the node", lambda: want in b.text(".placement-failure[data-group=g]"))
    b.shot("job-blocked")


@check("an evaluation's page explains its placement failures")
def evaluation(b, api, ctx):
    b.go("/ui/jobs/blocked@default/evaluations")
    b.click("an evaluation of the blocked job", "a.eval-link")
    b.wait("the evaluation's page", lambda: "/ui/evaluations/" in b.d.current_url)
    b.wait("its placement failure", lambda: "filtered 1 node" in b.text(".placement-failure[data-group=g]"))
    b.shot("evaluation")


@check("the servers page names each service's leader")
def servers(b, api, ctx):
    b.go("/ui/servers")
    b.wait("the leaders of the broker, the applier and the deployment-watcher",
           lambda: all(s in b.text(".servers-page") for s in ("eval-broker", "plan-applier", "deployment-watcher")))


@check("create a variable from the UI and read it back")
def variables(b, api, ctx):
    b.go("/ui/variables/new")
    b.one("the path field", "input[aria-label=Path]").send_keys("ui/test")
    b.one("the first key", ".kv-row .key").send_keys("greeting")
    b.one("the first value", ".kv-row .value").send_keys("hello")
    b.click("Save", "button[data-action=save]")
    b.wait("the variable's page", lambda: "/ui/variables/var/ui/test" in b.d.current_url)
    stored = b.wait("the variable through the API", lambda: api.call("GET", "/v1/var/ui/test"))
    if stored.get("Items") != {"greeting": "hello"}:
        raise Failed(f"the variable holds {stored.get('Items')}")
    b.go("/ui/variables")
    b.wait("the variable in the list", lambda: "ui/test" in b.text("table.list"))


@check("the job list shows every job with its summary")
def job_list(b, api, ctx):
    b.go("/ui/jobs")
    b.wait("three jobs", lambda: len(b.find("a.job-link")) == 3)
    b.wait("summary bars", lambda: len(b.find(".summary-bar .seg.running")) >= 2)
    b.shot("jobs")
    search = b.one("the name filter", "input[type=search]")
    search.send_keys("tick")
    b.wait("the list to filter to ticker", lambda: [a.text for a in b.find("a.job-link")] == ["ticker"])


@check("stop the job from the UI")
def stop_job(b, api, ctx):
    b.go("/ui/jobs/ticker@default")
    b.click("Stop", "button[data-action=stop]")
    b.confirm()
    b.wait("the job to show as stopped", lambda: "stopped" in b.text(".page-head"), timeout=30)
    b.wait("its allocation to finish", lambda: all("running" not in r.text for r in b.find("table.list tbody tr")), timeout=60)
    b.one("the Start button", "button[data-action=start]")


@check("open the node and drain it")
def drain_node(b, api, ctx):
    b.go("/ui/clients")
    b.wait("the node's allocated CPU and memory in the list", lambda: len(b.find(".clients-page .meter")) == 2)
    b.shot("clients")
    b.click("the node", "a.node-link")
    b.wait("the node page", lambda: "/ui/clients/" in b.d.current_url)
    b.wait("the node's allocations", lambda: b.find("a.alloc-link"))
    b.wait("the node's drivers", lambda: b.find("tr[data-driver=raw_exec]"))
    b.shot("node")
    b.click("Drain", "button[data-action=drain]")
    deadline = b.one("the deadline field", "dialog[open] input[name=deadline]")
    deadline.clear()
    deadline.send_keys("30m")
    b.confirm()
    b.wait("the node to be draining", lambda: "draining" in b.text(".page-head") and "ineligible" in b.text(".page-head"), timeout=30)
    b.one("Stop drain", "button[data-action=stop-drain]")
    b.shot("node-draining")


@check("a token without node read sees which capability it lacks")
def limited_token(b, api, ctx):
    api.call("POST", "/v1/acl/policy/ui-readonly", {"Name": "ui-readonly", "Rules": 'namespace "default" { policy = "read" }'})
    tok = api.call("POST", "/v1/acl/token", {"Name": "ui reader", "Type": "client", "Policies": ["ui-readonly"]})
    b.go("/ui/settings/tokens")
    b.one("the secret field", "input[name=secret]").send_keys(tok["SecretID"])
    b.click("the sign-in button", "button[data-action=sign-in]")
    b.wait("the reader's name in the top bar", lambda: "ui reader" in b.text("#whoami"))
    b.wait("the job list for the reader", lambda: len(b.find("a.job-link")) == 3)
    b.go("/ui/clients")
    b.one("the not-authorized notice", ".notice.error[data-status='403']")
    b.wait("the 403 notice to name node read", lambda: 'node { policy = "read" }' in b.text(".notice.error[data-status='403']"))
    b.shot("forbidden")
    b.go(f"/ui/allocations/{ctx['ticker_alloc']}/exec")
    b.click("Open", "button[data-action=exec-open]")
    b.wait("the refused exec to name alloc-exec",
           lambda: '"alloc-exec"' in b.text(".exec-view .notice.error[data-status='403']"), timeout=20)


CHECKS = [anonymous_refused, sign_in, run_job, follow_logs, exec_terminal, deployment, blocked, evaluation, servers, variables, job_list,
          stop_job, drain_node, limited_token]


def page_load(b, path, ready_js, what, timeout=60.0):
    """Milliseconds from navigation start until `ready_js` holds, on a fresh load."""
    b.go("/ui/settings/tokens")
    b.go(path)
    b.wait(what, lambda: b.d.execute_script(f"return !!({ready_js})"), timeout)
    return b.d.execute_script("return performance.now()")


def bench(b, api, runs):
    b.go("/ui/settings/tokens")
    b.d.execute_script("localStorage.setItem('caravan.token', arguments[0])", api.token)
    jobs = api.call("GET", "/v1/jobs?namespace=*")
    nodes = api.call("GET", "/v1/nodes")
    total = lambda j: sum(sum(g.values()) for g in j["JobSummary"]["Summary"].values())
    biggest = max(jobs, key=total)
    busiest = nodes[0]
    allocs = sum(total(j) for j in jobs)
    print(f"cluster: {len(jobs)} jobs, {len(nodes)} nodes, {allocs} allocations (from the job summaries)")
    job = f"/ui/jobs/{biggest['ID']}@{biggest['Namespace']}"
    pages = [
        ("job list", "/ui/jobs", "document.body.dataset.jobsRendered && document.querySelector('a.job-link')"),
        ("client list, rows", "/ui/clients", "document.querySelector('a.node-link')"),
        ("client list, rows and the first page's usage", "/ui/clients",
         "document.querySelector('a.node-link') && !document.querySelector('.clients-page td .muted')"),
        (f"a client's page ({busiest['Name']})", f"/ui/clients/{busiest['ID']}", "document.querySelector('tr[data-driver]') && document.querySelector('.meters')"),
        (f"job page of {biggest['ID']} ({total(biggest)} allocations)", job, "document.querySelector('a.alloc-link')"),
        (f"allocations tab of {biggest['ID']}", f"{job}/allocations", "document.querySelector('a.alloc-link')"),
        ("evaluations", "/ui/evaluations", "document.querySelector('.evaluations-page a.mono')"),
    ]
    for name, path, ready in pages:
        times = [page_load(b, path, ready, name) for _ in range(runs)]
        calls = b.d.execute_script(
            "return performance.getEntriesByType('resource').filter(e => e.name.includes('/v1/'))"
            ".map(e => [new URL(e.name).pathname.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/, '<id>'), e.duration, e.encodedBodySize])")
        summary = {}
        for path_, took, size in calls:
            n, total_size, longest = summary.get(path_, (0, 0, 0))
            summary[path_] = (n + 1, total_size + size, max(longest, took))
        api_text = "; ".join(f"{p} x{n} {sz / 1024:.0f} KiB (longest {t:.0f} ms)" for p, (n, sz, t) in summary.items()
                             if not p.endswith("/token/self"))
        print(f"{name}: median {statistics.median(times):.0f} ms (min {min(times):.0f}, max {max(times):.0f}, {runs} loads)"
              f" | last load's API calls: {api_text}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the gateway's HTTP address, e.g. http://127.0.0.1:4646")
    ap.add_argument("--token", required=True, help="a management token's secret")
    ap.add_argument("--shots", default="target/ui-screenshots")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    ap.add_argument("--bench", action="store_true", help="only measure page loads")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    api = Api(args.base.rstrip("/"), args.token)
    b = Browser(args.base.rstrip("/"), args.shots, args.chromium, args.chromedriver)
    ctx = {}
    try:
        if args.bench:
            bench(b, api, args.runs)
            return 0
        for fn in CHECKS:
            started = time.monotonic()
            try:
                fn(b, api, ctx)
            except (Failed, WebDriverException, urllib.error.URLError) as err:
                print(f"FAIL {fn.check_name}: {err}", file=sys.stderr)
                if not isinstance(err, Failed):
                    traceback.print_exc()
                b.shot(f"failed-{fn.__name__}")
                print(f"  page text: {b.text()[:2000]!r}", file=sys.stderr)
                for e in b.d.get_log("browser"):
                    print(f"  console: {e['level']} {e['message']}", file=sys.stderr)
                return 1
            print(f"ok   {fn.check_name} ({time.monotonic() - started:.1f}s)")
        errors = b.console_errors()
        if errors:
            print(f"FAIL the browser console logged errors: {errors}", file=sys.stderr)
            return 1
        return 0
    finally:
        b.d.quit()


if __name__ == "__main__":
    sys.exit(main())

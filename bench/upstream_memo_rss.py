"""Memory of a pull-through edge under distinct pass-through requests (issue 21, U2).

An upstream (the fault proxy, canned answers) gives a 40 MB JSON answer to every refs request. N
anonymous requests go to the edge, each a distinct spelling or a distinct repo; the edge's RSS
(VmRSS of its process) is printed before and after:

    HUBKERN_BIN=build/cli/hubkern python3 bench/upstream_memo_rss.py [--n 12] [--mb 40] [--kind query|repo]

--kind query: /api/kernels/org/x%3Fq%3D<i>/refs (an encoded '?': once a new upstream query string
each); --kind repo: /api/kernels/org/x<i>/refs (distinct valid repos: the memo's byte bound)."""
import argparse
import json
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from faultproxy import FaultProxy, Rule  # noqa: E402
from hk_serve_helpers import Server  # noqa: E402


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return -1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--mb", type=int, default=40)
    ap.add_argument("--kind", choices=("query", "repo"), default="query")
    ap.add_argument("extra", nargs="*", help="more hubkern serve options")
    a = ap.parse_args()
    body = json.dumps({"branches": [], "tags": [], "converts": [], "pad": "x" * (a.mb << 20)}).encode()
    small = json.dumps({"name": "org", "trustedKernelPublisher": False}).encode()
    rules = [Rule("answer", r"/overview", count=None, body=small, headers={"Content-Type": "application/json"}),
             Rule("answer", r"refs", count=None, body=body, headers={"Content-Type": "application/json"})]
    with tempfile.TemporaryDirectory() as store, FaultProxy("http://127.0.0.1:9", rules=rules) as px, \
            Server(store, "--upstream", px.url, *a.extra) as edge:
        time.sleep(0.3)
        before = rss_mb(edge.proc.pid)
        statuses = []
        for i in range(a.n):
            path = f"/api/kernels/org/x%3Fq%3D{i}/refs" if a.kind == "query" else f"/api/kernels/org/x{i}/refs"
            try:
                with urllib.request.urlopen(edge.url + path, timeout=120) as r:
                    r.read()
                    statuses.append(r.status)
            except urllib.error.HTTPError as e:
                statuses.append(e.code)
        time.sleep(0.3)
        after = rss_mb(edge.proc.pid)
        fetched = len(px.requests("GET", "refs"))
        print(f"{os.environ.get('HUBKERN_BIN', 'build/cli/hubkern')}: {a.n} requests (--kind {a.kind}, {a.mb} MB "
              f"answers): statuses {sorted(set(statuses))}, upstream refs fetches {fetched}, edge RSS "
              f"{before:.0f} MB -> {after:.0f} MB")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Mirror side of files-per-variant scaling (issue 25): the CPU `hubkern serve` spends paging out
the recursive tree listing of one N-file variant, 1000 entries a page as the Hub, for each server
binary given (a baseline build and the new one, one after another on the same store). CPU is the
server process's user+sys over the whole walk of the pages (from /proc/PID/stat).

    python3 bench/tree_pages_bench.py --bin base=/tmp/hubkern-base --bin new=build/cli/hubkern [--sizes 20000,100000]
"""
import argparse
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from hk_serve_helpers import Server, make_files_kernel, publish  # noqa: E402


def server_cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def page_out(srv, repo, commit):
    """(entries, pages, server CPU s, wall s) of listing build/ recursively, page after page."""
    url = f"{srv.url}/api/kernels/{repo}/tree/{commit}/build?recursive=true"
    c0, t0, pages, entries = server_cpu(srv.proc.pid), time.perf_counter(), 0, 0
    while url:
        with urllib.request.urlopen(url) as r:
            body, link = r.read(), r.headers.get("Link") or ""
        entries += body.count(b'"path"')
        pages += 1
        m = re.search(r'<([^>]+)>; rel="next"', link)
        url = m.group(1) if m else None
    return entries, pages, server_cpu(srv.proc.pid) - c0, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH of a hubkern binary (repeatable)")
    ap.add_argument("--sizes", default="20000,100000")
    a = ap.parse_args()
    bins = [(b.split("=", 1)[0], os.path.abspath(b.split("=", 1)[1])) for b in a.bin]
    work = tempfile.mkdtemp(prefix="hk-tree-pages-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    rows = []
    try:
        for n in [int(s) for s in a.sizes.split(",")]:
            src, store, repo = os.path.join(work, f"src{n}"), os.path.join(work, f"store{n}"), f"bench/files{n}"
            make_files_kernel(src, n)
            os.environ["HUBKERN_BIN"] = bins[-1][1]
            commit = publish(src, repo, "v1", store)
            shutil.rmtree(src)
            for name, b in bins:
                os.environ["HUBKERN_BIN"] = b
                with Server(store, "--trust", "bench", "--page-size", "1000", public_url=True) as srv:
                    rows.append((n, name, *page_out(srv, repo, commit)))
            shutil.rmtree(store)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("recursive listing of build/ of an N-file variant, 1000 entries a page; server CPU = user+sys of hubkern serve")
    print(f"{'files':>7} {'server':<8}{'entries':>9}{'pages':>7}{'server CPU s':>14}{'wall s':>9}")
    for n, name, e, p, c, w in rows:
        print(f"{n:>7} {name:<8}{e:>9}{p:>7}{c:>14.2f}{w:>9.2f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The fleet model (issue 25): N hosts behind K pull-through edges (`hubkern serve --upstream`) and one
origin, predicting origin requests, origin bytes and time-to-ready, fed with costs measured here;
then a real run on this machine checked against the model's prediction for that N.

Inputs, all measured:
- --costs: the JSON bench/mirror_load.py --edge writes: the warm edge's CPU seconds per request by
  kind (listing, refs, 24-byte file, blob; the blob gives the CPU per byte) and the origin's.
- the pull itself, measured at the start of every run (also without --real): one real `hubkern pull`
  of the workload variant through a recording proxy gives the requests a host makes (each mapped to
  a kind and its bytes); one through a fresh edge gives U, the requests (and Bu, the bytes) an edge
  makes to its origin for a cold pull, and t_cold / t_warm, one pull's wall time through a cold and
  a warm edge.

The model, per edge serving n = N/K hosts (hosts are other machines; edges have --edge-cores and a
--edge-gbps link, the origin --origin-cores and --origin-gbps):
- origin requests = K x U (an edge coalesces concurrent misses and keeps what it fetched; commit-
  addressed answers never expire) plus K x the branch lookups that expire: one per --revision-ttl
  of time-to-ready;
- origin bytes = K x Bu;
- time-to-ready = fill + max(t_warm, n x c_pull / edge_cores, n x B_pull / edge link), where fill =
  (t_cold - t_warm) + K x (U x c_origin + Bu x c_byte) / origin_cores + K x Bu / origin link, and
  c_pull is the edge's CPU for one host's pull (its requests' measured costs summed).

--real N: N concurrent clients (asyncio, one keep-alive connection each) replay the recorded pull
through one fresh edge, checking every status and every file's sha256; none may fail. On this
machine clients, edge and origin share --cores cores, so the prediction checked against it is the
model with edge_cores = --cores and the clients' own CPU per pull (measured by a calibration wave
of --calib clients on a warm edge) added to c_pull; its fill is measured for the replaying client
(--calib of them at once through another fresh edge). The same clients then run again on the warm
edge. Other jobs share these cores too, so the run's CPU (clients + edge + origin) is checked
against the model's, and the model's time is also given at the core share the run got (CPU / wall).

    python3 bench/mirror_load.py --edge --json bench/results/mirror_costs.json
    python3 bench/fleet_model.py --costs bench/results/mirror_costs.json --real 1000
"""
import argparse
import asyncio
import hashlib
import json
import math
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from faultproxy import FaultProxy, make_variant, publish  # noqa: E402

V = "tvm-ffi01-cpu-x86_64-linux"
REPO = "fleet/kern"
CLK = os.sysconf("SC_CLK_TCK")
ACCESS = re.compile(r'access \S+ "(\w+) ([^"]*)" (\d+) (\d+)')


def cpu_of(pid):
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / CLK


class Mirror:
    def __init__(self, binary, store, *args):
        self.proc = subprocess.Popen([binary, "serve", "--cache", store, "--host", "127.0.0.1", "--port", "0",
                                      "--access-log", "--max-connections", "8192", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        self.url = line.split("listening on ")[1].strip()
        self.port = int(self.url.rsplit(":", 1)[1])
        self.lines = []
        import threading
        self.t = threading.Thread(target=lambda: [self.lines.append(x) for x in self.proc.stderr], daemon=True)
        self.t.start()

    def access(self):
        return [(m.group(1), m.group(2), int(m.group(3)), int(m.group(4)))
                for x in list(self.lines) if (m := ACCESS.search(x))]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def hubkern_pull(binary, url, cache):
    t0 = time.monotonic()
    r = subprocess.run([binary, "pull", REPO, "--version", "1", "--variant", V, "--endpoint", url, "--cache", cache,
                        "-q"], capture_output=True, text=True, timeout=300,
                       env={k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))})
    if r.returncode != 0:
        raise RuntimeError(f"hubkern pull failed: {r.stderr}")
    return time.monotonic() - t0


def kind_of(path, size):
    p = path.split("?", 1)[0]
    if "/tree/" in p:
        return "listing"
    if p.startswith("/api/"):
        return "refs"  # refs, revision info, overview: small JSON answers
    return "small" if size < (1 << 20) else "big"


# ---- the replaying client ------------------------------------------------------------------------

async def fetch(reader, writer, method, path):
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: fleet\r\nUser-Agent: hk-fleet-replay\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    hdr = {k.strip().lower(): v.strip() for k, v in (x.split(":", 1) for x in lines[1:] if ":" in x)}
    n = int(hdr.get("content-length", "0")) if method != "HEAD" else 0
    body = await reader.readexactly(n) if n else b""
    return status, body, hdr.get("connection", "").lower() == "close"


async def one_client(port, seq, expect, results, i):
    t0 = time.monotonic()
    try:
        reader = writer = None
        for method, path, status in seq:
            for attempt in range(20):  # a connect refused under the accept burst is retried
                try:
                    if writer is None:
                        reader, writer = await asyncio.open_connection("127.0.0.1", port)
                    got, body, close = await fetch(reader, writer, method, path)
                    break
                except (ConnectionError, asyncio.IncompleteReadError, OSError):
                    if writer:
                        writer.close()
                    writer = None
                    await asyncio.sleep(0.05 * (attempt + 1))
            else:
                raise RuntimeError(f"{path}: no answer")
            if got != status:
                raise RuntimeError(f"{path}: status {got}, wanted {status}")
            want = expect.get(path.split("?", 1)[0])
            if want and method == "GET" and hashlib.sha256(body).hexdigest() != want:
                raise RuntimeError(f"{path}: wrong bytes")
            if close:
                writer.close()
                writer = None
        if writer:
            writer.close()
        results[i] = (True, time.monotonic() - t0, "")
    except Exception as e:  # noqa: BLE001 - every failure is counted and reported
        results[i] = (False, time.monotonic() - t0, repr(e))


def replay(port, seq, expect, n):
    results = [None] * n
    r0 = resource.getrusage(resource.RUSAGE_SELF)

    async def main():
        await asyncio.gather(*(one_client(port, seq, expect, results, i) for i in range(n)))

    t0 = time.monotonic()
    asyncio.run(main())
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return results, wall, cpu


# ---- the model ----------------------------------------------------------------------------------

def load_costs(path):
    with open(path) as fh:
        data = json.load(fh)

    def best(server_prefix, ep):
        cells = [c for c in data["cells"] if c["server"].startswith(server_prefix) and c["endpoint"] == ep
                 and c.get("cpu_s_per_request")]
        if not cells:
            raise SystemExit(f"{path}: no {server_prefix} / {ep} cells: run bench/mirror_load.py --edge")
        hi = max(cells, key=lambda c: c["conns"])  # under load: what a busy edge pays
        return hi["cpu_s_per_request"]

    out = {}
    for role, prefix in (("edge", "edge"), ("origin", "mirror --threads 1")):
        per = {ep: best(prefix, ep) for ep in ("small", "listing", "refs", "big")}
        per["byte"] = per["big"] / data["bytes"]["big"]
        out[role] = per
    return out


def request_cost(c, kind, size):
    if kind == "big":
        return c["small"] + size * c["byte"]
    return c[kind]


def predict(w, costs, n_hosts, k_edges, edge_cores, origin_cores, edge_gbps, origin_gbps, ttl, extra_pull_cpu=0.0):
    n = math.ceil(n_hosts / k_edges)
    c_pull = sum(request_cost(costs["edge"], kind, size) for kind, size in w["requests"]) + extra_pull_cpu
    c_fill = sum(request_cost(costs["origin"], kind, size) for kind, size in w["upstream"])
    fill = max(0.0, w["t_cold"] - w["t_warm"]) + k_edges * c_fill / origin_cores + k_edges * w["Bu"] / (origin_gbps * 1.25e8)
    serve = max(w["t_warm"], n * c_pull / edge_cores, n * w["B_pull"] / (edge_gbps * 1.25e8))
    t = fill + serve
    return {"N": n_hosts, "K": k_edges, "hosts_per_edge": n, "origin_requests": k_edges * (len(w["upstream"]) +
            int(t // ttl) * w["ttl_lookups"]), "origin_bytes": k_edges * w["Bu"], "ready_s": t,
            "bound": "cpu" if n * c_pull / edge_cores >= max(w["t_warm"], n * w["B_pull"] / (edge_gbps * 1.25e8))
            else ("link" if n * w["B_pull"] / (edge_gbps * 1.25e8) > w["t_warm"] else "latency")}


def fmt_bytes(b):
    for u in ("B", "kB", "MB", "GB", "TB"):
        if b < 1000:
            return f"{b:.0f} {u}" if u == "B" else f"{b:.1f} {u}"
        b /= 1000
    return f"{b:.1f} PB"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "build", "cli", "hubkern"))
    ap.add_argument("--costs", default=os.path.join(HERE, "results", "mirror_costs.json"))
    ap.add_argument("--so-mb", type=float, default=2.0, help="the variant's shared object (LFS)")
    ap.add_argument("--small-files", type=int, default=8)
    ap.add_argument("--real", type=int, default=0, help="concurrent clients of the real run (0: model only)")
    ap.add_argument("--calib", type=int, default=50)
    ap.add_argument("--cores", type=int, default=os.cpu_count())
    ap.add_argument("--edge-cores", type=int, default=16)
    ap.add_argument("--origin-cores", type=int, default=16)
    ap.add_argument("--edge-gbps", type=float, default=10.0)
    ap.add_argument("--origin-gbps", type=float, default=10.0)
    ap.add_argument("--revision-ttl", type=int, default=60)
    ap.add_argument("--json", help="write the model table and the real run here")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    costs = load_costs(a.costs)
    work = tempfile.mkdtemp(prefix="hk-fleet-")
    mirrors = []
    try:
        files = {"__init__.py": b"from ._ops import *\n", "_ops.py": b"ops = 1\n",
                 "_fleet.so": os.urandom(int(a.so_mb * (1 << 20))),
                 **{f"data/p{i}.txt": os.urandom(200 + i).hex().encode() for i in range(a.small_files)}}
        make_variant(os.path.join(work, "src"), V, files)
        store = os.path.join(work, "origin")
        publish(os.path.join(work, "src"), REPO, "v1", store, ["--lfs-threshold", "100000"])
        vdir = os.path.join(work, "src", "build", V)
        expect = {}
        for root, _, names in os.walk(vdir):
            for nm in names:
                rel = os.path.relpath(os.path.join(root, nm), os.path.join(work, "src"))
                with open(os.path.join(root, nm), "rb") as fh:
                    expect[rel] = hashlib.sha256(fh.read()).hexdigest()
        origin = Mirror(binary, store, "--threads", "2", "--trust", REPO.split("/")[0])
        mirrors.append(origin)
        # 1. what one host's pull asks for: a real hubkern pull through a recording proxy
        with FaultProxy(origin.url) as rec:
            hubkern_pull(binary, rec.url, os.path.join(work, "c-rec"))
            seq = [(e["method"], e["path"], e["status"]) for e in rec.log]
            sizes = [e["sent"] for e in rec.log]
        by_path = {}
        for (m, p, s), n in zip(seq, sizes):
            by_path[p] = n
        exp_by_url = {}
        for m, p, s in seq:
            q = p.split("?", 1)[0]
            mm = re.search(r"/resolve/[^/]+/(.*)$", q)
            if mm and mm.group(1) in expect:
                exp_by_url[q] = expect[mm.group(1)]
        requests = [(kind_of(p, n), n) for (m, p, s), n in zip(seq, sizes)]
        # 2. what an edge asks of the origin for a cold pull, and a pull's wall time cold and warm
        def fresh_edge(name):
            d = os.path.join(work, name)
            os.makedirs(d)
            e = Mirror(binary, d, "--upstream", origin.url, "--client-miss-budget", "1000000",
                       "--revision-ttl", str(a.revision_ttl))
            mirrors.append(e)
            return e
        o0 = len(origin.access())
        e1 = fresh_edge("edge-cal")
        t_cold = hubkern_pull(binary, e1.url, os.path.join(work, "c-cold"))
        up = origin.access()[o0:]
        t_warm = min(hubkern_pull(binary, e1.url, os.path.join(work, f"c-warm{i}")) for i in range(3))
        ttl_lookups = sum(1 for m, p, s, n in up if "/resolve/" not in p and "/tree/" not in p
                          and not re.search(r"/[0-9a-f]{40}(/|$)", p))
        w = {"requests": requests, "B_pull": sum(sizes), "upstream": [(kind_of(p, n), n) for m, p, s, n in up],
             "Bu": sum(n for m, p, s, n in up), "t_cold": t_cold, "t_warm": t_warm, "ttl_lookups": ttl_lookups}
        print(f"one pull of {REPO} ({len(files)} files, {fmt_bytes(w['B_pull'])}): {len(seq)} requests "
              f"({', '.join(f'{k} {sum(1 for x, _ in requests if x == k)}' for k in ('refs', 'listing', 'small', 'big'))}); "
              f"a cold edge asks its origin {len(up)} requests, {fmt_bytes(w['Bu'])}; one pull "
              f"{t_cold * 1e3:.0f} ms through a cold edge, {t_warm * 1e3:.0f} ms through a warm one")
        print(f"\nmodel: edges of {a.edge_cores} cores and {a.edge_gbps:g} Gb/s, an origin of {a.origin_cores} "
              f"cores and {a.origin_gbps:g} Gb/s, costs from {os.path.relpath(a.costs)}")
        print("| N hosts | K edges | hosts/edge | origin requests | origin bytes | time-to-ready | bound by |")
        print("|---:|---:|---:|---:|---:|---:|---|")
        table = []
        for nh in (10, 100, 1000, 10000, 100000):
            for k in sorted({1, max(1, nh // 1000), max(1, nh // 100)}):
                r = predict(w, costs, nh, k, a.edge_cores, a.origin_cores, a.edge_gbps, a.origin_gbps, a.revision_ttl)
                table.append(r)
                print(f"| {nh:,} | {k} | {r['hosts_per_edge']:,} | {r['origin_requests']:,} | "
                      f"{fmt_bytes(r['origin_bytes'])} | {r['ready_s']:.2f} s | {r['bound']} |")
        out = {"workload": {k: v for k, v in w.items() if k not in ("requests", "upstream")}, "model": table}
        if a.real:
            # the clients' own CPU per pull, from a calibration wave on the warm edge
            c0 = cpu_of(e1.proc.pid)
            res, wall, ccpu = replay(e1.port, seq, exp_by_url, a.calib)
            assert all(r[0] for r in res), [r[2] for r in res if not r[0]][:3]
            client_cpu = ccpu / a.calib
            edge_cpu_meas = (cpu_of(e1.proc.pid) - c0) / a.calib
            e1.stop()
            mirrors.remove(e1)
            # the replaying client asks for one file at a time (hubkern pull: 8 at once), and a burst
            # of clients on a cold edge waits on each miss in turn, so the fill of this machine's run
            # is measured for it: --calib clients at once through a fresh edge (t_cold), and one
            # client through the then warm edge (t_warm)
            e0 = fresh_edge("edge-burst")
            res0, t_cold_r, _ = replay(e0.port, seq, exp_by_url, a.calib)
            warm1 = [replay(e0.port, seq, exp_by_url, 1) for _ in range(3)]
            t_warm_r = min(x[1] for x in warm1)
            assert all(r[0] for r in res0) and all(x[0][0][0] for x in warm1), res0[:3]
            e0.stop()
            mirrors.remove(e0)
            w_here = dict(w, t_cold=t_cold_r, t_warm=t_warm_r)
            e2 = fresh_edge("edge-real")
            o0 = len(origin.access())
            c0, oc0 = cpu_of(e2.proc.pid), cpu_of(origin.proc.pid)
            res, wall, ccpu = replay(e2.port, seq, exp_by_url, a.real)
            edge_cpu = cpu_of(e2.proc.pid) - c0
            run_cpu = ccpu + edge_cpu + cpu_of(origin.proc.pid) - oc0
            up2 = origin.access()[o0:]
            fails = [r[2] for r in res if not r[0]]
            times = sorted(r[1] for r in res)
            # the same clients again, now that the edge holds everything: the model without its fill
            c0 = cpu_of(e2.proc.pid)
            resw, wall_w, ccpu_w = replay(e2.port, seq, exp_by_url, a.real)
            run_cpu_w = ccpu_w + cpu_of(e2.proc.pid) - c0
            fails += [r[2] for r in resw if not r[0]]
            pred_w = predict(dict(w_here, t_cold=t_warm_r), costs, a.real, 1, a.cores, a.cores, 1e3, 1e3,
                             a.revision_ttl, extra_pull_cpu=client_cpu)
            pred = predict(w_here, costs, a.real, 1, a.cores, a.cores, 1e3, 1e3, a.revision_ttl,
                           extra_pull_cpu=client_cpu)
            print(f"\nreal run: {a.real} concurrent clients (asyncio, a keep-alive connection each, replaying the "
                  f"recorded pull, sha256 of every file checked) -> one fresh edge -> origin, all on this "
                  f"machine's {a.cores} cores; calibration ({a.calib} clients, warm edge): client "
                  f"{client_cpu * 1e3:.2f} ms CPU per pull, edge {edge_cpu_meas * 1e3:.2f} ms (model's edge cost "
                  f"{sum(request_cost(costs['edge'], k, s) for k, s in requests) * 1e3:.2f} ms); {a.calib} replaying "
                  f"clients at once through a fresh edge: {t_cold_r * 1e3:.0f} ms, one through the warm edge "
                  f"{t_warm_r * 1e3:.0f} ms")
            print("| measure | model (K=1, this machine) | measured |")
            print("|---|---:|---:|")
            print(f"| clients failed | 0 | {len(fails)} |")
            print(f"| origin requests | {pred['origin_requests']} | {len(up2)} |")
            print(f"| origin bytes | {fmt_bytes(pred['origin_bytes'])} | {fmt_bytes(sum(x[3] for x in up2))} |")
            print(f"| time-to-ready (last client done), cold edge | {pred['ready_s']:.2f} s | {wall:.2f} s |")
            print(f"| time-to-ready, the same {a.real} clients again (edge warm) | {pred_w['ready_s']:.2f} s | "
                  f"{wall_w:.2f} s |")
            print(f"| median client done, cold edge | - | {times[len(times) // 2]:.2f} s |")
            # other jobs share these cores: the CPU the run got, and the model's time at that share
            c_pull = sum(request_cost(costs["edge"], k, s) for k, s in requests) + client_cpu
            for label, cpu_s, wall_s, fill in (("cold", run_cpu, wall, max(0.0, t_cold_r - t_warm_r)),
                                               ("warm", run_cpu_w, wall_w, 0.0)):
                share = cpu_s / wall_s
                print(f"| CPU of the run ({label}: clients + edge + origin) | {a.real * c_pull:.2f} s | {cpu_s:.2f} s |")
                print(f"| cores the run got ({label}: CPU / wall) | {a.cores} | {share:.2f} |")
                print(f"| time-to-ready at the cores it got ({label}) | "
                      f"{fill + max(t_warm_r, a.real * c_pull / share):.2f} s | {wall_s:.2f} s |")
            print(f"| edge CPU | {a.real * sum(request_cost(costs['edge'], k, s) for k, s in requests):.2f} s | "
                  f"{edge_cpu:.2f} s |")
            out["real"] = {"clients": a.real, "failed": len(fails), "origin_requests": len(up2),
                           "origin_bytes": sum(x[3] for x in up2), "ready_s": wall, "predicted": pred,
                           "ready_warm_s": wall_w, "predicted_warm": pred_w, "burst_fill_s": t_cold_r,
                           "run_cpu_s": run_cpu, "run_cpu_warm_s": run_cpu_w,
                           "client_cpu_per_pull": client_cpu, "edge_cpu_s": edge_cpu, "errors": fails[:5]}
            if fails:
                print("failures:", fails[:5])
        if a.json:
            with open(a.json, "w") as fh:
                json.dump(out, fh, indent=1)
        return 1 if out.get("real", {}).get("failed") else 0
    finally:
        for m in mirrors:
            try:
                m.stop()
            except Exception:  # noqa: BLE001
                m.proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

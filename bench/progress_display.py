"""The progress bar as a user sees it, this build beside a baseline binary, in one run.

Two blobs (1.5 MB and 1.2 MB) stream at once through a throttle (600 kB/s each) from a loopback
mirror; `hubkern pull` runs under a pseudo-terminal of 200 columns. The table reports, per binary,
which files the bar named, its widest line, the first frame's rate and ETA, and the lowest and
highest rates drawn (issue 24: "metadata.json 10 %" while two blobs streamed, ~40 cells at 200
columns, "2.4 kB/s 353:01:55" at the start).

usage: python3 bench/progress_display.py [--baseline /path/to/old/hubkern] [--build build]
"""
import argparse
import os
import pathlib
import re
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))


def rate_of(s):
    m = re.search(r" ([\d.]+) (B|kB|MB)/s", s)
    return float(m.group(1)) * {"B": 1, "kB": 1e3, "MB": 1e6}[m.group(2)] if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", default="/work/main/build/cli/hubkern")
    ap.add_argument("--build", default=str(ROOT / "build"))
    a = ap.parse_args()
    os.environ.setdefault("HK_BUILD_DIR", a.build)
    os.environ["HK_SERVE_BIN"] = str(pathlib.Path(a.build) / "cli" / "hubkern")
    import test_cli as t  # its pty_run and names
    from faultproxy import FaultProxy, Rule, Server, make_variant, publish
    tmp = pathlib.Path(tempfile.mkdtemp())
    store, src = str(tmp / "store"), str(tmp / "src")
    make_variant(src, t.V, {"__init__.py": b"a = 1\n", "a_part.so": os.urandom(1_500_000),
                            "b_part.so": os.urandom(1_200_000)})
    publish(src, "org/twokern", "v1", store, ["--lfs-threshold", "1000000"])
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS", "COLUMNS")}
    rows = []
    for name, binary in (("baseline", a.baseline), ("this build", os.environ["HK_SERVE_BIN"])):
        with Server(store, ["--trust", "org"]) as srv, \
                FaultProxy(srv.url, rules=[Rule("drip", r"_part\.so", count=None, chunk=16384, rate=600_000)]) as px:
            r, drawn = t.pty_run(f"{binary} pull org/twokern --version 1 --variant {t.V} --endpoint {px.url} "
                                 f"--cache-dir {tmp / name.replace(' ', '_')}", 200, env)
        bars = [s for s in drawn if re.search(r"\[[# ]*\] +\d+%", s)]
        names = sorted({s.split(" [")[0] for s in bars if not s.startswith("[")})
        first = next((s for s in bars if re.search(r"[1-9]\d* ?%", s) or rate_of(s)), bars[0])
        first_rate = re.search(r" (--|[\d.]+ [kM]?B)/s (\S+)", first)
        rates = [x for x in map(rate_of, bars) if x]
        rows.append((name, ", ".join(names), max(map(len, bars)), first_rate.group(0).strip() if first_rate else "-",
                     f"{min(rates) / 1e3:.1f}" if rates else "-", f"{max(rates) / 1e3:.1f}" if rates else "-"))
    print("| binary | files named | widest line (of 200) | first frame with bytes: rate ETA | lowest rate kB/s | highest rate kB/s |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(map(str, row)) + " |")


if __name__ == "__main__":
    main()

"""Repairing and interrupting against a real `hubkern serve` (issue 24 items 4, 5 and 6).

- A pull that finds a cached blob whose bytes no longer match its name fetches it again and renames
  the new copy over the bad one; offline it fails naming the file and the repair. --force-download
  fetches every file again the same way. `cache verify --repair` pulls the damaged variants again.
- SIGINT and SIGTERM mid-transfer say how many files were complete and how many partial bytes were
  kept, and exit 130 / 143; the next pull counts only the bytes it transferred (and says how many it
  resumed). prune keeps what an unfinished pull will link or resume, until its plan is 7 days old;
  `cache ls` counts blobs only. Offline, a partly cached variant is "incomplete" (HK_ERR_OFFLINE).
- Read-only commands (info, versions, variants, env, cache ls, cache verify) change nothing in the
  cache: the tree (paths, sizes, mtimes) is the same before and after each.
- `cache rm` and `cache prune` ask first: without -y and without a terminal (or with --json) they
  refuse (exit 2)."""
import glob
import hashlib
import json
import os
import pty
import signal
import subprocess
import time

import pytest

from faultproxy import FaultProxy, Rule, hubkern_bin
from hk_serve_helpers import published_mirror, run_isolated as run

V = "tvm-ffi01-cpu-x86_64-linux"
BIG = os.urandom(8_000_000)
SHA = hashlib.sha256(BIG).hexdigest()
BIG_RE = f"/resolve/[0-9a-f]+/build/{V}/big.bin"
REPO = "org/repair"
FOLDER = "kernels--org--repair"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with published_mirror(tmp_path_factory.mktemp("hub"), REPO, V, {"__init__.py": b"from ._ops import *\n", "_ops.py": b"ops = 1\n", "big.bin": BIG}, lfs_threshold=1000000) as srv:
        yield srv


def pull_args(url, cache, *extra):
    return ["pull", REPO, "--version", "1", "--variant", V, "--endpoint", url, "--cache", cache, *extra]


def pull(url, cache, *extra, check=True):
    r = run(pull_args(url, cache, "--json", *extra), check=check)
    return json.loads(r.stdout) if r.returncode == 0 else r


def blobs(cache):
    return os.path.join(cache, FOLDER, "blobs")


def big_blob(cache):
    return os.path.join(blobs(cache), SHA)


def flip_byte(path, at=4096):
    os.chmod(path, 0o644)
    with open(path, "r+b") as fh:
        fh.seek(at)
        b = fh.read(1)
        fh.seek(at)
        fh.write(bytes([b[0] ^ 0x55]))


def content(out):
    with open(os.path.join(out["snapshot"], "build", V, "big.bin"), "rb") as fh:
        return fh.read()


def verify(cache, *extra):
    return run(["cache", "verify", "--cache", cache, *extra], check=False)


# ---- item 4: a damaged blob is fetched again ---------------------------------------------------
def test_a_pull_fetches_a_damaged_blob_again_and_replaces_it_atomically(hub, tmp_path):
    cache = str(tmp_path / "c")
    pull(hub.url, cache)
    flip_byte(big_blob(cache))
    ino = os.stat(big_blob(cache)).st_ino
    out = pull(hub.url, cache)
    assert content(out) == BIG
    assert out["files_downloaded"] == 1 and out["bytes_downloaded"] == len(BIG), out
    assert os.stat(big_blob(cache)).st_ino != ino  # a new file renamed over the bad one
    assert verify(cache).returncode == 0
    assert not glob.glob(os.path.join(blobs(cache), "*.incomplete"))


def test_offline_a_damaged_blob_names_the_file_and_the_repair(hub, tmp_path):
    cache = str(tmp_path / "c")
    pull(hub.url, cache)
    flip_byte(big_blob(cache))
    r = run(["pull", REPO, "--version", "1", "--variant", V, "--offline", "--cache", cache], check=False)
    assert r.returncode == 1 and "HK_ERR_DIGEST" in r.stderr, r.stderr
    assert "big.bin" in r.stderr and "cache verify --repair" in r.stderr, r.stderr
    v = verify(cache)
    assert v.returncode == 1 and SHA in v.stdout and "--repair" in v.stdout
    rep = verify(cache, "--repair", "--endpoint", hub.url)
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert f"repaired kernel/{REPO}: build/{V}" in rep.stdout and "1 file" in rep.stdout, rep.stdout
    assert rep.stdout.strip().splitlines()[-1].startswith("clean"), rep.stdout
    out = json.loads(run(["pull", REPO, "--version", "1", "--variant", V, "--offline", "--json", "--cache",
                          cache]).stdout)
    assert content(out) == BIG
    # a clean cache: --repair fetches nothing and says so by saying nothing
    rep = verify(cache, "--repair", "--endpoint", hub.url)
    assert rep.returncode == 0 and "repaired" not in rep.stdout, rep.stdout


def test_force_download_fetches_every_file_again(hub, tmp_path):
    cache = str(tmp_path / "c")
    first = pull(hub.url, cache)
    inos = {n: os.stat(os.path.join(blobs(cache), n)).st_ino for n in os.listdir(blobs(cache))}
    again = pull(hub.url, cache)
    assert again["files_downloaded"] == 0
    forced = pull(hub.url, cache, "--force-download")
    assert forced["files_downloaded"] == first["files_downloaded"] == len(inos), (first, forced)
    assert forced["bytes_downloaded"] == first["bytes_downloaded"]
    assert content(forced) == BIG
    for n, ino in inos.items():
        assert os.stat(os.path.join(blobs(cache), n)).st_ino != ino, n  # replaced by rename
    assert sorted(os.listdir(blobs(cache))) == sorted(inos)  # no temp file left
    assert verify(cache).returncode == 0


def test_offline_a_partly_cached_variant_is_incomplete_not_tampered(hub, tmp_path):
    cache = str(tmp_path / "c")
    out = pull(hub.url, cache)
    os.unlink(os.path.join(out["snapshot"], "build", V, "big.bin"))
    os.unlink(big_blob(cache))
    r = run(["pull", REPO, "--version", "1", "--variant", V, "--offline", "--cache", cache], check=False)
    assert r.returncode == 1 and "HK_ERR_OFFLINE" in r.stderr and "HK_ERR_DIGEST" not in r.stderr, r.stderr
    assert "incomplete" in r.stderr and "big.bin" in r.stderr and "pull it online" in r.stderr, r.stderr


# ---- item 5: interrupting ------------------------------------------------------------------------
def interrupt(url, cache, sig, at=1_500_000):
    """Start a pull through a slow link and send sig once `at` bytes of big.bin are kept."""
    env = dict(os.environ, HUBKERN_RETRY_BASE_MS="20", HF_HUB_DISABLE_IMPLICIT_TOKEN="1")
    env.pop("HF_HUB_OFFLINE", None)
    p = subprocess.Popen([hubkern_bin(), *pull_args(url, cache, "--progress", "none")], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    part = os.path.join(blobs(cache), SHA + ".incomplete")
    t0 = time.monotonic()
    while time.monotonic() - t0 < 30 and not (os.path.exists(part) and os.path.getsize(part) >= at):
        time.sleep(0.02)
    p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    return p.returncode, err, part


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_an_interrupted_pull_reports_what_it_kept_and_resumes(hub, tmp_path, sig, code):
    cache = str(tmp_path / "c")
    with FaultProxy(hub.url, rules=[Rule("drip", BIG_RE, count=None, rate=1_500_000, chunk=32768)]) as px:
        rc, err, part = interrupt(px.url, cache, sig)
        assert rc == code, err
        name = "SIGTERM" if sig == signal.SIGTERM else "SIGINT"
        assert f"interrupted by {name}" in err and "HK_ERR_CANCELLED" in err, err
        kept = os.path.getsize(part)
        assert kept >= 1_500_000
        done = [n for n in os.listdir(blobs(cache)) if "." not in n]
        # "N of M files complete": the blobs that are whole, not those with partial bytes
        assert f"{len(done)} of {len(done) + 1} files complete" in err, (err, done)
        assert f"1 partial file ({kept} bytes) kept" in err, err
        assert "0 of 0" not in err

        # prune keeps what the unfinished pull will link or resume; ls counts blobs only
        pr = run(["cache", "prune", "-y", "--cache", cache])
        assert os.path.exists(part) and os.path.getsize(part) == kept, pr.stdout
        assert sorted(n for n in os.listdir(blobs(cache)) if "." not in n) == sorted(done), pr.stdout
        assert "belongs to an unfinished pull" in pr.stdout and "removed 0 entries" in pr.stdout, pr.stdout
        ls = json.loads(run(["cache", "ls", "--json", "--cache", cache]).stdout)
        assert ls["repos"][0]["size"] == sum(os.path.getsize(os.path.join(blobs(cache), n)) for n in done)

        # the resumed pull: only the bytes transferred now count as downloaded
        px.rules = []
        out = pull(px.url, cache)
    assert content(out) == BIG
    assert out["bytes_resumed"] == kept, out
    assert out["bytes_downloaded"] == len(BIG) - kept, out
    assert out["files_downloaded"] == 1
    # the pull finished: nothing is protected any more, nothing left over
    assert not os.listdir(os.path.join(cache, ".locks", FOLDER, "hubkern-pulls"))
    assert verify(cache).returncode == 0


def test_prune_takes_an_abandoned_pull_after_seven_days(hub, tmp_path):
    cache = str(tmp_path / "c")
    with FaultProxy(hub.url, rules=[Rule("drip", BIG_RE, count=None, rate=1_500_000, chunk=32768)]) as px:
        rc, err, part = interrupt(px.url, cache, signal.SIGTERM)
    assert rc == 143 and os.path.exists(part)
    (plan,) = glob.glob(os.path.join(cache, ".locks", FOLDER, "hubkern-pulls", "*"))
    old = time.time() - 8 * 24 * 3600
    os.utime(plan, (old, old))
    pr = run(["cache", "prune", "-y", "--cache", cache])
    assert "plan of a pull not resumed for 7 days" in pr.stdout, pr.stdout
    assert not os.path.exists(plan) and not os.path.exists(part)
    assert not [n for n in os.listdir(blobs(cache))], pr.stdout  # its finished blobs were unreferenced


def test_unique_temp_files_of_a_dead_writer_are_still_pruned(hub, tmp_path):
    cache = str(tmp_path / "c")
    pull(hub.url, cache)
    dead = os.path.join(blobs(cache), SHA + ".0badf00d.incomplete")
    with open(dead, "wb") as fh:
        fh.write(BIG[:1000])
    pr = run(["cache", "prune", "-y", "--cache", cache])
    assert not os.path.exists(dead) and "removed 1 entry" in pr.stdout, pr.stdout


# ---- item 6: read-only commands change nothing ---------------------------------------------------
def tree(root):
    """Every path under root with its type, size and mtime (links: their target)."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_mode, st.st_size, st.st_mtime_ns,
                                             os.readlink(p) if os.path.islink(p) else None)
    return out


def test_read_only_commands_change_nothing_in_the_cache(hub, tmp_path):
    cache = str(tmp_path / "c")
    out = pull(hub.url, cache)
    with open(os.path.join(blobs(cache), SHA + ".incomplete"), "wb") as fh:  # a partial file too
        fh.write(BIG[:5000])
    vdir = os.path.join(out["snapshot"], "build", V)
    commands = [
        ["info", REPO, "--endpoint", hub.url, "--cache", cache],
        ["info", REPO, "--json", "--endpoint", hub.url, "--cache", cache],
        ["info", REPO, "--offline", "--cache", cache],
        ["versions", REPO, "--endpoint", hub.url, "--cache", cache],
        ["versions", REPO, "--offline", "--cache", cache],
        ["variants", vdir],
        ["env", "--cache-dir", cache],
        ["cache", "ls", "--cache", cache],
        ["cache", "ls", "--json", "--cache", cache],
        ["cache", "verify", "--cache", cache],
        ["cache", "verify", "--json", "--cache", cache],
        ["cache", "prune", "--dry-run", "--cache", cache],
        ["cache", "rm", REPO, "--dry-run", "--cache", cache],
    ]
    for damaged in (False, True):
        if damaged:  # verify finds a problem and still changes nothing (no receipt deleted)
            flip_byte(big_blob(cache))
        for args in commands:
            before = tree(cache)
            run(args, check=False)
            after = tree(cache)
            assert after == before, (args, set(after) ^ set(before))


def test_info_on_an_empty_cache_writes_nothing(hub, tmp_path):
    cache = str(tmp_path / "c")
    for _ in range(2):
        j = json.loads(run(["info", REPO, "--json", "--endpoint", hub.url, "--cache", cache]).stdout)
        assert j["cached"] is False
        assert not os.path.exists(cache), tree(cache) if os.path.exists(cache) else None


# ---- cache rm asks first -------------------------------------------------------------------------
def answer_at_a_terminal(args, answer):
    """Run hubkern ARGS with a pseudo-terminal on stdin (a person at a terminal) answering `answer`;
    return (exit status, stderr)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([hubkern_bin(), *args], stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(slave)
    os.write(master, answer)
    _, err = p.communicate(timeout=30)
    os.close(master)
    return p.returncode, err.decode()


def refuses_unasked(args):
    """Without a terminal on stdin, and under --json, args removes nothing: exit 2 naming -y."""
    r = run(args, stdin=subprocess.DEVNULL, check=False)
    assert r.returncode == 2 and "-y" in r.stderr and "not a terminal" in r.stderr, r.stderr
    r = run(args + ["--json"], stdin=subprocess.DEVNULL, check=False)
    err = json.loads(r.stdout)["error"]
    assert r.returncode == 2 and err["exit_status"] == 2 and "--json cannot ask" in err["message"], r.stdout


def test_cache_rm_asks_unless_yes(hub, tmp_path):
    cache = str(tmp_path / "c")
    pull(hub.url, cache)
    repo = os.path.join(cache, FOLDER)
    refuses_unasked(["cache", "rm", REPO, "--cache", cache])
    assert os.path.isdir(repo)
    for answer, gone in ((b"n\n", False), (b"y\n", True)):
        rc, err = answer_at_a_terminal(["cache", "rm", REPO, "--cache", cache], answer)
        assert "Remove these" in err and (rc == 0) == gone, err
        assert os.path.isdir(repo) != gone
    pull(hub.url, cache)
    run(["cache", "rm", REPO, "-y", "--cache", cache])
    assert not os.path.exists(repo)


def test_cache_prune_asks_unless_yes(hub, tmp_path):
    """prune shows its dry run and asks as rm does (issue 24): an orphan blob, which prune removes,
    survives every refusal and a "no", goes on "yes" or with -y; with nothing to remove it asks nothing."""
    cache = str(tmp_path / "c")
    pull(hub.url, cache)
    orphan_bytes = b"no snapshot links me\n"

    def plant():
        path = os.path.join(blobs(cache), hashlib.sha256(orphan_bytes).hexdigest())
        with open(path, "wb") as fh:
            fh.write(orphan_bytes)
        return path

    orphan = plant()
    refuses_unasked(["cache", "prune", "--cache", cache])
    assert os.path.exists(orphan)
    rc, err = answer_at_a_terminal(["cache", "prune", "--cache", cache], b"n\n")
    assert rc == 1 and "Remove these 1 entry" in err and os.path.basename(orphan) in err, err
    assert "nothing removed" in err and os.path.exists(orphan)
    rc, err = answer_at_a_terminal(["cache", "prune", "--cache", cache], b"y\n")
    assert rc == 0 and not os.path.exists(orphan), err
    assert os.path.exists(big_blob(cache))  # what a snapshot uses stays
    rc, err = answer_at_a_terminal(["cache", "prune", "--cache", cache], b"")
    assert rc == 0 and "Remove these" not in err, err  # nothing would go: no question
    r = run(["cache", "prune", "--cache", cache], stdin=subprocess.DEVNULL)
    assert "removed 0 entries" in r.stdout
    orphan = plant()
    r = run(["cache", "prune", "-y", "--json", "--cache", cache], stdin=subprocess.DEVNULL)
    assert json.loads(r.stdout)["removed"] == 1 and not os.path.exists(orphan)

"""Verification receipts: a warm `hubkern pull` of an already verified variant does not read the
blobs again while their stat identity (st_dev, st_ino, size, mtime, ctime) is unchanged, and any
change is caught. Real `hubkern serve` on loopback; the cache is checked with the real
huggingface_hub scan_cache_dir afterwards.

How "not read" is proven without trusting hubkern's own log: /proc/self/io `rchar` of this process
grows by the bytes that its reaped children read with read(2) (the kernel adds a child's I/O counts
to its parent at wait time). Each claim is paired with a positive control (HUBKERN_VERIFY=always, or
a fresh receipt) measured the same way."""
import hashlib
import json
import os
import re
import subprocess
import time

import pytest

from faultproxy import run_cli
from hk_serve_helpers import published_mirror

REPO = "org/rkern"
V = "tvm-ffi01-cpu-x86_64-linux"
SO = os.urandom(3_000_000)
DATA = os.urandom(2_000_000)
FILES = {"__init__.py": b"from ._ops import *\n", "_ops.py": b"ops = 1\n", "_rkern.so": SO, "data/table.bin": DATA}
TOTAL = sum(len(v) for v in FILES.values())
FOLDER = "kernels--org--rkern"
LINE = re.compile(r"matches its metadata.json digest: (\d+) bytes hashed, (\d+) bytes fresh from this download, "
                  r"(\d+) bytes trusted by receipt")


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with published_mirror(tmp_path_factory.mktemp("hub"), REPO, V, FILES, lfs_threshold=1000000) as srv:
        yield srv


def rchar():
    with open("/proc/self/io") as fh:
        for line in fh:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


class Pull:
    def __init__(self, r, read):
        self.r, self.read = r, read
        self.json = json.loads(r.stdout) if r.returncode == 0 else None
        m = LINE.findall(r.stderr)
        self.hashed, self.fresh, self.trusted = (int(x) for x in m[-1]) if m else (None, None, None)
        self.checks = [tuple(int(x) for x in t) for t in m]  # (hashed, fresh, trusted) of each check, in order


def pull(hub, cache, env=None, offline=False, check=True):
    e = {"HUBKERN_RETRY_BASE_MS": "20", "HUBKERN_VERBOSE": "2"}
    e.update(env or {})
    args = ["pull", REPO, "--version", "1", "--variant", V, "--json", "--cache", cache]
    args += ["--offline"] if offline else ["--endpoint", hub.url]
    before = rchar()
    r = run_cli(args, env=e, check=check, unset=("HF_HUB_OFFLINE", "HUBKERN_VERIFY", "HUBKERN_RECEIPTS_DIR"))
    return Pull(r, rchar() - before)


def snapdir(cache):
    with open(os.path.join(cache, FOLDER, "refs", "v1")) as fh:
        commit = fh.read()
    return commit, os.path.join(cache, FOLDER, "snapshots", commit, "build", V)


def receipt_path(cache):
    commit, _ = snapdir(cache)
    return os.path.join(cache, ".locks", FOLDER, "hubkern-receipts", commit, V + ".json")


def blob_of(cache, rel):
    _, vdir = snapdir(cache)
    return os.path.realpath(os.path.join(vdir, rel))


def primed(hub, tmp_path, name="cache"):
    """Cold pull, then one warm pull once every file is older than the 20 ms racy window: from then
    on the receipt vouches for every file."""
    cache = str(tmp_path / name)
    cold = pull(hub, cache)
    # the staged copy's check reads or vouches for every byte (hashed, or fresh from the download);
    # the published copy's check may take what that check found (same blobs) as trusted
    assert cold.json["files_downloaded"] == 5 and len(cold.checks) == 2, cold.r.stderr
    assert sum(cold.checks[0][:2]) == TOTAL and cold.checks[0][2] == 0, cold.checks
    assert sum(cold.checks[1]) == TOTAL, cold.checks
    time.sleep(0.05)
    pull(hub, cache)
    return cache


def test_warm_pull_reads_no_blob_and_always_rehashes(hub, tmp_path):
    cache = primed(hub, tmp_path)
    assert os.path.isfile(receipt_path(cache))
    for offline in (False, True):
        p = pull(hub, cache, offline=offline)
        assert (p.hashed, p.fresh, p.trusted) == (0, 0, TOTAL), p.r.stderr
        assert p.json["bytes_trusted"] == TOTAL and p.json["bytes_verified"] == 0
        assert p.read < TOTAL // 4, f"a receipt hit still read {p.read} bytes"
    # (5) HUBKERN_VERIFY=always: every byte read and hashed again, receipt ignored
    a = pull(hub, cache, env={"HUBKERN_VERIFY": "always"})
    assert (a.hashed, a.trusted) == (TOTAL, 0) and a.json["bytes_trusted"] == 0
    assert a.read >= TOTAL, f"HUBKERN_VERIFY=always read only {a.read} bytes"
    # the receipt survived and still works
    assert pull(hub, cache).trusted == TOTAL


def test_modified_blob_with_restored_mtime_is_caught(hub, tmp_path):
    cache = primed(hub, tmp_path)
    rp = receipt_path(cache)
    assert pull(hub, cache).trusted == TOTAL
    blob = blob_of(cache, "_rkern.so")
    st = os.stat(blob)
    time.sleep(0.01)
    with open(blob, "r+b") as fh:
        fh.seek(1234)
        b = fh.read(1)
        fh.seek(1234)
        fh.write(bytes([b[0] ^ 0xFF]))
    os.utime(blob, ns=(st.st_atime_ns, st.st_mtime_ns))
    st2 = os.stat(blob)
    assert (st2.st_ino, st2.st_size, st2.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)
    assert st2.st_ctime_ns != st.st_ctime_ns
    p = pull(hub, cache, offline=True, check=False)
    assert p.r.returncode == 1, p.r.stdout
    assert "HK_ERR_DIGEST" in p.r.stderr and "HashMismatch: _rkern.so" in p.r.stderr
    assert "cache verify --repair" in p.r.stderr
    assert not os.path.exists(rp), "a failed check must delete the receipt"
    assert run_cli(["cache", "verify", "--cache", cache], check=False).returncode == 1
    # online, the pull fetches the damaged blob again instead of failing for good (issue 24 item 4)
    p = pull(hub, cache, offline=False)
    assert p.r.returncode == 0 and run_cli(["cache", "verify", "--cache", cache]).returncode == 0


def test_replaced_blob_is_caught(hub, tmp_path):
    cache = primed(hub, tmp_path)
    blob = blob_of(cache, "data/table.bin")
    st = os.stat(blob)
    # same bytes, new inode (mtime copied): not trusted, hashed again, and fine
    tmp = blob + ".new"
    with open(tmp, "wb") as fh:
        fh.write(DATA)
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, blob)
    assert os.stat(blob).st_ino != st.st_ino
    time.sleep(0.05)  # past the racy window, so that the re-hashed file can be recorded at once
    p = pull(hub, cache)
    assert (p.hashed, p.trusted) == (len(DATA), TOTAL - len(DATA)), p.r.stderr
    assert pull(hub, cache).trusted == TOTAL  # the re-hashed file is vouched for again
    # other bytes, same size and mtime, new inode: a digest failure
    st = os.stat(blob)
    with open(tmp, "wb") as fh:
        fh.write(DATA[:-1] + bytes([DATA[-1] ^ 1]))
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, blob)
    p = pull(hub, cache, offline=True, check=False)
    assert p.r.returncode == 1 and "HashMismatch: data/table.bin" in p.r.stderr
    assert not os.path.exists(receipt_path(cache))


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "other_root", "bad_stat", "other_metadata"])
def test_damaged_receipt_falls_back_to_full_verification(hub, tmp_path, damage):
    cache = primed(hub, tmp_path)
    rp = receipt_path(cache)
    with open(rp) as fh:
        text = fh.read()
    j = json.loads(text)
    if damage == "truncated":
        text = text[: len(text) // 2]
    elif damage == "garbage":
        text = "\x00\xff not json"
    elif damage == "empty":
        text = ""
    elif damage == "other_root":
        j["cache_root"] = j["cache_root"] + "-elsewhere"
        text = json.dumps(j)
    elif damage == "bad_stat":
        j["files"][0]["stat"] = "12 x"
        text = json.dumps(j)
    elif damage == "other_metadata":
        j["metadata_sha256"] = hashlib.sha256(b"another metadata.json").hexdigest()
        text = json.dumps(j)
    with open(rp, "w") as fh:
        fh.write(text)
    p = pull(hub, cache, offline=True)
    assert (p.hashed, p.trusted) == (TOTAL, 0), p.r.stderr
    assert p.read >= TOTAL
    # ... and a new, valid receipt replaces the damaged one
    j2 = json.load(open(rp))
    assert j2["format"] == "hubkern-verify-receipt/1" and len(j2["files"]) == len(FILES)
    assert pull(hub, cache, offline=True).trusted == TOTAL


def test_one_changed_entry_rehashes_only_that_file(hub, tmp_path):
    cache = primed(hub, tmp_path)
    rp = receipt_path(cache)
    j = json.load(open(rp))
    e = next(f for f in j["files"] if f["path"] == "_rkern.so")
    size, dev, ino, mtime, ctime = e["stat"].split()
    e["stat"] = " ".join([size, dev, ino, mtime, str(int(ctime) - 1)])
    with open(rp, "w") as fh:
        json.dump(j, fh)
    p = pull(hub, cache, offline=True)
    assert (p.hashed, p.trusted) == (len(SO), TOTAL - len(SO)), p.r.stderr


def test_copied_cache_does_not_trust_the_receipt(hub, tmp_path):
    cache = primed(hub, tmp_path)
    copy = str(tmp_path / "copy")
    subprocess.run(["cp", "-a", cache, copy], check=True)  # same names and mtimes, other root and inodes
    assert os.path.isfile(receipt_path(copy))
    p = pull(hub, copy, offline=True)
    assert (p.hashed, p.trusted) == (TOTAL, 0), p.r.stderr
    assert "written for another cache root" in p.r.stderr


def test_forged_receipt_is_caught_by_cache_verify(hub, tmp_path):
    """What receipts cannot see: content that changed while stat did not (media rot, or a receipt
    rewritten to match). `hubkern cache verify` always hashes every byte and reports it, changing
    nothing; `cache verify --repair` forgets the receipt and fetches the damaged file again."""
    cache = primed(hub, tmp_path)
    rp = receipt_path(cache)
    blob = blob_of(cache, "_rkern.so")
    with open(blob, "r+b") as fh:
        fh.write(b"\x00" if SO[0] != 0 else b"\x01")
    st = os.stat(blob)
    j = json.load(open(rp))
    e = next(f for f in j["files"] if f["path"] == "_rkern.so")
    e["stat"] = f"{st.st_size} {st.st_dev} {st.st_ino} {st.st_mtime_ns} {st.st_ctime_ns}"
    with open(rp, "w") as fh:
        json.dump(j, fh)
    assert pull(hub, cache, offline=True).trusted == TOTAL  # the premise: the forged receipt is in effect
    v = run_cli(["cache", "verify", "--cache", cache], check=False)
    assert v.returncode == 1 and "HashMismatch: _rkern.so" in v.stdout and "--repair" in v.stdout
    assert os.path.exists(rp)  # verify reads only
    v = run_cli(["cache", "verify", "--repair", "--endpoint", hub.url, "--cache", cache], check=False)
    assert v.returncode == 0 and "repaired kernel/" in v.stdout, v.stdout + v.stderr
    with open(blob_of(cache, "_rkern.so"), "rb") as fh:
        assert fh.read() == SO
    assert pull(hub, cache, offline=True).r.returncode == 0


def test_concurrent_pulls_leave_a_valid_receipt(hub, tmp_path):
    cache = primed(hub, tmp_path)
    rp = receipt_path(cache)
    os.unlink(rp)
    env = dict(os.environ, HUBKERN_VERBOSE="2")
    for k in ("HF_HUB_OFFLINE", "HUBKERN_VERIFY", "HUBKERN_RECEIPTS_DIR"):
        env.pop(k, None)
    from faultproxy import hubkern_bin
    procs = [subprocess.Popen([hubkern_bin(), "pull", REPO, "--version", "1", "--variant", V, "--json", "--offline",
                               "--cache", cache], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(6)]
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    assert json.load(open(rp))["format"] == "hubkern-verify-receipt/1"
    assert not [n for n in os.listdir(os.path.dirname(rp)) if n.endswith(".tmp")]
    assert pull(hub, cache, offline=True).trusted == TOTAL


def test_receipts_dir_override_keeps_them_out_of_the_cache(hub, tmp_path):
    rdir = str(tmp_path / "receipts")
    cache = str(tmp_path / "cache")
    env = {"HUBKERN_RECEIPTS_DIR": rdir}
    pull(hub, cache, env=env)
    time.sleep(0.05)
    pull(hub, cache, env=env)
    assert pull(hub, cache, env=env).trusted == TOTAL
    assert not os.path.exists(os.path.join(cache, ".locks", FOLDER, "hubkern-receipts"))
    found = [os.path.join(d, f) for d, _, fs in os.walk(rdir) for f in fs]
    assert len(found) == 1 and found[0].endswith(os.path.join(FOLDER, snapdir(cache)[0], V + ".json"))
    assert pull(hub, cache).trusted == 0  # the default location has none


def test_python_scan_cache_dir_sees_no_corruption(hub, tmp_path):
    cache = primed(hub, tmp_path)
    assert os.path.isfile(receipt_path(cache))
    code = ("import json,sys\n"
            "from huggingface_hub import scan_cache_dir\n"
            "i=scan_cache_dir(sys.argv[1])\n"
            "print(json.dumps({'warnings':[str(w) for w in i.warnings],'repos':sorted(r.repo_id+':'+r.repo_type "
            "for r in i.repos),'files':sorted(f.file_name for r in i.repos for v in r.revisions for f in v.files),"
            "'incomplete':len(i.incomplete_files)}))\n")
    def scan():
        py = subprocess.run(["python3", "-c", code, cache], capture_output=True, text=True)
        assert py.returncode == 0, py.stderr
        return json.loads(py.stdout)

    assert scan() == {"warnings": [], "repos": ["org/rkern:kernel"], "incomplete": 0,
                      "files": sorted(["__init__.py", "_ops.py", "_rkern.so", "table.bin", "metadata.json"])}
    # the hf CLI reads the same cache without complaint
    hf_cmd = ["python3", "-c", "from huggingface_hub.cli.hf import main; main()", "cache", "ls", "--cache-dir", cache,
              "--show-warnings"]
    hf = subprocess.run(hf_cmd, capture_output=True, text=True)
    assert hf.returncode == 0 and "org/rkern" in hf.stdout, hf.stdout + hf.stderr
    assert "inconsisten" not in (hf.stdout + hf.stderr).lower(), hf.stdout + hf.stderr
    # control: the scanner does flag an unknown directory at the root (where receipts must not live)
    os.mkdir(os.path.join(cache, "hubkern-receipts"))
    assert len(scan()["warnings"]) == 1

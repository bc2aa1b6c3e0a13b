"""`hubkern cache verify` on caches built by hand, one class of damage each (issue 25): the digest
check runs inside the one walk of snapshots/, so each class must still get its own finding, and a
link that leads out of blobs/ (or a blob that is itself a link) must be reported, never followed
to vouch for a file the cache does not hold."""
import base64
import hashlib
import json
import os

from faultproxy import run_cli

V = "tvm-ffi01-cpu-x86_64-linux"
COMMIT = "ab" * 20


def b64(data):
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def make_repo(cache, files, listed=None, extra_meta=None):
    """A repo whose variant links each of `files` to its blob, with metadata.json listing `listed`
    (default: the same files). Returns (repo folder, variant folder, {name: blob name})."""
    repo = os.path.join(cache, "kernels--org--k")
    vd = os.path.join(repo, "snapshots", COMMIT, "build", V)
    os.makedirs(vd)
    os.makedirs(os.path.join(repo, "blobs"))
    os.makedirs(os.path.join(repo, "refs"))
    blobs = {}
    for name, data in files.items():
        h = hashlib.sha256(data).hexdigest()
        with open(os.path.join(repo, "blobs", h), "wb") as fh:
            fh.write(data)
        os.symlink("../../../../blobs/" + h, os.path.join(vd, name))
        blobs[name] = h
    digest = {n: b64(d) for n, d in (listed if listed is not None else files).items()}
    text = json.dumps({"digest": {"algorithm": "sha256", "files": digest}}) if extra_meta is None else extra_meta(digest)
    meta = text.encode()
    oid = hashlib.sha1(b"blob %d\0" % len(meta) + meta).hexdigest()
    with open(os.path.join(repo, "blobs", oid), "wb") as fh:
        fh.write(meta)
    os.symlink("../../../../blobs/" + oid, os.path.join(vd, "metadata.json"))
    with open(os.path.join(repo, "refs", "v1"), "w") as fh:
        fh.write(COMMIT)
    return repo, vd, blobs


def verify(cache):
    return run_cli(["cache", "verify", "--cache", cache], check=False)


FILES = {"a.bin": os.urandom(3000), "b.bin": os.urandom(5000)}


def test_clean_cache_has_no_finding(tmp_path):
    cache = str(tmp_path / "c")
    make_repo(cache, FILES)
    r = verify(cache)
    assert r.returncode == 0 and "PROBLEM" not in r.stdout and "NOTE" not in r.stdout, r.stdout + r.stderr


def test_blob_that_is_a_symlink_is_not_followed(tmp_path):
    """blobs/<sha> is a link to a file outside the cache holding the right bytes: the blob is not a
    regular file, and the variant's digest entry is reported unchecked, not vouched for through it."""
    cache = str(tmp_path / "c")
    repo, _, blobs = make_repo(cache, FILES)
    outside = str(tmp_path / "outside.bin")
    with open(outside, "wb") as fh:
        fh.write(FILES["a.bin"])
    bp = os.path.join(repo, "blobs", blobs["a.bin"])
    os.unlink(bp)
    os.symlink(outside, bp)
    r = verify(cache)
    assert r.returncode != 0, r.stdout
    assert f"blobs/{blobs['a.bin']} is not a regular file" in r.stdout, r.stdout
    assert "NotChecked: a.bin" in r.stdout, r.stdout
    assert "NotChecked: b.bin" not in r.stdout and "HashMismatch" not in r.stdout, r.stdout


def test_snapshot_link_out_of_blobs_is_not_followed(tmp_path):
    """a.bin links to a file beside the cache with the right bytes: reported as outside blobs/ and
    as an unchecked digest entry (the old digest check followed it and found it matching)."""
    cache = str(tmp_path / "c")
    _, vd, _ = make_repo(cache, FILES)
    outside = str(tmp_path / "outside.bin")
    with open(outside, "wb") as fh:
        fh.write(FILES["a.bin"])
    os.unlink(os.path.join(vd, "a.bin"))
    os.symlink(os.path.relpath(outside, vd), os.path.join(vd, "a.bin"))
    r = verify(cache)
    assert r.returncode != 0
    assert "a.bin" in r.stdout and "points outside blobs/" in r.stdout, r.stdout
    assert "NotChecked: a.bin" in r.stdout, r.stdout


def test_hard_linked_blobs(tmp_path):
    """A blob hard-linked from outside the cache is content like any other (clean); the same inode
    under a second, wrong name is a corrupt blob."""
    cache = str(tmp_path / "c")
    repo, _, blobs = make_repo(cache, FILES)
    os.link(os.path.join(repo, "blobs", blobs["a.bin"]), str(tmp_path / "keep.bin"))
    r = verify(cache)
    assert r.returncode == 0 and "PROBLEM" not in r.stdout, r.stdout
    wrong = hashlib.sha256(b"other").hexdigest()
    os.link(os.path.join(repo, "blobs", blobs["a.bin"]), os.path.join(repo, "blobs", wrong))
    r = verify(cache)
    assert r.returncode != 0 and f"blobs/{wrong} content hash is {blobs['a.bin']}" in r.stdout, r.stdout
    assert "does not match its metadata.json digest" not in r.stdout, r.stdout


def test_truncated_blob(tmp_path):
    cache = str(tmp_path / "c")
    repo, _, blobs = make_repo(cache, FILES)
    with open(os.path.join(repo, "blobs", blobs["b.bin"]), "r+b") as fh:
        fh.truncate(100)
    r = verify(cache)
    assert r.returncode != 0
    assert f"blobs/{blobs['b.bin']} content hash is" in r.stdout, r.stdout
    assert "HashMismatch: b.bin" in r.stdout and "HashMismatch: a.bin" not in r.stdout, r.stdout


def test_listed_file_missing_from_the_folder(tmp_path):
    cache = str(tmp_path / "c")
    make_repo(cache, FILES, listed=dict(FILES, **{"gone.bin": b"x"}))
    r = verify(cache)
    assert r.returncode == 0 and "incomplete (1 file not pulled)" in r.stdout and "PROBLEM" not in r.stdout, r.stdout


def test_file_in_the_folder_missing_from_the_list(tmp_path):
    cache = str(tmp_path / "c")
    make_repo(cache, FILES, listed={"a.bin": FILES["a.bin"]})
    r = verify(cache)
    assert r.returncode != 0
    assert "stray file b.bin is not in the metadata.json digest" in r.stdout, r.stdout
    assert "UnknownFile: b.bin" in r.stdout and "incomplete" not in r.stdout, r.stdout


def test_name_listed_twice(tmp_path):
    """Two expectations for one file: the digest list is refused with its own finding."""
    cache = str(tmp_path / "c")

    def twice(digest):
        body = ", ".join(f'"{n}": "{v}"' for n, v in digest.items())
        return '{"digest": {"algorithm": "sha256", "files": {%s, "a.bin": "%s"}}}' % (body, b64(b"not it"))

    make_repo(cache, FILES, extra_meta=twice)
    r = verify(cache)
    assert r.returncode != 0 and "metadata.json digest lists a.bin twice" in r.stdout, r.stdout


def test_metadata_json_blob_corrupt_and_large(tmp_path):
    """metadata.json is a git blob: kept from the walk of blobs/ only when its bytes match its
    name. Rewritten in place it is a corrupt blob (and its new list is still checked); one larger
    than what the walk keeps is read again and checked the same way."""
    cache = str(tmp_path / "c")
    repo, vd, _ = make_repo(cache, FILES, listed={"a.bin": FILES["a.bin"]})
    meta = os.path.realpath(os.path.join(vd, "metadata.json"))
    with open(meta, "w") as fh:
        fh.write(json.dumps({"digest": {"algorithm": "sha256", "files": {n: b64(d) for n, d in FILES.items()}}}))
    r = verify(cache)
    assert r.returncode != 0 and f"blobs/{os.path.basename(meta)} content hash is" in r.stdout, r.stdout
    assert "stray file" not in r.stdout and "does not match its metadata.json digest" not in r.stdout, r.stdout

    big = str(tmp_path / "big")
    make_repo(big, FILES, listed={"a.bin": FILES["a.bin"]},
              extra_meta=lambda d: json.dumps({"pad": "x" * 300_000, "digest": {"algorithm": "sha256", "files": d}}))
    r = verify(big)
    assert r.returncode != 0 and "stray file b.bin is not in the metadata.json digest" in r.stdout, r.stdout

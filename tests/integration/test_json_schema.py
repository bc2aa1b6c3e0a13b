"""Every command's --json output, on success and on failure, validated against the published JSON
Schema (docs/json-schema/hubkern-1.json, described in docs/json.md), against a loopback mirror.

Each document must be one JSON object naming the schema version and the command, with the exit
status an error object reports equal to the process's. The schema rejects the old spellings
(repo, hubkern, library, type), "-" for a missing value, and bare arrays, so a command that drifts
from the schema fails here."""
import json
import os
import pathlib
import signal
import subprocess
import time

import jsonschema
import pytest

from faultproxy import Server, hubkern_bin, make_variant, publish, run_cli
from hk_serve_helpers import BUILD_DIR, kernels_built

SCHEMA_PATH = pathlib.Path(__file__).resolve().parents[2] / "docs" / "json-schema" / "hubkern-1.json"
V = "tvm-ffi01-cpu-x86_64-linux"
TOKEN = "hf_schema_token"
RMSNORM = BUILD_DIR / "kernels" / "rmsnorm" / "hub"  # the real CPU kernel (HK_BUILD_KERNELS=ON)


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    base = tmp_path_factory.mktemp("hub")
    store, src = str(base / "store"), str(base / "src")
    make_variant(src, V, {"__init__.py": b"a = 1\n", "_k.so": b"\x7fELF" + b"x" * 4000})
    publish(src, "org/jk", "v1", store)
    with Server(store, ["--trust", "org"]) as srv:
        yield srv


@pytest.fixture(scope="module")
def private_hub(tmp_path_factory):
    """A mirror that wants a token: for the 401 of a wrong --token."""
    base = tmp_path_factory.mktemp("private")
    store, src = str(base / "store"), str(base / "src")
    make_variant(src, V, {"__init__.py": b"a = 1\n"})
    publish(src, "org/jk", "v1", store)
    with Server(store, ["--trust", "org", "--token", TOKEN]) as srv:
        yield srv


def check(validator, args, want_rc, command):
    r = run_cli([*args, "--json"], check=False)
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        pytest.fail(f"{args} --json printed non-JSON on stdout:\n{r.stdout!r}\n{r.stderr}")
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, f"{args}: {errors[0].message} at {list(errors[0].path)}\n{json.dumps(doc, indent=1)[:3000]}"
    assert doc["schema"] == "hubkern/1" and doc["command"] == command, (args, doc["command"])
    assert r.returncode == want_rc, (args, r.returncode, r.stderr)
    if "error" in doc:  # (a report can exit 1 too: cache verify that found problems)
        assert doc["error"]["exit_status"] == r.returncode, (args, doc)
    return doc


def cases(hub, tmp_path):
    cache, store = str(tmp_path / "c"), str(tmp_path / "store")
    H = [f"--endpoint={hub.url}", f"--cache-dir={cache}"]
    lock, src, tar = str(tmp_path / "kernels.lock"), str(tmp_path / "src"), str(tmp_path / "b.tar.gz")
    make_variant(src, V, {"__init__.py": b"b = 1\n"})
    missing = str(tmp_path / "missing")
    # (args, exit status, command); in order: the later ones use what the earlier ones cached
    return [
        (["pull", "org/jk", "--version", "1", "--backend", "cpu", *H], 0, "pull"),
        (["pull", "org/jk", "--version", "1", "--backend", "cpu", "--all-variants", *H], 0, "pull"),
        (["pull", "org/nope", "--version", "1", *H], 1, "pull"),
        (["pull", "org/jk"], 2, "pull"),
        (["pull", "org/jk", "--version", "1", "--backend", "cpu", "--offline", f"--cache-dir={cache}"], 0, "pull"),
        (["versions", "org/jk", *H], 0, "versions"),
        (["versions", "org/nope", *H], 1, "versions"),
        (["info", "org/jk", "--version", "1", "--backend", "cpu", *H], 0, "info"),
        (["info", "org/nope", *H], 1, "info"),
        (["benchmarks", "org/jk", f"--endpoint={hub.url}"], 0, "benchmarks"),
        (["benchmarks", f"--endpoint={hub.url}"], 2, "benchmarks"),
        (["lock", "-o", lock, "org/jk=1", *H], 0, "lock"),
        (["lock", "-o", lock, "org/nope=1", *H], 1, "lock"),
        (["download", "--lock", lock, "--backend", "cpu", *H], 0, "download"),
        (["download", "--lock", missing + ".lock", *H], 1, "download"),
        (["download", "--lock", lock, "--all-variants", "--dry-run", "--include", "*.json", *H], 0, "download"),
        (["download", "--lock", lock, "--backend", "cpu", "--local-dir", str(tmp_path / "ld"), *H], 0, "download"),
        (["download", "--lock", lock, "--all-variants", "--include", "*.nothing", *H], 1, "download"),
        (["load", "--local", missing, "--backend", "cpu"], 1, "load"),
        *([(["load", "--local", str(RMSNORM), "--backend", "cpu", "--call"], 0, "load")] if RMSNORM.is_dir() else []),
        (["verify-signature", "org/jk", "--version", "1", "--all-variants", "--filter-unsigned", *H], 0,
         "verify-signature"),
        (["verify-signature", "org/nope", "--version", "1", *H], 1, "verify-signature"),
        (["cache", "ls", f"--cache-dir={cache}"], 0, "cache ls"),
        (["cache", "verify", f"--cache-dir={cache}"], 0, "cache verify"),
        (["cache", "prune", "--dry-run", f"--cache-dir={cache}"], 0, "cache prune"),
        (["cache", "rm", "org/nope", f"--cache-dir={cache}"], 1, "cache rm"),
        (["cache", "frob"], 2, "cache"),
        (["bundle", "create", tar, "org/jk", f"--cache-dir={cache}"], 0, "bundle create"),
        (["bundle", "list", tar], 0, "bundle list"),
        (["bundle", "extract", tar, f"--cache-dir={tmp_path / 'c2'}"], 0, "bundle extract"),
        (["bundle", "list", missing + ".tar"], 1, "bundle list"),
        (["bundle", "create", str(tmp_path / "b.tar.rar"), "org/jk", f"--cache-dir={cache}"], 2, "bundle create"),
        (["publish", src, "org/pub", "--branch", "v1", f"--cache-dir={store}"], 0, "publish"),
        (["publish", missing, "org/pub", "--branch", "v1", f"--cache-dir={store}"], 1, "publish"),
        (["env", "--no-python"], 0, "env"),
        (["env", "--bogus"], 2, "env"),
        (["variants", src, "--backend", "cpu"], 0, "variants"),
        (["variants", missing], 2, "variants"),
        (["trust-root", "path"], 0, "trust-root path"),
        (["trust-root", "show"], 0, "trust-root show"),
        (["trust-root", "install", missing], 1, "trust-root install"),
        (["trust-root", "frob"], 2, "trust-root"),
        (["version"], 0, "version"),
        (["version", "extra"], 2, "version"),
        (["help"], 0, "help"),
        (["help", "pull"], 0, "help"),
        (["help", "frob"], 2, "hubkern"),
        (["frob"], 2, "hubkern"),
        (["serve", "--port", "99999"], 2, "serve"),
        (["serve", "--cache-dir", missing, "--port", "0", "--host", "256.0.0.1"], 1, "serve"),
    ]


def test_every_command_validates(validator, hub, tmp_path):
    seen = set()
    for args, rc, command in cases(hub, tmp_path):
        doc = check(validator, args, rc, command)
        seen.add((args[0], "error" in doc))
    specs = check(validator, ["help"], 0, "help")["commands"]
    with_json = {c["name"] for c in specs if c["json"]}
    assert {c["name"] for c in specs} == with_json, "every command takes --json"
    # a success and an error case for every command
    # serve's success is test_serve_json_then_stop; load's needs the reference kernels built
    no_success = {"serve"} | (set() if kernels_built() else {"load"})
    assert {n for n, e in seen if not e} >= with_json - no_success, with_json - {n for n, e in seen if not e}
    assert {n for n, e in seen if e} >= with_json, with_json - {n for n, e in seen if e}


def test_serve_json_then_stop(validator, hub, tmp_path):
    """serve --json prints one object once it listens; the URL it names answers."""
    p = subprocess.Popen([hubkern_bin(), "serve", "--cache-dir", str(tmp_path), "--port", "0", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        deadline = time.time() + 20
        while time.time() < deadline:
            line = p.stdout.readline()
            lines.append(line)
            if line.startswith("}"):
                break
        doc = json.loads("".join(lines))
        assert not list(validator.iter_errors(doc)), doc
        assert doc["command"] == "serve" and doc["url"] == f"http://127.0.0.1:{doc['port']}" and doc["port"] > 0
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=20)
    assert p.returncode == 0


def test_wrong_token_names_the_flag(validator, private_hub, tmp_path):
    """A 401 for --token's value says to check --token, not HF_TOKEN (which was not used)."""
    args = ["pull", "org/jk", "--version", "1", "--backend", "cpu", "--token", "wrong",
            f"--endpoint={private_hub.url}", f"--cache-dir={tmp_path}"]
    doc = check(validator, args, 1, "pull")
    assert doc["error"]["code"] == "HK_ERR_AUTH", doc
    assert "--token" in doc["error"]["hint"] and "HF_TOKEN" not in doc["error"]["message"], doc
    r = run_cli(args, check=False, base_env={k: v for k, v in os.environ.items() if k != "HF_TOKEN"})
    assert "check HF_TOKEN" not in r.stderr and "hint: the token given with --token" in r.stderr, r.stderr
    # the same token from HF_TOKEN is named as such
    r = run_cli(args[:6] + args[8:], check=False, base_env={**os.environ, "HF_TOKEN": "wrong"})
    assert r.returncode == 1 and "from HF_TOKEN was rejected" in r.stderr, r.stderr


def test_cache_findings_are_objects(validator, hub, tmp_path):
    cache = str(tmp_path / "c")
    run_cli(["pull", "org/jk", "--version", "1", "--backend", "cpu", f"--endpoint={hub.url}", f"--cache-dir={cache}"])
    blobs = pathlib.Path(cache) / "kernels--org--jk" / "blobs"
    victim = max(blobs.iterdir(), key=lambda p: p.stat().st_size)
    data = bytearray(victim.read_bytes())
    data[0] ^= 1
    victim.write_bytes(bytes(data))
    doc = check(validator, ["cache", "verify", f"--cache-dir={cache}"], 1, "cache verify")
    bad = [f for f in doc["findings"] if f["kind"] == "problem"]
    assert bad and bad[0]["id"] == "kernel/org/jk" and bad[0]["repo_id"] == "org/jk", doc["findings"]
    assert bad[0]["path"] == f"blobs/{victim.name}", bad[0]
    rm = check(validator, ["cache", "rm", "kernel/org/jk", "--dry-run", f"--cache-dir={cache}"], 0, "cache rm")
    assert rm["entries"] and {e["kind"] for e in rm["entries"]} == {"would_remove"}, rm
    assert {e["id"] for e in rm["entries"]} == {"kernel/org/jk"}, rm


def test_cache_findings_carry_the_librarys_fields(validator, hub, tmp_path):
    """The findings' kind, repo and entry come from cache/ as fields (hk_cache_finding), not read
    back from the line: a stray file's entry (its line names no cache path), a ref's, an unused
    blob's for prune, and a repo without an org (model/gpt2) keep their fields."""
    cache = pathlib.Path(tmp_path / "c")
    run_cli(["pull", "org/jk", "--version", "1", "--backend", "cpu", f"--endpoint={hub.url}", f"--cache-dir={cache}"])
    repo = cache / "kernels--org--jk"
    commit = next((repo / "snapshots").iterdir()).name
    (repo / "snapshots" / commit / "build" / V / "stray.txt").write_text("not in the digest\n")
    (repo / "refs" / "broken").write_text("not a commit")
    gpt2 = cache / "models--gpt2"  # a repo id without an org, as huggingface_hub caches it
    body = b"weights\n"
    import hashlib
    name = hashlib.sha256(body).hexdigest()
    (gpt2 / "blobs").mkdir(parents=True)
    (gpt2 / "blobs" / name).write_bytes(body[::-1])  # its name no longer matches its bytes
    (gpt2 / "snapshots" / ("c" * 40)).mkdir(parents=True)
    os.symlink(f"../../blobs/{name}", gpt2 / "snapshots" / ("c" * 40) / "w.bin")
    (gpt2 / "refs").mkdir()
    (gpt2 / "refs" / "main").write_text("c" * 40)
    doc = check(validator, ["cache", "verify", f"--cache-dir={cache}"], 1, "cache verify")
    by_path = {f["path"]: f for f in doc["findings"]}
    stray = by_path[f"snapshots/{commit}/build/{V}/stray.txt"]
    assert stray["kind"] == "problem" and stray["id"] == "kernel/org/jk" and "snapshots/" not in stray["message"]
    ref = by_path["refs/broken"]
    assert ref["kind"] == "problem" and ref["repo_id"] == "org/jk", ref
    model = by_path[f"blobs/{name}"]
    assert model["id"] == "model/gpt2" and model["repo_id"] == "gpt2" and model["kind"] == "problem", model
    for f in doc["findings"]:
        assert f["line"].endswith(f["message"]) and f["id"] in f["line"], f
    (repo / "blobs" / ("f" * 64)).write_bytes(b"no link uses me\n")
    dry = check(validator, ["cache", "prune", "--dry-run", f"--cache-dir={cache}"], 0, "cache prune")
    unused = [e for e in dry["entries"] if e["path"] == "blobs/" + "f" * 64]
    assert unused and unused[0]["kind"] == "would_remove" and unused[0]["id"] == "kernel/org/jk", dry["entries"]
    assert unused[0]["line"] == "would remove kernel/org/jk: unreferenced blob blobs/" + "f" * 64, unused


def test_schema_rejects_the_old_forms(validator):
    """The schema is strict enough to catch drift: the spellings and shapes issue 24 found."""
    ok = {"schema": "hubkern/1", "command": "version", "hubkern_version": "1", "library_version": "1"}
    assert not list(validator.iter_errors(ok))
    bad = [
        {"schema": "hubkern/1", "command": "version", "hubkern": "1", "library": "1"},
        {**ok, "schema": "hubkern/0"},
        {k: v for k, v in ok.items() if k != "command"},
        {"schema": "hubkern/1", "command": "info", "repo_id": "o/n", "endpoint": "e", "offline": False,
         "commit": "0" * 40, "variants": [], "cached": False, "upstream": "-"},
        {"schema": "hubkern/1", "command": "cache ls", "cache": "/c", "repos": [
            {"type": "kernels", "repo_id": "o/n", "path": "/p", "size": 1, "refs": {}, "snapshots": []}]},
        {"schema": "hubkern/1", "command": "cache verify", "cache": "/c", "clean": False, "repos": 1, "blobs": 1,
         "bytes": 1, "snapshots": 1, "refs": 1, "problems": 1, "findings": ["PROBLEM: kernels/o/n: blobs/x ..."]},
        {"schema": "hubkern/1", "command": "pull", "error": {"code": "HK_ERR_X", "message": "m"}},
        {"schema": "hubkern/1", "command": "pull", "repo": "o/n"},
    ]
    for doc in bad:
        assert list(validator.iter_errors(doc)), doc


def test_no_variant_hint_names_only_the_commands_options(validator, hub, tmp_path):
    """download has no --variant, so its no-variant error must not suggest one (issue 24); pull has."""
    cache = str(tmp_path / "c")
    H = [f"--endpoint={hub.url}", f"--cache-dir={cache}"]
    lock = str(tmp_path / "kernels.lock")
    run_cli(["lock", "-o", lock, "org/jk=1", *H])
    doc = check(validator, ["download", "--lock", lock, "--backend", "cuda", *H], 1, "download")
    assert doc["error"]["code"] == "HK_ERR_NO_VARIANT", doc
    assert "--variant" not in doc["error"]["message"] + doc["error"]["hint"], doc
    assert "--backend" in doc["error"]["hint"] and "--all-variants" in doc["error"]["hint"], doc
    doc = check(validator, ["pull", "org/jk", "--version", "1", "--backend", "cuda", *H], 1, "pull")
    assert "--variant V" in doc["error"]["hint"], doc

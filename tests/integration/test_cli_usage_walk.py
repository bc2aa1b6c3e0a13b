"""Usage errors exit 2 in every command (issue 24: a bad argument that only the library could judge,
such as `bundle create x.rar`, a repo id or a revision, exited 1 like a failure).

The walk starts from one valid-looking invocation of each command (BASE: it fails, but not as a
usage error: the endpoint is a closed port, the repo is not cached) and breaks one argument at a
time, from what the command's spec says it takes: the repo id, each option with choices, each
number option, the revision, the endpoint, the bundle's name. Every broken form must exit 2, with
HK_ERR_INVALID_ARG and exit_status 2 under --json, and a new command must get a BASE entry."""
import json
import socket

import pytest

from faultproxy import run_cli


def closed_port_url():
    with socket.socket() as s:  # bound then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture(scope="module")
def walk_env(tmp_path_factory):
    base = tmp_path_factory.mktemp("walk")
    (base / "empty").mkdir()
    (base / "src").mkdir()
    (base / "src" / "README.md").write_text("x\n")
    (base / "proj").mkdir()  # a kernels.lock naming one (uncached) repo: download goes online for it
    (base / "proj" / "kernels.lock").write_text(json.dumps([{"repo_id": "org/x", "sha": "a" * 40, "variants": {}}]))
    cache = base / "cache"
    return base, {"HF_ENDPOINT": closed_port_url(), "KERNELS_CACHE": str(cache), "HF_HUB_CACHE": str(cache),
                  "HF_TOKEN": "", "HUBKERN_VERBOSE": ""}


def base_invocations(d):
    """One invocation per command that gets past argument checking (None: running it would serve)."""
    return {
        "benchmarks": ["benchmarks", "org/x"],
        "bundle": ["bundle", "create", str(d / "b.tar"), "org/x"],
        "cache": ["cache", "verify", "org/x"],
        "download": ["download", str(d / "proj")],
        "env": ["env"],
        "info": ["info", "org/x"],
        "load": ["load", "org/x", "--version", "1"],
        "lock": ["lock", "-o", str(d / "k.lock"), "org/x=1"],
        "publish": ["publish", str(d / "src"), "org/x", "--branch", "main"],
        "pull": ["pull", "org/x", "--version", "1"],
        "serve": None,
        "trust-root": ["trust-root", "show", str(d / "no-such-root.json")],
        "variants": ["variants", str(d / "empty")],
        "verify-signature": ["verify-signature", "org/x", "--version", "1"],
        "version": ["version"],
        "versions": ["versions", "org/x"],
    }


NUMBER_METAVARS = {"N", "BYTES", "SECONDS"}
PATH_METAVARS = {"URL", "DIR", "FILE"}


def broken_forms(spec, base):
    """(what, argv) pairs: base with one argument made invalid, as the spec describes the options."""
    name = spec["name"]
    base = base or [name]
    out = [("unknown option", base + ["--bogus-option"])]
    if "org/x" in base:
        out.append(("repo id", [a if a != "org/x" else "not a repo!" for a in base]))
    for o in spec["options"]:
        flag = "--" + o["name"]
        # empty where it can mean nothing: a path or URL (not "the default"), a choice, a number
        if o["kind"] in ("value", "list") and (o.get("metavar") in PATH_METAVARS | NUMBER_METAVARS or o.get("choices")):
            out.append((f"empty {flag}", base + [f"{flag}="]))
        if o.get("choices"):
            out.append((f"{flag} outside its choices", base + [f"{flag}=no-such-choice"]))
        if o.get("metavar") in NUMBER_METAVARS:
            rest = base
            if flag in rest:  # --version 1 in the base: replace it rather than repeat it
                i = rest.index(flag)
                rest = rest[:i] + rest[i + 2:]
            out.append((f"{flag} not a number", rest + [f"{flag}=x"]))
        if o["name"] == "revision" and "org/x" in base:
            rest = [a for i, a in enumerate(base) if a != "--version" and (i == 0 or base[i - 1] != "--version")]
            out.append(("revision", rest + ["--revision=a..b"]))
        if o["name"] == "endpoint" and base != [name]:
            out.append(("endpoint scheme", base + ["--endpoint=ftp://mirror"]))
    if name == "bundle":
        out.append(("archive kind", ["bundle", "create", base[2].replace(".tar", ".rar"), "org/x"]))
        out.append(("archive kind, tar-like", ["bundle", "create", base[2] + ".rar", "org/x"]))
    return out


def test_every_commands_usage_errors_exit_2(walk_env):
    d, env = walk_env
    specs = json.loads(run_cli(["help", "--all-json"]).stdout)["commands"]
    bases = base_invocations(d)
    assert {s["name"] for s in specs} == set(bases), "give each command a BASE invocation"
    checked = 0
    for spec in specs:
        base = bases[spec["name"]]
        if base is not None:
            r = run_cli(base, env=env, check=False, timeout=60)
            assert r.returncode != 2, ("the base is itself a usage error", base, r.stderr)
        for what, argv in broken_forms(spec, base):
            r = run_cli(argv, env=env, check=False, timeout=60)
            assert r.returncode == 2, (what, argv, r.returncode, r.stderr)
            assert r.stderr.strip() and "try 'hubkern" in r.stderr, (what, argv, r.stderr)
            if spec["json"]:
                j = run_cli(argv + ["--json"], env=env, check=False, timeout=60)
                assert j.returncode == 2, (what, argv, j.returncode, j.stderr)
                err = json.loads(j.stdout)["error"]
                assert err["code"] == "HK_ERR_INVALID_ARG" and err["exit_status"] == 2, (what, argv, err)
            checked += 1
    assert checked > 100


def test_bundle_of_an_unwritable_kind_names_the_kinds(walk_env):
    d, env = walk_env
    out = d / "x.rar"
    r = run_cli(["bundle", "create", str(out), "org/x"], env=env, check=False)
    assert r.returncode == 2 and not out.exists(), r.stderr
    first = r.stderr.splitlines()[0]
    assert "cannot write that kind of archive" in first, first
    for kind in (".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.bz2", ".tar.xz"):
        assert kind + "," in first or kind + " " in first, (kind, first)

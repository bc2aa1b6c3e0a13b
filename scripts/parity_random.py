#!/usr/bin/env python3
"""Random differential of hubkern against kernels 0.17.2 (the real package from PyPI), issue 26.

From a seed, generate cases: a random dependency tree (depth 1-4, fan-out 1-4, diamonds, back
edges, missing and untrusted repos, dependencies by branch or commit, odd branch names), random
malformed metadata.json on one of its nodes, and a project (pyproject.toml in one of several TOML
forms) that depends on its root. Every repo of every case is published into one store and served
by one `hubkern serve` on loopback. Each case then goes through four phases, on both sides:

  tree      kernels resolve_kernel_tree(backend cpu)       | hubkern info --backend cpu --json
  lock      kernels' `kernels lock` (lock_kernels)           | hubkern lock DIR
  download  kernels' `kernels download` of kernels' lock     | hubkern download DIR (same lock)
  load      kernels get_kernel(version, backend cpu)         | hubkern load --backend cpu

and the outcome class is compared: accept/refuse, the (repo, commit, variant) set of a tree, the
lock bytes, and the files each download or load put in its cache. kernels runs in-process (one
worker per phase, each with its own cache; the cases share no repo, so one cache serves them all),
hubkern as the CLI. Differences that docs/loading.md lists as deliberate are generated only with
--documented and then counted apart (by the case's features); any other difference is a finding.

  python3 scripts/parity_random.py --seed 26 --cases 400 [--documented] [--json OUT]

Exit status 0 when no unexpected difference was found, 1 otherwise."""

import argparse
import json
import os
import pathlib
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "integration"))
from hk_serve_helpers import Server, hubkern_bin, publish  # noqa: E402

ORG, UNTRUSTED = "hubkern-rd", "rd-stranger"
PHASES = ("tree", "lock", "download", "load")

# ---- generation ------------------------------------------------------------------------------

# metadata.json mutations: name -> function(dict) -> dict or bytes. Features tagged "doc:" are
# deliberate differences (docs/loading.md) and are generated only with --documented.
MUTATIONS = {
    "btype-npu": lambda d: {**d, "backend": {"type": "npu"}},
    "btype-upper": lambda d: {**d, "backend": {"type": "CPU"}},
    "btype-tpu": lambda d: {**d, "backend": {"type": "tpu"}},
    "no-backend": lambda d: {k: v for k, v in d.items() if k != "backend"},
    "no-python-depends": lambda d: {k: v for k, v in d.items() if k != "python-depends"},
    "python-depends-null": lambda d: {**d, "python-depends": None},
    "python-depends-str": lambda d: {**d, "python-depends": "torch"},
    "no-kernel-depends": lambda d: {k: v for k, v in d.items() if k != "kernel-depends"},
    "kernel-depends-null": lambda d: {**d, "kernel-depends": None},
    "dep-extra-key": lambda d: {**d, "kernel-depends": [{**x, "hash": "x"} for x in d["kernel-depends"]]
                                or [{"repo-id": f"{ORG}/nowhere", "version": 1, "hash": "x"}]},
    "dep-float-version": lambda d: {**d, "kernel-depends": [{**x, "version": 1.0} if "version" in x else x
                                                            for x in d["kernel-depends"]]},
    "dep-no-repo": lambda d: {**d, "kernel-depends": [{"version": 1}]},
    "dep-both": lambda d: {**d, "kernel-depends": [{"repo-id": f"{ORG}/nowhere", "version": 1, "revision": "main"}]},
    "dep-neither": lambda d: {**d, "kernel-depends": [{"repo-id": f"{ORG}/nowhere"}]},
    "dep-version-str": lambda d: {**d, "kernel-depends": [{"repo-id": f"{ORG}/nowhere", "version": "1"}]},
    "dep-version-neg": lambda d: {**d, "kernel-depends": [{"repo-id": f"{ORG}/nowhere", "version": -1}]},
    "version-float": lambda d: {**d, "version": 1.0},
    "version-str": lambda d: {**d, "version": "1"},
    "no-version": lambda d: {k: v for k, v in d.items() if k != "version"},
    "no-name": lambda d: {k: v for k, v in d.items() if k != "name"},
    "no-id": lambda d: {k: v for k, v in d.items() if k != "id"},
    "no-license": lambda d: {k: v for k, v in d.items() if k != "license"},
    "name-one-letter": lambda d: {**d, "name": "r"},
    "name-underscore": lambda d: {**d, "name": "a_b"},
    "name-upper": lambda d: {**d, "name": "Ab"},
    "minver-two": lambda d: {**d, "kernels-minver": "0.17"},
    "minver-four": lambda d: {**d, "kernels-minver": "0.17.2.1"},
    "minver-rc": lambda d: {**d, "kernels-minver": "0.17.2rc1"},
    "minver-old": lambda d: {**d, "kernels-minver": "0.1.0"},
    "minver-same": lambda d: {**d, "kernels-minver": "0.17.2"},
    "minver-new": lambda d: {**d, "kernels-minver": "0.99.0"},
    "minver-null": lambda d: {**d, "kernels-minver": None},
    "minver-int": lambda d: {**d, "kernels-minver": 17},
    "extra-top": lambda d: {**d, "whatever": {"version": 1.5}},
    "archs-empty": lambda d: {**d, "backend": {"type": "cpu", "archs": []}},
    "not-json": lambda d: b"{not json",
    "empty-file": lambda d: b"",
    "json-array": lambda d: b"[]",
    "doc:id-path": lambda d: {**d, "id": "../x"},
    "doc:version-huge": lambda d: {**d, "version": 2 ** 40},
}
# kernel-depends entries a node may declare besides its tree children
SPECIAL_DEPS = ("missing", "untrusted", "novariant", "back-edge", "missing-version", "by-branch", "by-commit",
                "doc:odd-branch", "duplicate")
# Python int() reads 10 and 1 (v+3 would be 3, but no store takes that branch name); hubkern's
# versions are `v` + digits
ODD_BRANCHES = {"v1_0": 10, "v01": 1}


TOML_FORMS = ("table", "inline", "literal", "dotted", "top-dotted", "crlf", "comments", "plus", "hex", "underscore",
              "str-version", "inline-version", "no-table", "empty-table", "doc:bool")


def toml_project(rng, deps, documented):
    """pyproject.toml text depending on deps ({repo: version}) in one of the TOML forms, and its features."""
    forms = [f for f in TOML_FORMS if documented or not f.startswith("doc:")]
    form = rng.choice(forms[:9] if rng.random() < 0.7 else forms)  # mostly forms that lock
    head = '[project]\nname = "demo"\nversion = "0.1"\n\n'

    def val(v):
        return {"plus": f"+{v}", "hex": hex(v), "underscore": f"{v}_0" if v < 10 else str(v),
                "str-version": f'"{v}"', "inline-version": f"{{ version = {v} }}",
                "doc:bool": "true" if v == 1 else str(v)}.get(form, str(v))

    items = list(deps.items())
    if form == "inline":
        body = head + "[tool.kernels]\ndependencies = { " + ", ".join(f'"{k}" = {val(v)}' for k, v in items) + " }\n"
    elif form == "literal":
        body = head + "[tool.kernels.dependencies]\n" + "".join(f"'{k}' = {val(v)}\n" for k, v in items)
    elif form == "dotted":
        body = head + "[tool]\n" + "".join(f'kernels.dependencies."{k}" = {val(v)}\n' for k, v in items)
    elif form == "top-dotted":
        body = "".join(f'tool.kernels.dependencies."{k}" = {val(v)}\n' for k, v in items) + "\n" + head
    elif form == "comments":
        body = head + "[tool.kernels.dependencies] # pinned\n" + "".join(
            f'  "{k}"\t=  {val(v)}   # why\n\n' for k, v in items)
    elif form == "no-table":
        body = head + "[tool.kernels]\nother = 1\n"
    elif form == "empty-table":
        body = head + "[tool.kernels.dependencies]\n"
    else:
        body = head + "[tool.kernels.dependencies]\n" + "".join(f'"{k}" = {val(v)}\n' for k, v in items)
    if form == "crlf":
        body = body.replace("\n", "\r\n")
    return body, form


def metadata(name, deps):
    return {"name": name, "id": f"_{name.replace('-', '_')}_cpu_abc1234", "version": 1, "license": "MIT",
            "python-depends": [], "backend": {"type": "cpu"}, "kernel-depends": deps}


def gen_case(rng, i, documented):
    """One case: repos {repo: {branch: {path: bytes}}}, the root, the project text, its features."""
    pfx = f"c{i}"
    feats = set()
    depth, fan = rng.randint(1, 4), rng.randint(1, 4)
    nodes = []  # (name, level, parent index)
    edges = {}  # node index -> list of kernel-depends entries

    def new_node(level, parent):
        nodes.append((f"{pfx}-n{len(nodes)}", level, parent))
        edges[len(nodes) - 1] = []
        return len(nodes) - 1

    def ancestors(k):
        out = []
        while k is not None:
            out.append(k)
            k = nodes[k][2]
        return out

    repos = {}
    root = new_node(0, None)
    queue = [root]
    specials = [s for s in SPECIAL_DEPS if documented or not s.startswith("doc:")]
    while queue:
        k = queue.pop(0)
        level = nodes[k][1]
        if level >= depth or len(nodes) >= 12:
            continue
        for _ in range(rng.randint(1 if k == root else 0, fan)):
            roll = rng.random()
            if roll < 0.75 or len(nodes) < 2:
                c = new_node(level + 1, k)
                edges[k].append({"repo-id": f"{ORG}/{nodes[c][0]}", "version": 1})
                queue.append(c)
            elif roll < 0.9:  # a diamond: an existing node that is not an ancestor
                cands = [j for j in range(len(nodes)) if j not in ancestors(k)]
                if cands:
                    j = rng.choice(cands)
                    edges[k].append({"repo-id": f"{ORG}/{nodes[j][0]}", "version": 1})
                    feats.add("diamond")
            else:
                s = rng.choice(specials)
                feats.add(s)
                if s == "missing":
                    edges[k].append({"repo-id": f"{ORG}/{pfx}-gone", "version": 1})
                elif s == "untrusted":
                    edges[k].append({"repo-id": f"{UNTRUSTED}/{pfx}-x", "version": 1})
                    repos.setdefault(f"{UNTRUSTED}/{pfx}-x", {})["v1"] = cpu_files(metadata("x-" + pfx, []))
                elif s == "novariant":
                    r = f"{ORG}/{pfx}-rocm"  # fits neither backend cpu nor a CUDA machine
                    edges[k].append({"repo-id": r, "version": 1})
                    repos.setdefault(r, {})["v1"] = {"build/torch-rocm/metadata.json": json.dumps(
                        {**metadata("ro-" + pfx, []), "backend": {"type": "rocm"}}).encode(),
                        "build/torch-rocm/__init__.py": b"X = 1\n"}
                elif s == "back-edge":
                    a = rng.choice(ancestors(k))
                    edges[k].append({"repo-id": f"{ORG}/{nodes[a][0]}", "version": 1})
                elif s == "missing-version":
                    c = new_node(level + 1, k)
                    edges[k].append({"repo-id": f"{ORG}/{nodes[c][0]}", "version": 7})
                elif s == "by-branch":
                    c = new_node(level + 1, k)
                    br = rng.choice(["main", "release", "dev-1"])
                    edges[k].append({"repo-id": f"{ORG}/{nodes[c][0]}", "revision": br})
                    repos.setdefault(f"{ORG}/{nodes[c][0]}", {})[br] = None  # same files as v1
                    queue.append(c)
                    feats.add("doc:lock-branch")
                elif s == "by-commit":
                    c = new_node(level + 1, k)
                    edges[k].append({"repo-id": f"{ORG}/{nodes[c][0]}", "revision": "COMMIT"})
                    queue.append(c)
                elif s == "doc:odd-branch":
                    c = new_node(level + 1, k)
                    br = rng.choice(sorted(ODD_BRANCHES))
                    ver = ODD_BRANCHES[br]
                    feats.add("branch-" + br)
                    edges[k].append({"repo-id": f"{ORG}/{nodes[c][0]}", "version": ver})
                    repos.setdefault(f"{ORG}/{nodes[c][0]}", {})[br] = None
                    repos[f"{ORG}/{nodes[c][0]}"]["-no-v1"] = True
                    queue.append(c)
                elif s == "duplicate" and edges[k]:
                    edges[k].append(dict(edges[k][0]))
    mutated = None
    muts = [m for m in MUTATIONS if documented or not m.startswith("doc:")]
    if rng.random() < 0.35:
        mutated = rng.randrange(len(nodes))
        m = rng.choice(muts)
        feats.add(m)
    for k, (name, _, _) in enumerate(nodes):
        md = metadata(name, edges[k])
        files = cpu_files(md)
        if k == mutated:
            out = MUTATIONS[m](md)
            raw = out if isinstance(out, bytes) else json.dumps(out).encode()
            files["build/torch-cpu/metadata.json"] = files["build/torch-cuda/metadata.json"] = raw
        if rng.random() < 0.1:
            files["build/docs/README.md"] = b"# docs\n"
            feats.add("non-variant-dir")
        if rng.random() < 0.05:
            del files["build/torch-cpu/metadata.json"], files["build/torch-cuda/metadata.json"]
            feats.add("no-metadata")
        r = f"{ORG}/{name}"
        branches = repos.setdefault(r, {})
        skip_v1 = branches.pop("-no-v1", False)
        for br in list(branches):
            if branches[br] is None:
                branches[br] = files
        if not skip_v1:
            branches["v1"] = files
    proj, form = toml_project(rng, {f"{ORG}/{nodes[root][0]}": 1}, documented)
    feats.add("toml:" + form)
    if form == "doc:bool":
        feats.add("doc:bool")
    return {"id": pfx, "root": f"{ORG}/{nodes[root][0]}", "repos": repos, "project": proj,
            "features": sorted(feats)}


def cpu_files(md):
    """A torch-cpu variant (the tree and load phases ask for backend cpu) and a torch-cuda one with
    the same kernel-depends (a download takes the variant of the machine both tools detect)."""
    cuda = {**md, "id": md["id"].replace("_cpu_", "_cuda_"), "backend": {"type": "cuda"}}
    return {"build/torch-cpu/metadata.json": json.dumps(md).encode(), "build/torch-cpu/__init__.py": b"X = 1\n",
            "build/torch-cuda/metadata.json": json.dumps(cuda).encode(), "build/torch-cuda/__init__.py": b"X = 1\n"}


def publish_case(case, tmp, store):
    """Publish every repo of the case; a by-commit dependency gets the commit of its v1."""
    commits = {}
    order = sorted(case["repos"].items(), key=lambda kv: any(b"COMMIT" in f for br in kv[1].values()
                                                             for f in br.values()))
    pending = []
    for repo, branches in order:
        for br, files in branches.items():
            if any(b'"COMMIT"' in v for v in files.values()):
                pending.append((repo, br, files))
                continue
            commits[(repo, br)] = put(tmp, store, repo, br, files)
    for _ in range(len(pending) + 1):  # commits of dependencies first, whatever the order
        left = []
        for repo, br, files in pending:
            try:
                filled = dict(files)
                for rel in [r for r in files if r.endswith("/metadata.json") and b'"COMMIT"' in files[r]]:
                    md = json.loads(files[rel])
                    for d in md.get("kernel-depends") or []:
                        if isinstance(d, dict) and d.get("revision") == "COMMIT":
                            c = commits.get((d["repo-id"], "v1"))
                            if c is None:
                                raise KeyError(d["repo-id"])
                            d["revision"] = c
                    filled[rel] = json.dumps(md).encode()
                files = filled
            except KeyError:
                left.append((repo, br, files))
                continue
            commits[(repo, br)] = put(tmp, store, repo, br, files)
        pending = left
        if not pending:
            break
    for repo, br, files in pending:  # a cycle through commits cannot be published: plain
        commits[(repo, br)] = put(tmp, store, repo, br, files)
    return commits


def put(tmp, store, repo, branch, files):
    src = tmp / "src" / repo.replace("/", "--") / branch.replace("/", "_").replace(" ", "_")
    for rel, data in files.items():
        p = src / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return publish(src, repo, branch, store)


# ---- running ---------------------------------------------------------------------------------

WORKER = r"""
import argparse, json, pathlib, sys, io, contextlib
from kernels._rust import KernelDependency, KernelVersion
from kernels.deps import resolve_kernel_tree
from kernels.hf_hub import _get_hf_api
from kernels.resolver import HubResolver
phase, cases = sys.argv[1], json.loads(open(sys.argv[2]).read())
out = {}
api = _get_hf_api()
def walk(n, acc):
    loc = n.location
    acc.append([loc.repo_id, loc.revision, loc.variant_str])
    for d in n.deps.values():
        walk(d, acc)
for c in cases:
    try:
        if phase == "tree":
            t = resolve_kernel_tree(api, KernelDependency(c["root"], KernelVersion.Version(1)), "cpu",
                                    HubResolver(trust_remote_code=False))
            acc = []
            walk(t, acc)
            out[c["id"]] = {"ok": sorted(map(tuple, acc))}
        elif phase == "lock":
            from kernels.cli.lock import lock_kernels
            lock_kernels(argparse.Namespace(project_dir=pathlib.Path(c["dir"])))
            out[c["id"]] = {"ok": True}
        elif phase == "download":
            from kernels.cli.download import download_kernels
            with contextlib.redirect_stderr(io.StringIO()):
                download_kernels(argparse.Namespace(project_dir=pathlib.Path(c["dir"]), all_variants=False))
            out[c["id"]] = {"ok": True}
        elif phase == "load":
            from kernels import get_kernel
            get_kernel(c["root"], version=1, backend="cpu")
            out[c["id"]] = {"ok": True}
    except SystemExit as e:
        out[c["id"]] = {"error": f"exit {e.code}"}
    except BaseException as e:
        out[c["id"]] = {"error": type(e).__name__ + ": " + str(e)[:300]}
print(json.dumps(out))
"""


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "KERNELS_", "LOCAL_KERNELS"))}
    env.pop("DO_NOT_TRACK", None)
    env.pop("DISABLE_TELEMETRY", None)
    env.update(HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_PROGRESS_BARS="1", **extra)
    return env


def cache_files(home, pfx):
    """The snapshot files of the case's repos (kernels--ORG--<pfx>-...) in the cache at home."""
    root = home / "hub"
    if not root.exists():
        return []
    return sorted(str(p.relative_to(root)) for top in root.iterdir() if top.name.split("--")[-1].startswith(pfx + "-")
                  for p in top.rglob("*") if (p.is_file() or p.is_symlink()) and "/snapshots/" in str(p))


def start_kernels(phase, cases, tmp, url):
    """A kernels worker for one phase, running (the phases without a dependency run side by side)."""
    spec = tmp / f"cases-{phase}.json"
    spec.write_text(json.dumps(cases))
    out = open(tmp / f"worker-{phase}.out", "w+")
    p = subprocess.Popen([sys.executable, "-c", WORKER, phase, str(spec)], stdout=out, stderr=subprocess.PIPE,
                         text=True, env=clean_env(HF_ENDPOINT=url, HF_HOME=str(tmp / f"py-{phase}")))
    return p, out, phase


def join_kernels(w):
    p, out, phase = w
    _, err = p.communicate(timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(f"kernels worker ({phase}) failed: {err[-2000:]}")
    out.seek(0)
    text = out.read()
    out.close()
    return json.loads(text.strip().splitlines()[-1])


def run_kernels(phase, cases, tmp, url):
    return join_kernels(start_kernels(phase, cases, tmp, url))


def hk(tmp, url, phase, *args):
    return subprocess.run([hubkern_bin(), *map(str, args)], capture_output=True, text=True, timeout=300,
                          env=clean_env(HF_ENDPOINT=url, HF_HOME=str(tmp / f"hk-{phase}")))


def run(seed, n, documented, tmp, log=print):
    rng = random.Random(seed)
    cases = [gen_case(rng, i, documented) for i in range(n)]
    # the store on tmpfs when there is one: `hubkern publish` syncs the file system it writes to
    shm = pathlib.Path("/dev/shm")
    store = pathlib.Path(tempfile.mkdtemp(prefix="parity-store-", dir=shm)) if shm.is_dir() else tmp / "store"
    t0 = time.time()
    commits = {}
    for c in cases:
        commits.update(publish_case(c, tmp, store))
    srv = Server(store, "--trust", ORG)
    results = {c["id"]: {} for c in cases}
    try:
        url = srv.url
        for side in ("py", "hk"):  # each side its own copy of the project
            for c in cases:
                d = tmp / "proj" / side / c["id"]
                d.mkdir(parents=True, exist_ok=True)
                (d / "pyproject.toml").write_bytes(c["project"].encode())
        roots = [{"id": c["id"], "root": c["root"]} for c in cases]
        w_tree = start_kernels("tree", roots, tmp, url)
        w_lock = start_kernels("lock", [{"id": c["id"], "dir": str(tmp / "proj" / "py" / c["id"])} for c in cases],
                               tmp, url)
        w_load = start_kernels("load", roots, tmp, url)
        # tree
        py = join_kernels(w_tree)
        for c in cases:
            q = hk(tmp, url, "tree", "info", c["root"], "--version", "1", "--backend", "cpu", "--json")
            got = json.loads(q.stdout) if q.stdout.strip() else {"error": q.stderr}
            if q.returncode != 0 or "error" in got or got.get("dependency_tree_error"):
                h = {"error": got.get("dependency_tree_error") or str(got.get("error"))}
            else:
                h = {"ok": sorted((x["repo_id"], x["commit"], x["variant"]) for x in got["dependency_tree"])}
            w = py[c["id"]]
            if "ok" in w:  # kernels keeps a branch dependency's revision as the branch name
                w = {"ok": sorted((r, commits.get((r, rev), rev), v) for r, rev, v in w["ok"])}
            results[c["id"]]["tree"] = (outcome(w), outcome(h), w, h)
        # lock
        py = join_kernels(w_lock)
        locks = {}
        for c in cases:
            pl = tmp / "proj" / "py" / c["id"] / "kernels.lock"
            want = pl.read_bytes() if "ok" in py[c["id"]] and pl.exists() else None
            q = hk(tmp, url, "lock", "lock", tmp / "proj" / "hk" / c["id"])
            hl = tmp / "proj" / "hk" / c["id"] / "kernels.lock"
            got = hl.read_bytes() if q.returncode == 0 and hl.exists() else None
            locks[c["id"]] = want
            w = {"ok": want.decode()} if want is not None else {"error": py[c["id"]].get("error")}
            h = {"ok": got.decode()} if got is not None else {"error": q.stderr[-300:]}
            results[c["id"]]["lock"] = (outcome(w), outcome(h), w, h)
        # download: the lock kernels wrote, in both project copies
        dl = [c for c in cases if locks[c["id"]] is not None]
        for side in ("py", "hk"):
            for c in dl:
                d = tmp / "dl" / side / c["id"]
                d.mkdir(parents=True, exist_ok=True)
                (d / "pyproject.toml").write_bytes(c["project"].encode())
                (d / "kernels.lock").write_bytes(locks[c["id"]])
        py = run_kernels("download", [{"id": c["id"], "dir": str(tmp / "dl" / "py" / c["id"])} for c in dl], tmp, url)
        for c in dl:
            q = hk(tmp, url, "download", "download", tmp / "dl" / "hk" / c["id"])
            w = {"ok" if "ok" in py[c["id"]] else "error": cache_files(tmp / "py-download", c["id"])}
            h = {"ok" if q.returncode == 0 else "error": cache_files(tmp / "hk-download", c["id"])}
            results[c["id"]]["download"] = (outcome(w), outcome(h), w, h)
        # load
        py = join_kernels(w_load)
        for c in cases:
            q = hk(tmp, url, "load", "load", c["root"], "--version", "1", "--backend", "cpu")
            w = {"ok" if "ok" in py[c["id"]] else "error": cache_files(tmp / "py-load", c["id"])}
            h = {"ok" if q.returncode == 0 else "error": cache_files(tmp / "hk-load", c["id"])}
            w["why"], h["why"] = py[c["id"]].get("error"), q.stderr[-300:]
            results[c["id"]]["load"] = (outcome(w), outcome(h), w, h)
    finally:
        srv.stop()
        if store.parent == shm:
            shutil.rmtree(store, ignore_errors=True)
    return cases, results, time.time() - t0


def outcome(r):
    """The comparable class: accept/refuse and what was produced (why is not compared)."""
    return json.dumps({k: v for k, v in r.items() if k not in ("why",)} if "ok" in r else
                      {"refused": r.get("error") if isinstance(r.get("error"), list) else True}, sort_keys=True)


# the phases where a deliberate difference shows (docs/loading.md, "Where hubkern differs")
DOC_PHASES = {"doc:lock-branch": {"lock"}}


def documented_in(feats, phase):
    return any(f.startswith("doc:") and phase in DOC_PHASES.get(f, PHASES) for f in feats)


def summarize(cases, results):
    feats = {c["id"]: c["features"] for c in cases}
    rows, unexpected = [], []
    for ph in PHASES:
        n = agree = doc = 0
        for cid, r in results.items():
            if ph not in r:
                continue
            n += 1
            a, b, w, h = r[ph]
            if a == b:
                agree += 1
            elif documented_in(feats[cid], ph):
                doc += 1
            else:
                unexpected.append((cid, ph, feats[cid], w, h))
        rows.append((ph, n, agree, doc, n - agree - doc))
    return rows, unexpected


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--documented", action="store_true", help="also generate the deliberate differences")
    ap.add_argument("--json", help="write every case's outcome here")
    ap.add_argument("--keep", help="work directory to keep (default: a temporary one)")
    a = ap.parse_args()
    tmp = pathlib.Path(a.keep) if a.keep else pathlib.Path(tempfile.mkdtemp(prefix="parity-random-"))
    tmp.mkdir(parents=True, exist_ok=True)
    cases, results, secs = run(a.seed, a.cases, a.documented, tmp)
    rows, unexpected = summarize(cases, results)
    print(f"seed {a.seed}, {a.cases} cases, documented differences {'on' if a.documented else 'off'}, "
          f"{secs:.0f} s, kernels 0.17.2 vs {hubkern_bin()}")
    print("| phase | cases | same outcome | deliberate difference | unexpected difference |")
    print("|---|---|---|---|---|")
    for ph, n, agree, doc, bad in rows:
        print(f"| {ph} | {n} | {agree} | {doc} | {bad} |")
    feats = {}
    for c in cases:
        for f in c["features"]:
            feats[f] = feats.get(f, 0) + 1
    print("features generated: " + ", ".join(f"{k} {v}" for k, v in sorted(feats.items())))
    for cid, ph, f, w, h in unexpected:
        print(f"DIFF {cid} {ph} {f}\n  kernels: {json.dumps(w)[:600]}\n  hubkern: {json.dumps(h)[:600]}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps({"seed": a.seed, "cases": cases, "results": results},
                                                   default=lambda o: o.decode(errors="replace")))
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())

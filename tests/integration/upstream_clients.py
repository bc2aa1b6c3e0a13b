"""A wave of Python clients against a mirror, for test_serve_upstream.py and bench/tier_bench.py.

    python3 upstream_clients.py KIND N REPO OUTDIR      (HF_ENDPOINT names the mirror)

KIND is `hf` (huggingface_hub.snapshot_download at branch v1) or `kernels` (kernels.install_kernel,
version 1, backend cpu: the trust check, refs, then the variant). N threads start together (a
barrier); `hf` threads each use their own cache OUTDIR/hf-i, `kernels` threads share OUTDIR/kernels
(kernels reads its cache location once; huggingface_hub's file locks coordinate the threads). Prints one JSON line: {"ok": [...paths], "errors": [...]}.
"""
import json
import os
import sys
import threading


def main():
    kind, n, repo, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    barrier = threading.Barrier(n)
    ok, errors, lock = [], [], threading.Lock()
    if kind == "kernels":
        os.environ["HF_HUB_CACHE"] = os.path.join(out, "kernels")
        import kernels  # noqa: F401  (imported once, before the threads)
    from huggingface_hub import snapshot_download

    def one(i):
        cache = os.path.join(out, f"{kind}-{i}")
        barrier.wait()
        try:
            if kind == "hf":
                p = snapshot_download(repo, repo_type="kernel", revision="v1", cache_dir=cache)
            else:
                import kernels
                p = str(kernels.install_kernel(repo, version=1, backend="cpu"))
            with lock:
                ok.append(p)
        except Exception as e:  # reported, the test decides
            with lock:
                cause = e.__cause__ or e.__context__
                errors.append(f"{type(e).__name__}: {e}" + (f" (from {type(cause).__name__}: {cause})" if cause else ""))

    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(json.dumps({"ok": ok, "errors": errors}))


if __name__ == "__main__":
    main()

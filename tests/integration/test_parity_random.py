"""The random differential against kernels 0.17.2 (scripts/parity_random.py) at CI size: a fixed
seed, 20 cases, every phase (tree, lock, download, load) compared; no difference but the
deliberate ones (docs/loading.md) may show. The recorded larger runs are in
scripts/parity_random.md."""

import pathlib
import shutil
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
import parity_random  # noqa: E402


def test_random_differential_small(tmp_path):
    shm = pathlib.Path("/dev/shm")
    work = pathlib.Path(tempfile.mkdtemp(dir=shm)) if shm.is_dir() else tmp_path
    try:
        cases, results, _ = parity_random.run(2026, 20, False, work)
    finally:
        if work != tmp_path:
            shutil.rmtree(work, ignore_errors=True)
    rows, unexpected = parity_random.summarize(cases, results)
    assert not unexpected, "\n".join(f"{c} {ph} {f}\n  kernels: {w}\n  hubkern: {h}" for c, ph, f, w, h in unexpected)
    counts = {ph: n for ph, n, *_ in rows}
    # the corpus reaches every phase: some projects lock, so some downloads are compared
    assert counts["tree"] == counts["lock"] == counts["load"] == 20 and counts["download"] >= 3, rows
    # and some of those downloads complete (files in the cache), not only refusals
    done = [c for c, r in results.items() if "download" in r and "ok" in r["download"][2] and r["download"][2]["ok"]]
    assert len(done) >= 2, rows

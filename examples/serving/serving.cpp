// A serving-style program over hubkern.hpp: load a kernel once at start-up, call it from several
// worker threads, and pick up a kernel update (a new commit on the version's branch) without a
// restart. A watcher asks the Hub every --poll-ms which commit the branch is at (hk_get_kernel: a
// repeat for the loaded commit returns the loaded handle, a new commit is pulled, verified and
// loaded); a new handle is swapped in atomically, and calls already running finish on the handle
// they started with, which is unloaded when the last of them lets go of it.
//
//   c++ -std=c++17 serving.cpp $(pkg-config --cflags --libs hubkern) -pthread
//       -Wl,-rpath,$(pkg-config --variable=libdir hubkern) -o hk-serving     (one line)
//   ./hk-serving --repo kernels-community/rmsnorm --version 1 [--threads 4] [--poll-ms 1000]
//
// It serves until stdin is closed, printing "loaded COMMIT" at start and "reloaded OLD -> NEW" on
// each update, then a summary: calls per commit, failed calls, wrong results. Each call is RMSNorm
// on a fixed input, checked against a float64 reference. Exit status 0 when every call succeeded
// and was right, 1 otherwise, 2 for a usage error.
#include <hubkern.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

// The kernel in use: readers copy the shared_ptr (std::atomic_load), the watcher replaces it
// (std::atomic_store); a copy held by a running call keeps the old handle alive until it returns.
class kernel_slot {
  public:
    explicit kernel_slot(hubkern::kernel k) : cur_(std::make_shared<const hubkern::kernel>(std::move(k))) {}
    std::shared_ptr<const hubkern::kernel> get() const { return std::atomic_load(&cur_); }
    void swap_in(hubkern::kernel k) { std::atomic_store(&cur_, std::make_shared<const hubkern::kernel>(std::move(k))); }

  private:
    std::shared_ptr<const hubkern::kernel> cur_;
};

struct tally {
    std::mutex mu;
    std::map<std::string, long> calls_per_commit;
    long failed = 0, wrong = 0, finished_on_replaced = 0;
    std::string first_error;
};

constexpr long kRows = 8, kHidden = 256;
constexpr double kEps = 1e-6;

void reference(std::vector<double> &out, const std::vector<float> &x, const std::vector<float> &w) {
    for (long r = 0; r < kRows; r++) {
        double ss = 0;
        for (long i = 0; i < kHidden; i++) ss += double(x[r * kHidden + i]) * x[r * kHidden + i];
        double inv = 1.0 / std::sqrt(ss / kHidden + kEps);
        for (long i = 0; i < kHidden; i++) out[r * kHidden + i] = x[r * kHidden + i] * inv * w[i];
    }
}

void worker(const kernel_slot &slot, const std::atomic<bool> &stop, tally &t, const std::vector<float> &x,
            const std::vector<float> &w, const std::vector<double> &want) {
    std::vector<float> xs = x, ws = w, out(x.size());
    hubkern::tensor tx(xs.data(), {kRows, kHidden}), tw(ws.data(), {kHidden}), tout(out.data(), {kRows, kHidden});
    while (!stop.load(std::memory_order_relaxed)) {
        std::shared_ptr<const hubkern::kernel> k = slot.get(); // this call's handle, whatever happens meanwhile
        auto r = k->try_call("rms_norm", {tout, tx, tw, kEps});
        bool right = r.ok();
        for (size_t i = 0; right && i < out.size(); i++) right = std::fabs(out[i] - want[i]) <= 1e-4 * (1 + std::fabs(want[i]));
        bool replaced = slot.get() != k;
        std::lock_guard<std::mutex> g(t.mu);
        t.calls_per_commit[std::string(k->commit())]++;
        if (!r.ok()) {
            t.failed++;
            if (t.first_error.empty()) t.first_error = std::string(r.err().name()) + ": " + r.err().what();
        } else if (!right) {
            t.wrong++;
        }
        if (replaced) t.finished_on_replaced++;
    }
}

int usage() {
    std::fprintf(stderr, "usage: hk-serving [--repo ORG/NAME] [--version N] [--threads N] [--poll-ms MS]\n"
                         "                  [--endpoint URL] [--cache DIR] [--backend B]\n");
    return 2;
}

} // namespace

int main(int argc, char **argv) {
    hk_get_kernel_options o = HK_GET_KERNEL_OPTIONS_INIT;
    o.repo_id = "kernels-community/rmsnorm";
    o.kernel_version = 1;
    int threads = 4, poll_ms = 1000;
    for (int i = 1; i < argc; i += 2) { // every option takes a value
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (!v) return usage();
        if (!std::strcmp(a, "--repo")) o.repo_id = v;
        else if (!std::strcmp(a, "--version")) o.kernel_version = std::atoi(v);
        else if (!std::strcmp(a, "--threads")) threads = std::atoi(v);
        else if (!std::strcmp(a, "--poll-ms")) poll_ms = std::atoi(v);
        else if (!std::strcmp(a, "--endpoint")) o.hub_options.endpoint = v;
        else if (!std::strcmp(a, "--cache")) o.hub_options.cache_dir = v;
        else if (!std::strcmp(a, "--backend")) o.backend = v;
        else return usage();
    }
    if (threads < 1 || poll_ms < 1) return usage();
    // the branch's commit is asked again at each poll (not reused for the freshness window)
    o.hub_options.freshness_s = poll_ms / 2000.0;

    try {
        hubkern::library lib; // hk_init .. hk_shutdown around everything else
        kernel_slot slot(hubkern::kernel::get(o));
        std::printf("loaded %s %s %s\n", std::string(slot.get()->repo_id()).c_str(),
                    std::string(slot.get()->commit()).c_str(), std::string(slot.get()->variant()).c_str());
        std::fflush(stdout);

        std::vector<float> x(kRows * kHidden), w(kHidden);
        for (size_t i = 0; i < x.size(); i++) x[i] = float(std::sin(0.37 * double(i)) * 3.0);
        for (size_t i = 0; i < w.size(); i++) w[i] = float(1.0 + 0.5 * std::cos(0.11 * double(i)));
        std::vector<double> want(x.size());
        reference(want, x, w);

        std::atomic<bool> stop{false};
        tally t;
        std::vector<std::thread> pool;
        for (int i = 0; i < threads; i++) pool.emplace_back(worker, std::cref(slot), std::cref(stop), std::ref(t),
                                                          std::cref(x), std::cref(w), std::cref(want));

        long reloads = 0, poll_errors = 0;
        std::thread watcher([&] {
            while (!stop.load()) {
                std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
                if (stop.load()) break;
                auto next = hubkern::kernel::try_get(o);
                if (!next.ok()) { // keep serving the loaded kernel; say why the update was not taken
                    poll_errors++;
                    std::fprintf(stderr, "hk-serving: update check failed, still on %s: %s [%s]\n",
                                 std::string(slot.get()->commit()).c_str(), next.err().what(), next.err().name());
                    continue;
                }
                std::string old(slot.get()->commit()), now(next.value().commit());
                if (now == old) continue;
                slot.swap_in(std::move(next).value());
                reloads++;
                std::printf("reloaded %s -> %s\n", old.c_str(), now.c_str());
                std::fflush(stdout);
            }
        });

        std::string line; // serve until stdin closes
        while (std::getline(std::cin, line)) {}
        stop.store(true);
        watcher.join();
        for (auto &th : pool) th.join();

        long total = 0;
        for (auto &kv : t.calls_per_commit) {
            std::printf("calls %s %ld\n", kv.first.c_str(), kv.second);
            total += kv.second;
        }
        std::printf("summary calls=%ld failed=%ld wrong=%ld reloads=%ld finished_on_replaced=%ld poll_errors=%ld\n",
                    total, t.failed, t.wrong, reloads, t.finished_on_replaced, poll_errors);
        if (!t.first_error.empty()) std::fprintf(stderr, "hk-serving: first failed call: %s\n", t.first_error.c_str());
        return t.failed == 0 && t.wrong == 0 && total > 0 ? 0 : 1;
    } catch (const hubkern::error &e) {
        std::fprintf(stderr, "hk-serving: %s [%s]\n", e.what(), e.name());
        return 1;
    }
}

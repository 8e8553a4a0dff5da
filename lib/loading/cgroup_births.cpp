#include "loading/cgroup_births.h"

#include <bpf/libbpf.h>
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "base/errors.h"
#include "kernel/cgroup_names.h"
#include "kernel/cgroups.h"
#include "kernel/hooks.h"
#include "loading/events.h"
#include "loading/loader.h"

// After the event's struct, which the BPF side's C needs.
#include <linux/types.h>

#include "cgroup_birth.h"
#include "cgroup_births.skel.h"

namespace memlat {

namespace {

using Clock = std::chrono::steady_clock;

// A new cgroup's names are looked up this long after it is made, with those of the cgroups
// made meanwhile (one pass over the records); the runtime's records are there by then (it
// writes them before it makes the cgroup).
constexpr std::chrono::milliseconds gather_wait{20};
// A new container's or pod's names not in its records yet are looked for again after these
// waits while it lives (the kubelet makes a pod's log directory after the pod's cgroup); the
// tool's own lookups (WorkloadNames) take over for a cgroup that lives on. A runtime whose
// records are not on this root costs three lookups per container.
constexpr std::chrono::milliseconds retry_waits[] = {std::chrono::milliseconds(200),
                                                     std::chrono::milliseconds(1000)};

class WatchedBirths final : public CgroupBirths {
  public:
    WatchedBirths(bool v1_memory, const Verbosity &v, std::string root)
        : verbosity_(v), root_(std::move(root)), hierarchy_id_(memory_hierarchy_id(v1_memory)),
          probes_{Probe("cgroup:cgroup_mkdir, cgroup:cgroup_rmdir",
                        "the cgroup tracepoints (every kernel memlat supports has them)",
                        tracepoint_choices({"cgroup_mkdir", "cgroup_rmdir"}))},
          skel_(
              cgroup_births_bpf__open_opts, cgroup_births_bpf__destroy,
              [this](cgroup_births_bpf &s) { s.rodata->hierarchy_id = hierarchy_id_; }, probes_,
              v) {
        events_ = std::make_unique<EventReader>(
            skel_->maps.births,
            [this](const void *data, size_t size) {
                if (size >= sizeof(cgroup_birth))
                    on_event(*static_cast<const cgroup_birth *>(data));
            },
            bpf_map__max_entries(skel_->maps.births), 0);
        // The thread takes no signal: SIGINT and SIGTERM must interrupt the tool's own wait.
        sigset_t all, before;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &before);
        thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
        pthread_sigmask(SIG_SETMASK, &before, nullptr);
    }

    std::optional<Born> find(uint64_t cgroup_id) const override {
        std::lock_guard lock(mutex_);
        auto it = born_.find(cgroup_id);
        if (it == born_.end())
            return std::nullopt;
        return it->second.born;
    }

    void add_to(std::map<uint64_t, std::string> &paths) const override {
        std::lock_guard lock(mutex_);
        for (const auto &[id, entry] : born_)
            paths.try_emplace(id, entry.born.path);
    }

    void teach(WorkloadNames &names) const override {
        std::lock_guard lock(mutex_);
        for (const auto &[id, entry] : born_)
            names.learn(id, entry.born.path, entry.born.workload);
    }

    void interval_ended() override {
        std::lock_guard lock(mutex_);
        ++intervals_;
        std::erase_if(born_, [&](const auto &e) {
            return e.second.born.removed && e.second.removed_at + 2 <= intervals_;
        });
    }

    uint64_t lost() const override { return __atomic_load_n(&skel_->bss->lost, __ATOMIC_RELAXED); }

    const bpf_object *object() const override { return skel_->obj; }

    size_t size() const override {
        std::lock_guard lock(mutex_);
        return born_.size();
    }

  private:
    struct Entry {
        Born born;
        uint64_t removed_at = 0; // the interval it was removed in
    };
    struct Retry {
        std::string path;
        Clock::time_point at;
        size_t tries = 0;
    };

    static int memory_hierarchy_id(bool v1_memory) {
        if (!v1_memory)
            return 0;
        const std::optional<int> id = cgroup_v1_hierarchy_id("memory");
        if (!id)
            throw RuntimeError("the memory controller's hierarchy is not in /proc/cgroups");
        return *id;
    }

    // The thread: events as they come, and the lookups due.
    void run(std::stop_token stop) {
        while (!stop.stop_requested()) {
            auto wait = std::chrono::milliseconds(100);
            if (!retries_.empty()) {
                const auto next = std::min_element(
                    retries_.begin(), retries_.end(),
                    [](const auto &a, const auto &b) { return a.second.at < b.second.at; });
                // Rounded up: a wait of 0 ms before a look-up due in 0.4 ms would spin.
                const auto until =
                    std::chrono::ceil<std::chrono::milliseconds>(next->second.at - Clock::now());
                wait = std::clamp(until, std::chrono::milliseconds(0), wait);
            }
            events_->poll(wait);
            look_up_due();
        }
    }

    void on_event(const cgroup_birth &b) {
        if (b.removed) {
            // Gone before its first lookup: that lookup now, while its records may be there.
            if (auto r = retries_.find(b.id); r != retries_.end() && r->second.tries == 0)
                r->second.at = Clock::now();
            look_up_due();
            retries_.erase(b.id);
            std::lock_guard lock(mutex_);
            if (auto it = born_.find(b.id); it != born_.end()) {
                it->second.born.removed = true;
                it->second.removed_at = intervals_;
            }
            return;
        }
        // A path cut short names no cgroup that can be looked up: the walks name it.
        if (b.path_bytes == 0 || b.path_bytes >= sizeof(b.path))
            return;
        std::string path(b.path, strnlen(b.path, sizeof(b.path)));
        retries_[b.id] = Retry{path, Clock::now() + gather_wait, 0};
        std::lock_guard lock(mutex_);
        born_[b.id] = Entry{Born{std::move(path), Workload{}, false}, 0};
        keep_bounded();
    }

    // The lookups due, in one pass: a runtime that keeps every container in one list
    // (Podman's containers.json, rewritten for each new container) costs a parse per pass
    // in which it changed, not one per container.
    void look_up_due() {
        const auto now = Clock::now();
        for (auto it = retries_.begin(); it != retries_.end();) {
            Retry &r = it->second;
            if (now < r.at) {
                ++it;
                continue;
            }
            Workload w = find_workload(r.path, root_, &records_);
            const bool found = records_answered(w);
            if (found)
                say(r.path, w);
            if (found || r.tries == 0) {
                std::lock_guard lock(mutex_);
                if (auto b = born_.find(it->first); b != born_.end())
                    b->second.born.workload = std::move(w);
            }
            if (found || r.tries >= std::size(retry_waits)) {
                it = retries_.erase(it);
            } else {
                r.at = now + retry_waits[r.tries++];
                ++it;
            }
        }
    }

    void say(const std::string &path, const Workload &w) const {
        if (verbosity_.on() && !w.kind.empty() && w.source != "path")
            verbose(verbosity_, fmt::format("names: {} is {} (from {}, as the cgroup was made)",
                                            path, w.display(), w.source));
    }

    // Past max_entries, the oldest removed cgroups go first, then the oldest (ids grow as
    // cgroups are made). Under the lock.
    void keep_bounded() {
        while (born_.size() > max_entries) {
            auto gone = std::find_if(born_.begin(), born_.end(),
                                     [](const auto &e) { return e.second.born.removed; });
            born_.erase(gone != born_.end() ? gone : born_.begin());
        }
    }

    Verbosity verbosity_;
    std::string root_;
    int hierarchy_id_;
    std::vector<Probe> probes_;
    Loaded<cgroup_births_bpf> skel_;
    std::unique_ptr<EventReader> events_;
    mutable std::mutex mutex_;
    std::map<uint64_t, Entry> born_; // under mutex_
    uint64_t intervals_ = 0;         // under mutex_
    // The thread's own: the lookups to come, and the record files they read.
    std::map<uint64_t, Retry> retries_;
    RecordCache records_;
    std::jthread thread_; // last: stopped and joined before the rest goes
};

} // namespace

std::unique_ptr<CgroupBirths> CgroupBirths::start(bool v1_memory, const Verbosity &v,
                                                  std::string root) {
    try {
        return std::make_unique<WatchedBirths>(v1_memory, v, std::move(root));
    } catch (const RuntimeError &e) {
        verbose(v, fmt::format("names: cgroups made and removed between two walks of the "
                               "hierarchy keep only their ids: {}",
                               e.what()));
        return nullptr;
    }
}

} // namespace memlat

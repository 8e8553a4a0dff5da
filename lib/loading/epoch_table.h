// A BPF hash table read one interval at a time, so that it holds one interval's keys and not
// every key of the run (cachestat -P/-f, drsnoop -H -P, tlbflush -P, numamove -P under
// process churn), and the counters kept by the same epochs (EpochCounters).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <thread>

#include "loading/loader.h"

namespace memlat {

// The BPF side writes each entry under the key's `epoch` field (0 or 1), which it copies from
// a .bss variable that user space owns. An interval ends with a flip of that variable:
// programs starting from then write entries of the other epoch. After a grace period the
// closed epoch's entries are read and deleted. A program that read the epoch before the flip
// is done by then (tracepoint and kprobe programs run with preemption disabled, for
// microseconds), so no count lands in an entry between its read and its delete, nor in a
// deleted entry the map hands out again under another key.
// How long a program that read the epoch before a flip may still be writing under it.
inline constexpr std::chrono::milliseconds epoch_grace_period{2};

// Ends an epoch: flips `epoch` (the mmap'ed .bss variable) and waits until no program can still
// write under the old one, which it returns. EpochTable calls it; a tool whose other counters
// go by epoch too calls it where its view keeps no table.
inline uint32_t close_epoch(uint32_t &epoch) {
    const uint32_t closing = std::atomic_ref<uint32_t>(epoch).load(std::memory_order_relaxed);
    std::atomic_ref<uint32_t>(epoch).store(closing ^ 1, std::memory_order_seq_cst);
    std::this_thread::sleep_for(epoch_grace_period);
    return closing;
}

template <typename BpfKey, typename Value, typename Key>
class EpochTable {
  public:
    using KeyOf = Key (*)(const BpfKey &);
    // Adds an entry's counts to `into` (value-initialized for a new key).
    using Add = void (*)(Value &into, const Value &entry);
    EpochTable(KeyOf key_of, Add add) : key_of_(key_of), add_(add) {}

    // Starts the first interval (a baseline taken before the tool says it is ready): what the
    // programs counted until now is dropped, by the next call and not now, when its grace
    // period has long passed; a baseline that read it waited 2 ms of every start-up for it.
    void begin(uint32_t &epoch) {
        const uint32_t closing = std::atomic_ref<uint32_t>(epoch).load(std::memory_order_relaxed);
        std::atomic_ref<uint32_t>(epoch).store(closing ^ 1, std::memory_order_seq_cst);
        dropped_epoch_ = closing;
        began_ = std::chrono::steady_clock::now();
    }

    // What each key counted in the epoch this call closes. `epoch` is the mmap'ed .bss variable.
    std::map<Key, Value> next_interval(bpf_map *map, uint32_t &epoch) {
        const uint32_t closing = std::atomic_ref<uint32_t>(epoch).load(std::memory_order_relaxed);
        if (dropped_epoch_) {
            // Emptied before the programs write to it again (the flip below).
            std::this_thread::sleep_until(began_ + epoch_grace_period);
            for (const auto &[k, v] : read_hash_map<BpfKey, Value>(map))
                if (k.epoch == *dropped_epoch_)
                    bpf_map__delete_elem(map, &k, sizeof(k), 0);
            dropped_epoch_.reset();
        }
        close_epoch(epoch);
        std::map<Key, Value> gained;
        for (const auto &[k, v] : read_hash_map<BpfKey, Value>(map)) {
            if (k.epoch != closing)
                continue;
            add_(gained[key_of_(k)], v);
            bpf_map__delete_elem(map, &k, sizeof(k), 0);
        }
        return gained;
    }

  private:
    KeyOf key_of_;
    Add add_;
    std::optional<uint32_t> dropped_epoch_; // begin()'s epoch, until emptied
    std::chrono::steady_clock::time_point began_;
};

// Counters the programs keep one set of per epoch, beside an EpochTable's entries and under
// the same epoch read once per event (a per-CPU row, a count per reason): what the closed
// epochs added since the baseline, so that an interval's total is the sum of its rows.
// `Counts` only grow; it has `Counts since(const Counts &before) const` and `+=`.
template <typename Counts>
class EpochCounters {
  public:
    using Read = std::function<Counts(uint32_t epoch)>;
    explicit EpochCounters(Read read) : read_(std::move(read)) {}

    // At the baseline, before `epoch` (the .bss variable's value) is flipped: nothing counted
    // until then is in the totals. The epoch it opens has counted nothing yet; the one it
    // closes is read at the first close(), when its last writers are long done.
    void begin(uint32_t epoch) { baseline_ = epoch & 1; }

    // Around `close_it()`, which ends the epoch `epoch` (EpochTable::next_interval(),
    // close_epoch(): both wait out the grace period): what that epoch added is taken in.
    // Returns the totals since the baseline.
    template <typename Close>
    const Counts &close(uint32_t epoch, Close &&close_it) {
        const uint32_t closing = epoch & 1;
        if (baseline_) {
            // Its writers finished an interval ago, and it opens again with this close.
            seen_[*baseline_] = read_(*baseline_);
            baseline_.reset();
        }
        close_it();
        Counts now = read_(closing);
        totals_ += now.since(seen_[closing]);
        seen_[closing] = std::move(now);
        return totals_;
    }

    const Counts &totals() const { return totals_; }

  private:
    Read read_;
    std::array<Counts, 2> seen_{}; // each epoch's counters as last read
    Counts totals_{};
    std::optional<uint32_t> baseline_;
};

} // namespace memlat

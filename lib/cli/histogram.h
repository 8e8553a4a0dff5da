// Log2 histograms as the BPF side counts them (see include/memlat/hist.h): slot 0 holds the
// values 0 and 1, slot i > 0 holds [2^i, 2^(i+1) - 1].
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "memlat/hist.h"

namespace memlat {

using Log2Hist = std::array<uint64_t, MEMLAT_HIST_SLOTS>;

// What was counted since `before`, slot by slot: the BPF side only ever adds to its slots, so
// an interval's histogram is the difference of two readings.
Log2Hist hist_since(std::span<const uint64_t, MEMLAT_HIST_SLOTS> now,
                    std::span<const uint64_t, MEMLAT_HIST_SLOTS> before);

// The familiar star rendering: a header line naming the unit, then one line per slot from
// the first to the last non-empty one, with a 40-character bar scaled to the largest count.
// Returns "" when every slot is zero.
std::string render_log2_hist(std::span<const uint64_t> slots, std::string_view unit);

// {"unit": unit, "count": N (the samples), "buckets": [{"low": 0, "high": 1, "count": 3}, ...]}
// with only the non-empty buckets.
nlohmann::json log2_hist_json(std::span<const uint64_t> slots, std::string_view unit);

// Sum of all slots.
uint64_t hist_total(std::span<const uint64_t> slots);

// Histograms by Key (a kind, a process, an order...) that the BPF side only ever adds to, read
// each interval: next() gives what each key counted since the previous next(), leaving out the
// keys that counted nothing.
template <typename Key>
class IntervalHists {
  public:
    std::map<Key, Log2Hist> next(std::map<Key, Log2Hist> now) {
        std::map<Key, Log2Hist> counted;
        for (const auto &[key, slots] : now) {
            const auto it = before_.find(key);
            const Log2Hist d = it == before_.end() ? slots : hist_since(slots, it->second);
            if (hist_total(d) != 0)
                counted.emplace(key, d);
        }
        before_ = std::move(now);
        return counted;
    }

    // The next reading is taken whole: for tables the BPF side starts anew each interval.
    void reset() { before_.clear(); }

  private:
    std::map<Key, Log2Hist> before_;
};

} // namespace memlat

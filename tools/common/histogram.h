// Log2 histograms as the BPF side counts them (see include/memlat/hist.h): slot 0 holds the
// values 0 and 1, slot i > 0 holds [2^i, 2^(i+1) - 1].
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

namespace memlat {

// The familiar star rendering: a header line naming the unit, then one line per slot from
// the first to the last non-empty one, with a 40-character bar scaled to the largest count.
// Returns "" when every slot is zero.
std::string render_log2_hist(std::span<const uint64_t> slots, std::string_view unit);

// {"unit": unit, "total": N, "buckets": [{"low": 0, "high": 1, "count": 3}, ...]}
// with only the non-empty buckets.
nlohmann::json log2_hist_json(std::span<const uint64_t> slots, std::string_view unit);

// Sum of all slots.
uint64_t hist_total(std::span<const uint64_t> slots);

} // namespace memlat

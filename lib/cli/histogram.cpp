#include "cli/histogram.h"

#include <algorithm>
#include <fmt/format.h>
#include <numeric>
#include <optional>

namespace memlat {

Log2Hist hist_since(std::span<const uint64_t, MEMLAT_HIST_SLOTS> now,
                    std::span<const uint64_t, MEMLAT_HIST_SLOTS> before) {
    Log2Hist d{};
    for (size_t i = 0; i < d.size(); ++i)
        d[i] = now[i] - before[i];
    return d;
}

namespace {

constexpr size_t kBarWidth = 40;
// Slots past 63 would overflow a 64-bit bound; the BPF side never produces them.
constexpr size_t kMaxSlots = 64;

uint64_t slot_low(size_t i) {
    return i == 0 ? 0 : uint64_t{1} << i;
}

uint64_t slot_high(size_t i) {
    return i == 0 ? 1 : i >= 63 ? UINT64_MAX : (uint64_t{1} << (i + 1)) - 1;
}

std::span<const uint64_t> usable(std::span<const uint64_t> slots) {
    return slots.first(std::min(slots.size(), kMaxSlots));
}

std::optional<size_t> last_nonempty(std::span<const uint64_t> slots) {
    for (size_t i = slots.size(); i-- > 0;) {
        if (slots[i] != 0)
            return i;
    }
    return std::nullopt;
}

size_t bar_length(uint64_t count, uint64_t max) {
    // Counts near 2^64 would overflow count * 40; dividing max first costs only precision.
    if (max <= UINT64_MAX / kBarWidth)
        return static_cast<size_t>(count * kBarWidth / max);
    return std::min<size_t>(kBarWidth, count / (max / kBarWidth));
}

} // namespace

std::string render_log2_hist(std::span<const uint64_t> slots, std::string_view unit) {
    slots = usable(slots);
    const auto last = last_nonempty(slots);
    if (!last)
        return "";

    // Wider columns once the bounds no longer fit in ten digits, so the bars stay aligned.
    const bool wide = *last > 32;
    const int num_width = wide ? 20 : 10;
    const int indent = wide ? 15 : 5;
    const int unit_width = wide ? 29 : 19;
    const uint64_t max = *std::max_element(slots.begin(), slots.begin() + *last + 1);

    // Counts wider than the usual eight columns widen the column instead of shifting bars.
    const int count_width = std::max<int>(8, static_cast<int>(fmt::formatted_size("{}", max)));

    std::string out = fmt::format("{:{}}{:<{}} : {:<{}} distribution\n", "", indent, unit,
                                  unit_width, "count", count_width);
    for (size_t i = 0; i <= *last; ++i) {
        const size_t stars = bar_length(slots[i], max);
        out += fmt::format("{:>{}} -> {:<{}} : {:<{}} |{}{}|\n", slot_low(i), num_width,
                           slot_high(i), num_width, slots[i], count_width, std::string(stars, '*'),
                           std::string(kBarWidth - stars, ' '));
    }
    return out;
}

nlohmann::json log2_hist_json(std::span<const uint64_t> slots, std::string_view unit) {
    slots = usable(slots);
    auto buckets = nlohmann::json::array();
    for (size_t i = 0; i < slots.size(); ++i) {
        if (slots[i] != 0)
            buckets.push_back({{"low", slot_low(i)}, {"high", slot_high(i)}, {"count", slots[i]}});
    }
    return {{"unit", unit}, {"count", hist_total(slots)}, {"buckets", std::move(buckets)}};
}

uint64_t hist_total(std::span<const uint64_t> slots) {
    return std::accumulate(slots.begin(), slots.end(), uint64_t{0});
}

} // namespace memlat

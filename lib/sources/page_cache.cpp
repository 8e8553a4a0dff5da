#include "sources/page_cache.h"

#include <algorithm>

namespace memlat::cachestat {

Counts &Counts::operator+=(const Counts &o) {
    accesses += o.accesses;
    misses += o.misses;
    dirties += o.dirties;
    hits += o.hits;
    return *this;
}

Counts Counts::since(const Counts &before) const {
    auto minus = [](uint64_t a, uint64_t b) { return a > b ? a - b : 0; };
    return {minus(accesses, before.accesses), minus(misses, before.misses),
            minus(dirties, before.dirties), minus(hits, before.hits)};
}

std::optional<double> hit_ratio(const Counts &c) {
    if (c.accesses == 0)
        return std::nullopt;
    return std::min(100.0, 100.0 * static_cast<double>(c.hits) / static_cast<double>(c.accesses));
}

nlohmann::json json_counts(const Counts &c, bool accesses_known) {
    nlohmann::json j;
    j["accesses"] = accesses_known ? nlohmann::json(c.accesses) : nlohmann::json(nullptr);
    j["hits"] = accesses_known ? nlohmann::json(c.hits) : nlohmann::json(nullptr);
    j["misses"] = c.misses;
    j["dirties"] = c.dirties;
    j["hit_ratio_pct"] =
        accesses_known ? (hit_ratio(c) ? nlohmann::json(*hit_ratio(c)) : nlohmann::json(nullptr))
                       : nlohmann::json(nullptr);
    return j;
}

} // namespace memlat::cachestat

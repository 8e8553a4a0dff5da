#include "compactsnoop_metrics.h"

#include <algorithm>

#include "compactsnoop_format.h"

namespace memlat::compactsnoop {

using prometheus::Labels;
using prometheus::Type;

void collect_metrics(const Counts &c, const std::function<std::string(int32_t)> &status_name,
                     long page_bytes, prometheus::Exposition &out) {
    auto kind = [](uint32_t k) { return Labels{{"kind", kind_name(k)}}; };
    out.family("memlat_compaction_runs", Type::Counter,
               "Memory-compaction runs (mm_compaction_begin to end), by kind (direct, kcompactd, "
               "proactive, manual) and result");
    for (uint32_t k = 0; k < COMPACTSNOOP_KINDS; ++k)
        for (int32_t st = 0; st < COMPACTSNOOP_MAX_STATUS; ++st)
            if (c.kinds[k] && c.summary[k][st].runs != 0) {
                Labels l = kind(k);
                l.emplace_back("status", status_name(st));
                out.sample(l, static_cast<double>(c.summary[k][st].runs));
            }
    out.family("memlat_compaction_stall_seconds", Type::Histogram,
               "Time of compaction runs, by kind (for direct compaction: the allocating "
               "thread's stall) and order (-1: the whole zone)",
               "seconds");
    for (uint32_t k = 0; k < COMPACTSNOOP_KINDS; ++k)
        for (uint32_t row = 0; row < COMPACTSNOOP_ORDER_ROWS; ++row) {
            // An order's histogram appears with its first run: most orders never compact.
            const auto &slots = c.hist_us[k][row];
            if (!c.kinds[k] ||
                std::all_of(slots.begin(), slots.end(), [](uint64_t n) { return n == 0; }))
                continue;
            Labels l = kind(k);
            l.emplace_back("order", std::to_string(static_cast<int>(row) - 1) +
                                        (row == COMPACTSNOOP_ORDER_ROWS - 1 ? "+" : ""));
            out.histogram(l, slots, 1e-6, static_cast<double>(c.hist_sum_ns[k][row]) / 1e9);
        }
    // Pages summed over a kind's summary rows (one per status), in bytes.
    auto bytes_family = [&](const char *name, const char *help, auto pages_of) {
        out.family(name, Type::Counter, help, "bytes");
        for (uint32_t k = 0; k < COMPACTSNOOP_KINDS; ++k)
            if (c.kinds[k]) {
                uint64_t pages = 0;
                for (const auto &s : c.summary[k])
                    pages += pages_of(s);
                out.sample(kind(k), static_cast<double>(pages) * page_bytes);
            }
    };
    bytes_family("memlat_compaction_migrated_bytes", "Memory compaction migrated, by kind",
                 [](const auto &s) { return s.migrated; });
    bytes_family("memlat_compaction_failed_bytes", "Memory compaction failed to migrate, by kind",
                 [](const auto &s) { return s.failed; });
    out.family("memlat_compaction_deferred", Type::Counter,
               "Zones whose compaction was skipped as deferred (mm_compaction_deferred), by kind");
    for (uint32_t k = 0; k < COMPACTSNOOP_KINDS; ++k)
        if (c.kinds[k])
            out.sample(kind(k), static_cast<double>(c.deferred[k]));
    out.family("memlat_compaction_kcompactd_wakes", Type::Counter,
               "Wake-ups of the kcompactd threads (mm_compaction_kcompactd_wake)");
    out.sample({}, static_cast<double>(c.kcompactd_wakes));
}

} // namespace memlat::compactsnoop

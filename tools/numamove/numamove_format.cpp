#include "numamove_format.h"

#include <fmt/format.h>
#include <functional>

#include "base/errors.h"

namespace memlat::numamove {

ReasonNames ReasonNames::from_kernel() {
    try {
        auto names = kernel_enum_names("migrate_reason", "MR_");
        // MR_TYPES is the number of reasons, not a reason.
        std::erase_if(names, [](const auto &entry) { return entry.second == "types"; });
        return ReasonNames(std::move(names));
    } catch (const RuntimeError &) {
        return builtin();
    }
}

ReasonNames ReasonNames::builtin() {
    return ReasonNames({{0, "compaction"},
                        {1, "memory_failure"},
                        {2, "memory_hotplug"},
                        {3, "syscall"},
                        {4, "mempolicy_mbind"},
                        {5, "numa_misplaced"},
                        {6, "contig_range"},
                        {7, "longterm_pin"},
                        {8, "demotion"},
                        {9, "damon"}},
                       true);
}

std::string ReasonNames::name(int64_t reason) const {
    if (auto it = names_.find(reason); it != names_.end())
        return it->second;
    if (reason == NUMAMOVE_MAX_REASONS - 1)
        return "other";
    return fmt::format("reason_{}", reason);
}

std::optional<int64_t> ReasonNames::value(std::string_view name) const {
    for (const auto &[value, n] : names_)
        if (n == name)
            return value;
    return std::nullopt;
}

std::string ArgLayout::describe() const {
    auto pos = [](uint8_t p) {
        return p == NUMAMOVE_NO_ARG ? std::string("-") : std::to_string(p);
    };
    return fmt::format("succeeded={} failed={} thp_succeeded={} thp_failed={} thp_split={} "
                       "large_folio_split={} mode={} reason={}",
                       pos(succeeded), pos(failed), pos(thp_succeeded), pos(thp_failed),
                       pos(thp_split), pos(large_split), pos(mode), pos(reason));
}

std::optional<ArgLayout> migrate_pages_layout(const std::vector<ParamKind> &params,
                                              std::string &why) {
    if (params.empty() || params[0] != ParamKind::Pointer) {
        why = "the prototype does not start with the tracepoint's void *__data";
        return std::nullopt;
    }
    // Arguments as BPF_PROG numbers them: after __data.
    std::vector<ParamKind> args(params.begin() + 1, params.end());
    size_t longs = 0;
    while (longs < args.size() && args[longs] == ParamKind::UnsignedLong)
        ++longs;
    // The reason is an int until 7.2 and an enum migrate_reason from 7.3 on: both 32 bits.
    if (longs + 2 != args.size() || args[longs] != ParamKind::MigrateMode ||
        (args[longs + 1] != ParamKind::Int && args[longs + 1] != ParamKind::MigrateReason)) {
        why = fmt::format("{} arguments that are not N unsigned longs, enum migrate_mode, and "
                          "int or enum migrate_reason",
                          args.size());
        return std::nullopt;
    }
    ArgLayout l;
    switch (longs) {
    case 6:
        l.large_split = 5;
        [[fallthrough]];
    case 5:
        l.thp_succeeded = 2;
        l.thp_failed = 3;
        l.thp_split = 4;
        [[fallthrough]];
    case 2:
        l.succeeded = 0;
        l.failed = 1;
        break;
    default:
        why = fmt::format("{} page counts before the mode, a shape no kernel had when numamove "
                          "was written (2, 5 or 6)",
                          longs);
        return std::nullopt;
    }
    l.mode = static_cast<uint8_t>(longs);
    l.reason = static_cast<uint8_t>(longs + 1);
    return l;
}

std::optional<ArgLayout> migrate_pages_layout(const std::vector<TracepointParameter> &prototype,
                                              std::string &why) {
    using Kind = TracepointParameter::Kind;
    std::vector<ParamKind> kinds;
    for (const auto &param : prototype) {
        ParamKind k = ParamKind::Other;
        if (param.kind == Kind::Pointer)
            k = ParamKind::Pointer;
        else if (param.kind == Kind::Enum)
            k = param.type_name == "migrate_mode"     ? ParamKind::MigrateMode
                : param.type_name == "migrate_reason" ? ParamKind::MigrateReason
                                                      : ParamKind::Other;
        else if (param.kind == Kind::Int && param.type_name == "long unsigned int")
            k = ParamKind::UnsignedLong;
        else if (param.kind == Kind::Int && param.type_name == "int")
            k = ParamKind::Int;
        kinds.push_back(k);
    }
    return migrate_pages_layout(kinds, why);
}

namespace {

template <typename Op>
numamove_count combine(const numamove_count &a, const numamove_count &b) {
    const Op op;
    numamove_count d{};
    d.calls = op(a.calls, b.calls);
    d.succeeded = op(a.succeeded, b.succeeded);
    d.failed = op(a.failed, b.failed);
    d.thp_succeeded = op(a.thp_succeeded, b.thp_succeeded);
    d.thp_failed = op(a.thp_failed, b.thp_failed);
    d.thp_split = op(a.thp_split, b.thp_split);
    d.large_split = op(a.large_split, b.large_split);
    d.paired = op(a.paired, b.paired);
    d.total_ns = op(a.total_ns, b.total_ns);
    return d;
}

} // namespace

numamove_count minus(const numamove_count &a, const numamove_count &b) {
    return combine<std::minus<uint64_t>>(a, b);
}

numamove_count plus(const numamove_count &a, const numamove_count &b) {
    return combine<std::plus<uint64_t>>(a, b);
}

std::string default_header() {
    return fmt::format("{:<10} {:>18} {:>18}", "TIME", "NUMA_migrations", "NUMA_migrations_ms");
}

std::string default_line(std::string_view time, uint64_t migrations, uint64_t total_ns) {
    return fmt::format("{:<10} {:>18} {:>18.3f}", time, migrations, total_ns / 1e6);
}

namespace {

double avg_us(const numamove_count &c) {
    return c.paired ? c.total_ns / 1e3 / c.paired : 0.0;
}

nlohmann::json count_json(const numamove_count &c) {
    return {{"calls", c.calls},
            {"succeeded", c.succeeded},
            {"failed", c.failed},
            {"thp_succeeded", c.thp_succeeded},
            {"thp_failed", c.thp_failed},
            {"thp_split", c.thp_split},
            {"large_folio_split", c.large_split},
            {"timed_calls", c.paired},
            {"total_ns", c.total_ns},
            {"total_ms", c.total_ns / 1e6}};
}

constexpr const char *counts_format = "{:>8} {:>10} {:>8} {:>7} {:>8} {:>9} {:>11.3f} {:>9.2f}";

std::string counts_columns(const numamove_count &c) {
    return fmt::format(counts_format, c.calls, c.succeeded, c.failed, c.thp_succeeded, c.thp_failed,
                       c.thp_split, c.total_ns / 1e6, avg_us(c));
}

std::string counts_headers() {
    return fmt::format("{:>8} {:>10} {:>8} {:>7} {:>8} {:>9} {:>11} {:>9}", "CALLS", "SUCCEEDED",
                       "FAILED", "THP_OK", "THP_FAIL", "THP_SPLIT", "TOTAL(ms)", "AVG(us)");
}

} // namespace

std::string reasons_header() {
    return fmt::format("{:<16} {}", "REASON", counts_headers());
}

std::string reason_line(const ReasonRow &row, const ReasonNames &names) {
    return fmt::format("{:<16} {}", names.name(row.reason), counts_columns(row.c));
}

nlohmann::json reason_json(const ReasonRow &row, const ReasonNames &names) {
    auto j = count_json(row.c);
    j["reason"] = names.name(row.reason);
    j["reason_id"] = row.reason;
    return j;
}

std::string process_header() {
    return fmt::format("{:<8} {:<16} {:<16} {}", "PID", "COMM", "REASON", counts_headers());
}

std::string process_line(const ProcessRow &row, const ReasonNames &names) {
    return fmt::format("{:<8} {:<16} {:<16} {}", row.pid, row.comm, names.name(row.reason),
                       counts_columns(row.c));
}

nlohmann::json process_json(const ProcessRow &row, const ReasonNames &names) {
    auto j = count_json(row.c);
    j["pid"] = row.pid;
    j["comm"] = row.comm;
    j["reason"] = names.name(row.reason);
    j["reason_id"] = row.reason;
    return j;
}

void json_totals(const std::array<numamove_count, NUMAMOVE_MAX_REASONS> &interval,
                 const std::vector<ProcessRow> &rows, std::optional<int> only_reason,
                 const ReasonNames &names, nlohmann::json &out) {
    std::array<numamove_count, NUMAMOVE_MAX_REASONS> in_rows{};
    for (const auto &row : rows)
        in_rows[row.reason] = plus(in_rows[row.reason], row.c);
    nlohmann::json totals = nlohmann::json::array(), left_out = nlohmann::json::array();
    for (int r = 0; r < NUMAMOVE_MAX_REASONS; ++r) {
        const numamove_count &d = interval[r];
        if (d.calls == 0 || (only_reason && r != *only_reason))
            continue;
        totals.push_back(reason_json({r, d}, names));
        if (d.calls > in_rows[r].calls)
            left_out.push_back(reason_json({r, minus(d, in_rows[r])}, names));
    }
    out["totals"] = totals;
    out["left_out"] = left_out;
}

} // namespace memlat::numamove

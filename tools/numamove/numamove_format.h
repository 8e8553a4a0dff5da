// numamove's pure logic, apart from the tool so the unit tests can check it: migration reason
// names, the layout of mm_migrate_pages' tp_btf arguments, and the output lines.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernel/types.h"
#include "numamove.h"

namespace memlat::numamove {

// The kernel's enum migrate_reason by value: "compaction", "syscall", "numa_misplaced", ...
class ReasonNames {
  public:
    // Names from the running kernel's BTF (MR_ removed, lower case); when BTF lacks the enum,
    // the names of Linux 6.18 and `fallback()` says so.
    static ReasonNames from_kernel();
    // The table of Linux 6.18 (mm/migrate.h), for kernels whose BTF lacks the enum.
    static ReasonNames builtin();
    explicit ReasonNames(std::map<int64_t, std::string> names, bool fallback = false)
        : names_(std::move(names)), fallback_(fallback) {}

    // "reason_N" for a value the kernel does not name; the last slot counts every value at
    // or above it, so it is "other" unless the kernel names it.
    std::string name(int64_t reason) const;
    std::optional<int64_t> value(std::string_view name) const;
    bool fallback() const { return fallback_; }
    const std::map<int64_t, std::string> &all() const { return names_; }

  private:
    std::map<int64_t, std::string> names_;
    bool fallback_ = false;
};

// What one parameter of a tracepoint's BTF prototype is, as far as the layout needs.
enum class ParamKind { Pointer, UnsignedLong, MigrateMode, MigrateReason, Int, Other };

// Positions of mm_migrate_pages' arguments as BPF_PROG counts them (the prototype's leading
// `void *__data` removed); NUMAMOVE_NO_ARG where the kernel has no such argument.
struct ArgLayout {
    uint8_t succeeded = NUMAMOVE_NO_ARG, failed = NUMAMOVE_NO_ARG;
    uint8_t thp_succeeded = NUMAMOVE_NO_ARG, thp_failed = NUMAMOVE_NO_ARG,
            thp_split = NUMAMOVE_NO_ARG, large_split = NUMAMOVE_NO_ARG;
    uint8_t mode = NUMAMOVE_NO_ARG, reason = NUMAMOVE_NO_ARG;
    std::string describe() const;
};

// The layout of btf_trace_mm_migrate_pages' parameters (all of them, __data first). BTF names
// no parameter of a FUNC_PROTO, so the layout is read from the types: the unsigned longs up
// to the enum migrate_mode are the page counts, in the order every kernel has added them
// (succeeded, failed; thp_succeeded, thp_failed, thp_split since 5.9; large_folio_split
// later), then the mode and the int reason. Any other shape is unknown: nullopt with `why`.
std::optional<ArgLayout> migrate_pages_layout(const std::vector<ParamKind> &params,
                                              std::string &why);

// The same from the prototype as the kernel's BTF declares it (typedef
// btf_trace_mm_migrate_pages; tracepoint_prototype() in kernel/types.h reads it).
std::optional<ArgLayout> migrate_pages_layout(const std::vector<TracepointParameter> &prototype,
                                              std::string &why);

// One interval's counts of one reason (the difference of two snapshots).
numamove_count minus(const numamove_count &a, const numamove_count &b);
// `a` plus `b`, field by field.
numamove_count plus(const numamove_count &a, const numamove_count &b);

// The default view, as the anchors print it: TIME NUMA_migrations NUMA_migrations_ms, with
// the milliseconds from summed nanoseconds (three decimals, never truncated to whole ms).
std::string default_header();
std::string default_line(std::string_view time, uint64_t migrations, uint64_t total_ns);

// The --reasons table: one row per reason with migrations in the interval.
struct ReasonRow {
    int64_t reason;
    numamove_count c;
};
std::string reasons_header();
std::string reason_line(const ReasonRow &row, const ReasonNames &names);
nlohmann::json reason_json(const ReasonRow &row, const ReasonNames &names);

// The -P table: per process and reason.
struct ProcessRow {
    uint32_t pid;
    std::string comm;
    int64_t reason;
    numamove_count c;
};
std::string process_header();
std::string process_line(const ProcessRow &row, const ReasonNames &names);
nlohmann::json process_json(const ProcessRow &row, const ReasonNames &names);
// -P -j: the interval's totals by reason (`interval`: every process's, counted over the same
// epochs as the rows; `only_reason`: without --reasons, NUMA balancing's alone) as out["totals"],
// and what of them no row holds (a full table) as out["left_out"], so that the rows plus
// left_out equal the totals.
void json_totals(const std::array<numamove_count, NUMAMOVE_MAX_REASONS> &interval,
                 const std::vector<ProcessRow> &rows, std::optional<int> only_reason,
                 const ReasonNames &names, nlohmann::json &out);

} // namespace memlat::numamove

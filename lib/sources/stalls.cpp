#include "sources/stalls.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

namespace memlat::memstall {

const char *cause_column(uint32_t cause) {
    static const std::array<const char *, MEMSTALL_CAUSES> columns{
        "DIRECT", "MEMCG", "COMPACT", "DIRTY", "SWAPIN", "HIGH", "THRASH", "OTHER"};
    return cause < MEMSTALL_CAUSES ? columns[cause] : "UNKNOWN";
}

double share_percent(uint64_t ns, double interval_s) {
    return interval_s > 0 ? static_cast<double>(ns) / (interval_s * 1e9) * 100 : 0;
}

const char *cause_name(uint32_t cause) {
    static const std::array<const char *, MEMSTALL_CAUSES> names{
        "direct", "memcg", "compact", "dirty", "swapin", "high", "thrash", "other"};
    return cause < MEMSTALL_CAUSES ? names[cause] : "unknown";
}

bool frees_pages(uint32_t cause) {
    return cause == MEMSTALL_DIRECT_RECLAIM || cause == MEMSTALL_MEMCG_RECLAIM;
}

uint64_t reclaimed_pages(const CauseTimes &causes) {
    return causes[MEMSTALL_DIRECT_RECLAIM].reclaimed_pages +
           causes[MEMSTALL_MEMCG_RECLAIM].reclaimed_pages;
}

nlohmann::json causes_json(const CauseTimes &causes, bool max) {
    nlohmann::json out = nlohmann::json::object();
    for (uint32_t cause = 0; cause < MEMSTALL_CAUSES; ++cause) {
        const auto &c = causes[cause];
        if (c.stalls == 0 && c.ns == 0)
            continue;
        nlohmann::json &j = out[cause_name(cause)];
        j = {{"stalls", c.stalls}, {"ns", c.ns}};
        if (max)
            j["max_ns"] = c.max_ns;
        if (frees_pages(cause))
            j["reclaimed_pages"] = c.reclaimed_pages;
    }
    return out;
}

uint64_t Row::total_ns() const {
    uint64_t sum = 0;
    for (const auto &c : causes)
        sum += c.ns;
    return sum;
}

namespace {

void add_cause(CauseTime &into, const CauseTime &c) {
    into.stalls += c.stalls;
    into.ns += c.ns;
    into.max_ns = std::max(into.max_ns, c.max_ns);
    into.reclaimed_pages += c.reclaimed_pages;
}

void add_causes(Row &into, const Row &row) {
    for (size_t cause = 0; cause < into.causes.size(); ++cause)
        add_cause(into.causes[cause], row.causes[cause]);
}

} // namespace

std::vector<Row> rows(const Snapshot &now, const Snapshot &before, Grouping grouping,
                      const std::map<uint64_t, std::string> &cgroup_paths) {
    std::map<uint64_t, Row> by_id;
    for (const auto &[key, v] : now) {
        const uint32_t cause = key.second;
        if (cause >= MEMSTALL_CAUSES)
            continue;
        CauseTime delta{v.stalls, v.total_ns, v.max_ns, v.reclaimed_pages};
        if (auto it = before.find(key); it != before.end()) {
            delta.stalls -= std::min<uint64_t>(delta.stalls, it->second.stalls);
            delta.ns -= std::min<uint64_t>(delta.ns, it->second.total_ns);
            delta.reclaimed_pages -=
                std::min<uint64_t>(delta.reclaimed_pages, it->second.reclaimed_pages);
        }
        const uint64_t id = grouping == Grouping::Process  ? v.pid
                            : grouping == Grouping::Thread ? key.first
                                                           : v.cgroup_id;
        Row &row = by_id[id];
        if (row.name.empty()) {
            row.id = id;
            if (grouping != Grouping::Cgroup) {
                row.name = std::string(v.comm, strnlen(v.comm, sizeof(v.comm)));
            } else {
                auto path = cgroup_paths.find(id);
                row.name = path != cgroup_paths.end() ? path->second : fmt::format("{}", id);
            }
        }
        add_cause(row.causes[cause], delta);
    }
    std::vector<Row> out;
    for (auto &[id, row] : by_id)
        out.push_back(std::move(row));
    std::stable_sort(out.begin(), out.end(),
                     [](const Row &a, const Row &b) { return a.total_ns() > b.total_ns(); });
    return out;
}

ShownRows cut_rows(std::vector<Row> rows, size_t max_rows) {
    ShownRows shown;
    for (size_t i = 0; i < rows.size(); ++i) {
        add_causes(shown.totals, rows[i]);
        if (i >= max_rows) {
            add_causes(shown.left_out, rows[i]);
            ++shown.rows_left_out;
        }
    }
    if (rows.size() > max_rows)
        rows.resize(max_rows);
    shown.rows = std::move(rows);
    return shown;
}

void json_totals(const ShownRows &shown, nlohmann::json &out) {
    out["total"] = {{"stall_ns", shown.totals.total_ns()},
                    {"causes", causes_json(shown.totals.causes)}};
    out["left_out_total"] = {{"rows", shown.rows_left_out},
                             {"stall_ns", shown.left_out.total_ns()},
                             {"causes", causes_json(shown.left_out.causes)}};
}

std::string left_out_line(const ShownRows &shown, Grouping grouping) {
    if (shown.rows_left_out == 0)
        return "";
    const bool one = shown.rows_left_out == 1;
    const char *what = grouping == Grouping::Cgroup   ? (one ? "cgroup" : "cgroups")
                       : grouping == Grouping::Thread ? (one ? "thread" : "threads")
                                                      : (one ? "process" : "processes");
    return fmt::format("{} more {} ({:.1f} ms of stalls) not shown: -r {}", shown.rows_left_out,
                       what, shown.left_out.total_ns() / 1e6, shown.rows.size());
}

std::string header(Grouping grouping) {
    std::string h =
        grouping == Grouping::Cgroup
            ? fmt::format("{:<24}", "CGROUP")
            : fmt::format("{:<7} {:<16}", grouping == Grouping::Thread ? "TID" : "PID", "COMM");
    h += fmt::format(" {:>6} {:>10}", "STALL%", "TOTAL(ms)");
    for (uint32_t cause = 0; cause < MEMSTALL_CAUSES; ++cause)
        h += fmt::format(" {:>8}", cause_column(cause));
    if (grouping == Grouping::Process)
        h += "  COMMAND";
    return h;
}

std::string line(const Row &row, double interval_s, Grouping grouping) {
    const bool container = row.workload.kind == "container" || row.workload.kind == "pod";
    std::string l = grouping == Grouping::Cgroup
                        ? fmt::format("{:<24}", container ? row.workload.display() : row.name)
                        : fmt::format("{:<7} {:<16}", row.id, row.name);
    l += fmt::format(" {:>6.1f} {:>10.1f}", share_percent(row.total_ns(), interval_s),
                     row.total_ns() / 1e6);
    for (const auto &c : row.causes)
        l += fmt::format(" {:>8.1f}", c.ns / 1e6);
    if (grouping == Grouping::Process && !row.title.empty())
        l += "  " + row.title;
    return l;
}

nlohmann::json json_row(const Row &row, double interval_s, Grouping grouping) {
    nlohmann::json j;
    if (grouping != Grouping::Cgroup) {
        j[grouping == Grouping::Thread ? "tid" : "pid"] = row.id;
        j["comm"] = row.name;
        if (grouping == Grouping::Process)
            j["title"] = row.title.empty() ? nlohmann::json(nullptr) : nlohmann::json(row.title);
    } else {
        j["cgroup_id"] = row.id;
        j["cgroup"] = row.name;
        j["workload"] = workload_json(row.workload);
    }
    j["stall_ns"] = row.total_ns();
    j["stall_pct"] = share_percent(row.total_ns(), interval_s);
    j["causes"] = causes_json(row.causes, true);
    return j;
}

std::vector<StackRow> most_stalled_stacks(std::vector<StackRow> rows, size_t per_cause) {
    std::stable_sort(rows.begin(), rows.end(), [](const StackRow &a, const StackRow &b) {
        return a.second.total_ns > b.second.total_ns;
    });
    std::vector<StackRow> shown;
    for (uint32_t cause = 0; cause < MEMSTALL_CAUSES; ++cause) {
        size_t of_cause = 0;
        for (const auto &row : rows)
            if (row.first.cause == cause && of_cause < per_cause) {
                shown.push_back(row);
                ++of_cause;
            }
    }
    return shown;
}

std::string stack_comm(const memstall_stack_value &v) {
    return std::string(v.comm, strnlen(v.comm, sizeof(v.comm)));
}

std::string stacks_text(const std::vector<StallStack> &stacks) {
    std::string out = "\nThe most stalled stacks per cause since start (kernel, then user):\n";
    for (const auto &s : stacks) {
        const auto &[key, value] = s.row;
        out += fmt::format("\n{}: {} stalls, {:.1f} ms, pid {} ({})\n", cause_name(key.cause),
                           value.stalls, value.total_ns / 1e6, key.pid, stack_comm(value));
        for (const auto &frame : s.kernel)
            out += fmt::format("    {}\n", frame);
        out += "    --\n";
        for (const auto &frame : s.user)
            out += fmt::format("    {}\n", frame);
    }
    return out;
}

nlohmann::json stacks_json(const std::vector<StallStack> &stacks) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto &s : stacks) {
        const auto &[key, value] = s.row;
        list.push_back({{"cause", cause_name(key.cause)},
                        {"pid", key.pid},
                        {"comm", stack_comm(value)},
                        {"stalls", value.stalls},
                        {"ns", value.total_ns},
                        {"kernel_stack", s.kernel},
                        {"user_stack", s.user}});
    }
    return {{"stacks", list}};
}

} // namespace memlat::memstall

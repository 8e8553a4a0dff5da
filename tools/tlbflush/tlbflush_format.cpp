#include "tlbflush_format.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <iterator>
#include <numeric>
#include <tuple>

#include "cli/histogram.h"
#include "cli/output.h"

namespace memlat::tlbflush {

namespace {

// The kernel writes ~0 for a flush of the whole address space.
constexpr uint64_t full_flush = ~0ull;

std::string comm_of(const tlbflush_event &e) {
    return std::string(e.comm, strnlen(e.comm, sizeof(e.comm)));
}

template <typename... Args>
void append(std::string &text, fmt::format_string<Args...> format, Args &&...args) {
    fmt::format_to(std::back_inserter(text), format, std::forward<Args>(args)...);
}

} // namespace

tlbflush_count minus(const tlbflush_count &a, const tlbflush_count &b) {
    return {a.count - b.count, a.full - b.full, a.pages - b.pages, 0};
}

tlbflush_count plus(const tlbflush_count &a, const tlbflush_count &b) {
    return {a.count + b.count, a.full + b.full, a.pages + b.pages, 0};
}

CountTable counts_since(const Snapshot &now, const Snapshot &before, const ViewFormat &f) {
    CountTable t;
    t.ipis_counted = !now.flush_ipis.empty();
    for (const auto &[key, c] : now.counts) {
        auto it = before.counts.find(key);
        auto d = it == before.counts.end() ? c : minus(c, it->second);
        if (d.count == 0)
            continue;
        auto comm = now.comms.find(key);
        t.rows.push_back({key, d, comm == now.comms.end() ? std::string() : comm->second});
        if (!t.ipis_counted &&
            (key.reason == f.remote_shootdown || key.reason == f.remote_wrong_cpu))
            t.received[key.cpu] += d.count;
    }
    if (f.per_process) {
        std::map<CountKey, tlbflush_count> in_rows;
        for (const auto &r : t.rows) {
            auto &sum = in_rows[CountKey{0, r.key.cpu, r.key.reason}];
            sum = plus(sum, r.c);
        }
        for (const auto &[key, c] : now.cpu_totals) {
            auto it = before.cpu_totals.find(key);
            const auto d = it == before.cpu_totals.end() ? c : minus(c, it->second);
            if (d.count == 0)
                continue;
            t.totals.push_back({key, d, {}});
            if (const auto &shown = in_rows[key]; d.count > shown.count)
                t.left_out.push_back({key, minus(d, shown), {}});
        }
    }
    // --reason without a remote reason asks for none of them.
    const bool remote_selected =
        ((f.reason_mask >> f.remote_shootdown) & 1) || ((f.reason_mask >> f.remote_wrong_cpu) & 1);
    const auto selected = [&f](size_t cpu) { return cpu < f.cpus.size() && f.cpus[cpu]; };
    for (size_t cpu = 0; t.ipis_counted && remote_selected && cpu < now.flush_ipis.size(); ++cpu)
        if (uint64_t n =
                now.flush_ipis[cpu] - (before.flush_ipis.empty() ? 0 : before.flush_ipis[cpu]);
            n != 0 || selected(cpu))
            t.received[static_cast<uint32_t>(cpu)] = n;
    // The CPUs -c selected that traced no remote flush: 0, said.
    for (size_t cpu = 0; !t.ipis_counted && remote_selected && cpu < f.cpus.size(); ++cpu)
        if (selected(cpu))
            t.received.try_emplace(static_cast<uint32_t>(cpu), 0);
    // The requests come from the senders' remote_send_ipi and name the victims: shown with the
    // victims' reasons or with the senders'.
    const int64_t send_ipi = f.remote_send_ipi;
    t.requests_shown =
        remote_selected || (send_ipi >= 0 && send_ipi < 32 && ((f.reason_mask >> send_ipi) & 1));
    for (size_t cpu = 0; t.requests_shown && cpu < now.flush_requests.size(); ++cpu)
        if (uint64_t n = now.flush_requests[cpu] -
                         (before.flush_requests.empty() ? 0 : before.flush_requests[cpu]))
            t.requested[static_cast<uint32_t>(cpu)] = n;
    if (t.requests_shown)
        t.requests_unknown = now.request_sources[TLBFLUSH_TARGETS_UNKNOWN] -
                             before.request_sources[TLBFLUSH_TARGETS_UNKNOWN];
    if (f.per_process)
        std::stable_sort(t.rows.begin(), t.rows.end(), [](const CountRow &a, const CountRow &b) {
            return a.c.count > b.c.count;
        });
    return t;
}

FlushPath observed_path(FlushPath expected, uint64_t requests, uint64_t ipis) {
    if (ipis == 0)
        return requests >= hypervisor_path_min_requests ? FlushPath::Hypervisor : expected;
    // IPIs were handled: the hypervisor, where it can flush, does not do all of them.
    return expected == FlushPath::Hypervisor || expected == FlushPath::Mixed ? FlushPath::Mixed
                                                                             : FlushPath::Ipi;
}

FlushPath path_seen(FlushPath expected, std::span<const uint64_t> flush_requests,
                    std::span<const uint64_t> flush_ipis, uint64_t remote_flushes) {
    const uint64_t requests =
        std::accumulate(flush_requests.begin(), flush_requests.end(), uint64_t{0});
    if (flush_ipis.empty()) {
        // Without the csd tracepoints (before 6.3, or without CAP_SYSLOG to know the flush
        // callback) tlb_flush's remote reasons stand in for the IPIs, and they are not only
        // IPIs: a CPU that switches to an mm catching up on a flush it missed reports
        // remote_shootdown too (6.18 on PVM: 6 such against 1,378 requests and no IPI; also
        // text_poke's temporary mm). A few of them prove no IPI was handled: under a tenth of
        // the requests they leave the path to what the machine says.
        if (remote_flushes != 0 && remote_flushes * 10 < requests)
            return expected;
        return observed_path(expected, requests, remote_flushes);
    }
    return observed_path(expected, requests,
                         std::accumulate(flush_ipis.begin(), flush_ipis.end(), uint64_t{0}));
}

FlushPath path_of(const Snapshot &now, const ViewFormat &f, FlushPath expected) {
    if (!f.path_evidence)
        return expected;
    uint64_t remote_flushes = 0; // without the csd tracepoints: what tlb_flush saw on victims
    if (now.flush_ipis.empty())
        for (const auto &[key, c] : now.counts)
            if (key.reason == f.remote_shootdown || key.reason == f.remote_wrong_cpu)
                remote_flushes += c.count;
    return path_seen(expected, now.flush_requests, now.flush_ipis, remote_flushes);
}

std::vector<CulpritRow> culprits_since(const Snapshot &now, const Snapshot &before) {
    auto since = [](const std::map<CulpritKey, uint64_t> &from,
                    const std::map<CulpritKey, uint64_t> &base, const CulpritKey &key) {
        auto n = from.find(key);
        auto b = base.find(key);
        return (n == from.end() ? 0 : n->second) - (b == base.end() ? 0 : b->second);
    };
    std::vector<CulpritRow> rows;
    for (const auto &[key, comm] : now.culprit_comms) {
        const uint64_t ipis = since(now.culprits, before.culprits, key);
        const uint64_t requests = since(now.culprit_requests, before.culprit_requests, key);
        if (ipis != 0 || requests != 0)
            rows.push_back({.key = key, .comm = comm, .count = ipis, .requests = requests});
    }
    std::stable_sort(rows.begin(), rows.end(), [](const CulpritRow &a, const CulpritRow &b) {
        return std::tie(a.requests, a.count) > std::tie(b.requests, b.count);
    });
    return rows;
}

std::vector<LatencyRow> latency_since(const Snapshot &now, const Snapshot &before) {
    auto diff = [](const std::vector<Hist> &a, const std::vector<Hist> &b, size_t cpu) {
        return b.empty() ? a[cpu] : hist_since(a[cpu], b[cpu]);
    };
    std::vector<LatencyRow> rows;
    for (size_t cpu = 0; cpu < now.ipi_counts.size(); ++cpu) {
        const auto &n = now.ipi_counts[cpu];
        const tlbflush_ipi_counts b =
            before.ipi_counts.empty() ? tlbflush_ipi_counts{} : before.ipi_counts[cpu];
        const tlbflush_ipi_counts d{n.handler_runs - b.handler_runs, n.shared_runs - b.shared_runs,
                                    n.callbacks - b.callbacks, n.without_ipi - b.without_ipi};
        if (d.handler_runs == 0 && d.without_ipi == 0)
            continue;
        rows.push_back({.cpu = static_cast<uint32_t>(cpu),
                        .ipis = d,
                        .handler_ns = diff(now.handler_ns, before.handler_ns, cpu),
                        .handler_us = diff(now.handler_us, before.handler_us, cpu),
                        .callback_ns = diff(now.callback_ns, before.callback_ns, cpu)});
    }
    return rows;
}

std::string counts_text(const CountTable &counts, const ViewFormat &f) {
    std::string text;
    if (f.per_process)
        append(text, "{:<8} {:<16} ", "PID", "COMM");
    append(text, "{:<4} {:<22} {:>10} {:>10} {:>12}\n", "CPU", "REASON", "COUNT", "FULL", "PAGES");
    for (const auto &r : counts.rows) {
        if (f.per_process)
            append(text, "{:<8} {:<16} ", r.key.pid, r.comm);
        append(text, "{:<4} {:<22} {:>10} {:>10} {:>12}\n", r.key.cpu, f.reason_name(r.key.reason),
               r.c.count, r.c.full, r.c.pages);
    }
    // -P: what the table had no room for, still counted on its CPU (it is in the totals).
    for (const auto &r : counts.left_out)
        append(text, "{:<8} {:<16} {:<4} {:<22} {:>10} {:>10} {:>12}\n", "-", "[table full]",
               r.key.cpu, f.reason_name(r.key.reason), r.c.count, r.c.full, r.c.pages);
    if (!counts.received.empty()) {
        text += counts.ipis_counted
                    ? "\nRemote shootdowns received (flush IPIs handled: the /proc/interrupts "
                      "TLB row):\n"
                    : "\nRemote flushes traced (remote_shootdown + remote_wrong_cpu; without "
                      "the csd tracepoints of Linux 6.3+ the IPIs that found a CPU lazy or up "
                      "to date are not seen: fewer than the /proc/interrupts TLB row):\n";
        for (const auto &[cpu, n] : counts.received)
            append(text, "  CPU {:<4} {:>10}\n", cpu, n);
    }
    if (!counts.requested.empty() || counts.requests_unknown != 0) {
        const char *delivered =
            counts.path == FlushPath::Hypervisor ? "by the hypervisor, without IPIs"
            : counts.path == FlushPath::Mixed    ? "by shootdown IPI or by the hypervisor"
            : counts.path == FlushPath::Ipi      ? "by shootdown IPI"
                                                 : "by IPI or hypervisor: not seen yet";
        append(text,
               "\nRemote flush requests naming each CPU (sent by the other CPUs, remote_send_ipi; "
               "delivered here {}):\n",
               delivered);
        for (const auto &[cpu, n] : counts.requested)
            append(text, "  CPU {:<4} {:>10}\n", cpu, n);
        if (counts.requests_unknown != 0)
            append(text, "  {:<8} {:>10}  (requests whose CPU mask could not be read)\n", "unknown",
                   counts.requests_unknown);
    }
    return text;
}

void counts_json(const CountTable &counts, const ViewFormat &f, nlohmann::json &out) {
    using nlohmann::json;
    auto rows_json = [&](const std::vector<CountRow> &rows, bool with_process) {
        json list = json::array();
        for (const auto &r : rows) {
            json row = {{"cpu", r.key.cpu},          {"reason", f.reason_name(r.key.reason)},
                        {"reason_id", r.key.reason}, {"count", r.c.count},
                        {"full", r.c.full},          {"pages", r.c.pages}};
            if (with_process) {
                row["pid"] = r.key.pid;
                row["comm"] = r.comm;
            }
            list.push_back(row);
        }
        return list;
    };
    out["counts"] = rows_json(counts.rows, f.per_process);
    if (f.per_process) {
        // The rows plus left_out add up to totals, by CPU and reason.
        out["totals"] = rows_json(counts.totals, false);
        out["left_out"] = rows_json(counts.left_out, false);
    }
    json received = json::object();
    for (const auto &[cpu, n] : counts.received)
        received[std::to_string(cpu)] = n;
    out["remote_shootdowns"] = counts.ipis_counted ? received : json(nullptr);
    if (!counts.ipis_counted)
        out["remote_flushes_traced"] = received;
    json requested = json::object();
    for (const auto &[cpu, n] : counts.requested)
        requested[std::to_string(cpu)] = n;
    out["flush_requests"] = counts.requests_shown ? requested : json(nullptr);
    out["flush_requests_unknown_target"] = counts.requests_unknown;
    out["remote_flush_path"] = path_name(counts.path);
}

std::string culprits_text(const std::vector<CulpritRow> &rows, const ViewFormat &f) {
    auto target = [](uint32_t cpu) {
        return cpu == TLBFLUSH_ANY_CPU ? std::string("any") : std::to_string(cpu);
    };
    std::string text = f.culprit_ipis_counted
                           ? "\nRemote flush requests and shootdown IPIs by sender:\n"
                           : "\nRemote flush requests by sender (the IPIs each sent are not "
                             "known without the csd tracepoints of Linux 6.3+):\n";
    append(text, "{:<8} {:<8} {:<16} {:>10} {:>10} {:>10}\n", "PID", "TID", "COMM", "TARGET_CPU",
           "REQUESTS", "IPIS");
    for (const auto &r : rows) {
        append(text, "{:<8} {:<8} {:<16} {:>10} {:>10} {:>10}\n", r.key.pid, r.key.tid, r.comm,
               target(r.key.cpu), r.requests,
               f.culprit_ipis_counted ? std::to_string(r.count) : std::string("-"));
        if (!f.stacks)
            continue;
        for (const auto &frame : r.kernel_stack)
            append(text, "    {}\n", frame);
        text += "    --\n";
        for (const auto &frame : r.user_stack)
            append(text, "    {}\n", frame);
        text += "\n";
    }
    return text;
}

void culprits_json(const std::vector<CulpritRow> &rows, const ViewFormat &f, nlohmann::json &out) {
    using nlohmann::json;
    json list = json::array();
    for (const auto &r : rows) {
        json row = {{"pid", r.key.pid},
                    {"tid", r.key.tid},
                    {"comm", r.comm},
                    {"target_cpu", r.key.cpu == TLBFLUSH_ANY_CPU ? json(nullptr) : json(r.key.cpu)},
                    {"requests", r.requests},
                    {"count", f.culprit_ipis_counted ? json(r.count) : json(nullptr)}};
        if (f.stacks) {
            row["kernel_stack"] = r.kernel_stack;
            row["user_stack"] = r.user_stack;
        }
        list.push_back(row);
    }
    out["culprits"] = list;
}

std::string latency_text(const std::vector<LatencyRow> &rows, const ViewFormat &f) {
    std::string text;
    for (const auto &r : rows) {
        const auto &d = r.ipis;
        append(text,
               "\nCPU {}: IPI handler, entry to exit, in the {} runs that flushed the TLB{}\n",
               r.cpu, d.handler_runs,
               d.shared_runs != 0
                   ? fmt::format(" ({} with several flushes, counted once)", d.shared_runs)
                   : "");
        text += render_log2_hist(r.handler_ns, "nsecs");
        if (f.callbacks_timed && d.callbacks != 0) {
            append(text, "\nCPU {}: flush_tlb_func callback, inside those runs ({} callbacks)\n",
                   r.cpu, d.callbacks);
            text += render_log2_hist(r.callback_ns, "nsecs");
        }
        if (d.without_ipi != 0 || f.callbacks_timed)
            append(text,
                   "\nCPU {}: TLB flush {} without an IPI handler (idle loop): {}, in no "
                   "histogram\n",
                   r.cpu, f.callbacks_timed ? "callbacks run" : "remote flushes", d.without_ipi);
    }
    return text;
}

void latency_json(const std::vector<LatencyRow> &rows, const ViewFormat &f, nlohmann::json &out) {
    using nlohmann::json;
    json handler = json::object(), callback = json::object(), legacy = json::object();
    json counts = json::object();
    for (const auto &r : rows) {
        const auto &d = r.ipis;
        const std::string key = std::to_string(r.cpu);
        handler[key] = log2_hist_json(r.handler_ns, "nsecs");
        legacy[key] = log2_hist_json(r.handler_us, "usecs");
        if (f.callbacks_timed)
            callback[key] = log2_hist_json(r.callback_ns, "nsecs");
        counts[key] = {{"handler_runs", d.handler_runs},
                       {"shared_runs", d.shared_runs},
                       {"callbacks", f.callbacks_timed ? json(d.callbacks) : json(nullptr)},
                       {"without_ipi", d.without_ipi}};
    }
    out["handler_latency"] = handler;
    out["callback_latency"] = f.callbacks_timed ? callback : json(nullptr);
    out["tlb_ipis"] = counts;
    // Earlier versions' "latency" (usecs) timed only the flush callback; it is now the
    // handler time, in its old unit, for readers of that key.
    out["latency"] = legacy;
}

std::string interval_text(const Interval &interval, const ViewFormat &f) {
    std::string text;
    if (!interval.time.empty())
        append(text, "\n{}\n", interval.time);
    text += counts_text(interval.counts, f);
    if (interval.culprits)
        text += culprits_text(*interval.culprits, f);
    if (interval.latency) {
        text += latency_text(*interval.latency, f);
        // -L with nothing to show still answers: no CPU ran a flush IPI handler, and why
        // where the machine says (a hypervisor that flushes without IPIs).
        if (interval.latency->empty())
            text += interval.counts.path == FlushPath::Hypervisor
                        ? "\nIPI handler latency (-L): no flush IPI was handled: remote TLB "
                          "flushes on this machine go through the hypervisor, without IPIs\n"
                        : "\nIPI handler latency (-L): no CPU selected ran a flush IPI "
                          "handler\n";
    }
    if (interval.lost_events != 0)
        append(text, "\nLost {} trace events: the {} was full.\n", interval.lost_events,
               interval.lost_in);
    if (interval.table_full != 0)
        append(text, "\n{} events not counted: a BPF hash table was full.\n", interval.table_full);
    if (interval.stacks_lost.value_or(0) != 0)
        append(text, "\n{} stacks lost: no room in the stack map (--max-entries).\n",
               *interval.stacks_lost);
    return text;
}

nlohmann::json interval_json(const Interval &interval, const ViewFormat &f) {
    nlohmann::json out = nlohmann::json::object();
    out["time"] = interval.time;
    counts_json(interval.counts, f, out);
    if (interval.culprits)
        culprits_json(*interval.culprits, f, out);
    if (interval.latency)
        latency_json(*interval.latency, f, out);
    out["lost_events"] = interval.lost_events;
    out["table_full"] = interval.table_full;
    if (interval.stacks_lost)
        out["stacks_lost"] = *interval.stacks_lost;
    out[skipped_runs_field] = interval.skipped_runs;
    return out;
}

std::string event_header(bool timestamp) {
    return fmt::format("{}{:<12} {:<4} {:<8} {:<16} {:<22} {:>8}\n",
                       timestamp ? fmt::format("{:<9}", "TIME") : "", "TIME(s)", "CPU", "PID",
                       "COMM", "REASON", "PAGES");
}

std::string event_line(const tlbflush_event &e, double time_s, std::string_view reason,
                       std::string_view wall_time) {
    const std::string pages = e.pages == full_flush ? "full" : std::to_string(e.pages);
    return fmt::format("{}{:<12.6f} {:<4} {:<8} {:<16} {:<22} {:>8}\n",
                       wall_time.empty() ? "" : fmt::format("{:<9}", wall_time), time_s, e.cpu,
                       e.pid, comm_of(e), reason, pages);
}

nlohmann::json event_json(const tlbflush_event &e, double time_s, std::string_view reason,
                          std::string_view wall_time) {
    nlohmann::json line = {
        {"time_s", time_s},
        {"cpu", e.cpu},
        {"pid", e.pid},
        {"tid", e.tid},
        {"comm", comm_of(e)},
        {"reason", reason},
        {"pages", e.pages == full_flush ? nlohmann::json(nullptr) : nlohmann::json(e.pages)},
        // A count, as in the count rows: 1 for a full flush, so that events add up to rows.
        {"full", e.pages == full_flush ? 1 : 0}};
    if (!wall_time.empty())
        line["wall_time"] = wall_time;
    return line;
}

} // namespace memlat::tlbflush

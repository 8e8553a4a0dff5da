// oomwhy's reports, apart from the tool so the unit tests can check them: the report as text,
// as BCC's oomkill line and as JSON, from what oomwhy_analysis.h found.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/output.h"
#include "kernel/gfp.h"
#include "kernel/workloads.h"
#include "oomwhy.h"
#include "oomwhy_analysis.h"

namespace memlat::oomwhy {

// Everything a report shows, names resolved.
struct Report {
    const oomwhy_kill &kill;
    Aftermath after;
    std::function<std::string(uint64_t)> cgroup_path;  // "" when unknown
    std::function<Workload(uint64_t)> cgroup_workload; // what ran there (kernel/workloads.h)
    std::string time;                                  // HH:MM:SS of the kill
    std::string loadavg;                               // /proc/loadavg's first five fields
    // The processes' titles (/proc/PID/cmdline) read at the kill; "" when unreadable (the
    // victim's memory may be gone already).
    std::string victim_title, trigger_title;
    uint64_t page_kb = 4;
    uint64_t global_pages = 0;      // MemTotal + SwapTotal in pages: a global OOM's domain
    uint64_t constrained_pages = 0; // the allowed nodes' MemTotal + SwapTotal (cpuset, policy)
    const LeadUpStalls *stalls = nullptr; // memstall's history (--lead-up), when kept
};

// The process id BCC's line gives (the thread-group id), where the record has it.
uint32_t victim_process(const oomwhy_kill &k);

// The OOM domain's size in pages, as BCC's oomkill prints it (oc->totalpages): the limit that
// fired for a memory cgroup, the host's memory and swap for a global OOM; 0 when unknown.
uint64_t domain_pages(const Report &r);

// BCC's oomkill line: `HH:MM:SS Triggered by PID T ("comm"), OOM kill of PID V ("comm"),
// N pages, loadavg: ...`.
std::string oomkill_line(const Report &r);
// The whole report: the oomkill line, then indented lines on the constraint, the victim, the
// trigger and its lead-up, the cgroup levels and what happened after.
std::string report_text(const Report &r, const GfpNames &gfp);
// The kinds of oomwhy's events, in their lines' "type": a kill's report and a later step of
// the OOM reaper for its victim.
inline constexpr LineType kill_line{"kill"};
inline constexpr LineType reaper_line{"reaper"};

nlohmann::json report_json(const Report &r, const GfpNames &gfp);

} // namespace memlat::oomwhy

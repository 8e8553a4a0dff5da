// What user space reads from the kernel's types, in the run's one BTF (kernel_btf()): enum
// names and the prototypes of tracepoints.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memlat {

// Names of the values of an enum in the run's BTF (kernel_btf()), with `prefix` removed and
// lower-cased: enum tlb_flush_reason, "TLB_" -> {0: "flush_on_task_switch", ...}. Values
// whose names start with "NR_" are skipped. Throws RuntimeError when there is no BTF or no
// such enum.
std::map<int64_t, std::string> kernel_enum_names(std::string_view enum_name,
                                                 std::string_view prefix);

// Whether the kernel's struct `name` (in the running kernel's BTF) has the member `member`:
// task_struct's in_memstall (PSI, CONFIG_PSI, Linux 4.20) and in_thrashing (delay accounting,
// CONFIG_TASK_DELAY_ACCT, 6.1), which memstall reads. False without the kernel's BTF.
bool kernel_struct_has(std::string_view name, std::string_view member);

// The offset of a per-CPU variable in the kernel's per-CPU section, from the run's BTF
// (DATASEC .data..percpu, which pahole writes for per-CPU variables): two such offsets give
// the distance between the variables on any CPU. nullopt when the BTF has no such variable
// (BTF embedded for CO-RE keeps no variables; pahole 1.18-1.21 skipped them on 5.10).
std::optional<uint32_t> percpu_variable_offset(std::string_view name);

// The parameters of a raw tracepoint as the running kernel's BTF declares them (typedef
// btf_trace_NAME, without its leading void *__data): "struct compact_control *", "long
// unsigned int", ... Empty when the kernel's BTF cannot be read or has no such tracepoint.
std::vector<std::string> tracepoint_parameters(std::string_view tracepoint);

// One parameter of a raw tracepoint's prototype, typedefs and qualifiers resolved: what kind
// of type it is, and the type's name ("long unsigned int", "migrate_mode"; "" for pointers).
struct TracepointParameter {
    enum class Kind { Pointer, Int, Enum, Other };
    Kind kind = Kind::Other;
    std::string type_name;
};

// Every parameter of btf_trace_NAME, the leading void *__data included; nullopt with `why`
// when the BTF cannot be read or declares no such tracepoint.
std::optional<std::vector<TracepointParameter>> tracepoint_prototype(std::string_view tracepoint,
                                                                     std::string &why);

// Whether mm_vmscan_{direct,memcg,memcg_softlimit}_reclaim_begin (`tracepoint`) pass the gfp
// flags before the order: (int order, gfp_t gfp_flags) before Linux 7.x, (gfp_t gfp_flags, int
// order, struct mem_cgroup *) on 7.3. tp_btf and raw_tp see the arguments by position only.
// nullopt, with `why`, when the BTF has no prototype or one of neither shape.
std::optional<bool> reclaim_begin_gfp_first(std::string_view tracepoint, std::string &why);
// The position of writeback:balance_dirty_pages's pause among its arguments (tp_btf, raw_tp):
// the second to last of 12 up to 5.17, of 8 from 5.18 (struct dirty_throttle_control in place
// of five numbers); nullopt when the BTF has neither prototype.
std::optional<int> dirty_pause_position();
// Why compaction:mm_compaction_begin/end do not pass struct compact_control * first, as Linux
// 6.0+ does (5.10's begin passes zone_start, migrate_pfn, free_pfn, zone_end, sync: tp_btf and
// raw_tp programs that read a compact_control would load and read the wrong arguments); ""
// when they do.
std::string compaction_control_missing();
// Whether oom:mark_victim passes the victim's task (5.10.y and 6.1+) rather than its pid
// (before): tp_btf and raw_tp read the task; `why` says what the prototype is when not.
bool mark_victim_passes_task(std::string &why);
// Whether mmap_lock:mmap_lock_* pass (mm, const char *memcg_path, bool write, ...) as 5.11 to
// 6.12 do (true) or (mm, bool write, ...) as 6.18 and 7.3 do (false): tp_btf and raw_tp read
// `write` by position (kernel_args.bpf.h). nullopt, with `why`, for a prototype of neither shape
// or none.
std::optional<bool> mmap_lock_passes_memcg_path(std::string &why);
// What -v says of it: the order read, or why the classic tracepoints read them by name.
std::string reclaim_begin_order_text(const std::optional<bool> &gfp_first, const std::string &why);

} // namespace memlat

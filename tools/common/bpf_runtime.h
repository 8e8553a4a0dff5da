// What every tool does with libbpf: check the machine, open a skeleton, set its read-only data,
// choose for each probe the first hook the running kernel accepts, load, attach, and own all
// of it until the tool exits.
#pragma once

#include <bpf/libbpf.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "errors.h"

namespace memlat {

// How chatty the loader is: -v prints each hook chosen and why the others were not.
struct Verbosity {
    int level = 0;
    bool on() const { return level > 0; }
};
void verbose(const Verbosity &v, std::string_view line);

// A BPF link, detached when destroyed.
class Link {
  public:
    explicit Link(bpf_link *link) : link_(link) {}
    Link(Link &&other) noexcept : link_(std::exchange(other.link_, nullptr)) {}
    Link &operator=(Link &&other) noexcept;
    Link(const Link &) = delete;
    Link &operator=(const Link &) = delete;
    ~Link();

  private:
    bpf_link *link_;
};

enum class HookKind { TpBtf, RawTp, Tracepoint, Fentry, Kprobe };
std::string_view hook_kind_name(HookKind kind);

// One way to observe something: the BPF programs (by their C function names) that together
// make it up, of one hook kind. `family` groups choices that use the same kernel events
// ("csd", "irq_vectors"); `caveat` says what this choice cannot show, printed with -v. A choice
// with no programs of its own reuses what other probes attach (its label is its family).
// `unavailable`, when set before loading, says why user space already knows this choice cannot
// work here (e.g. a symbol it needs is missing); it is then skipped like a refused one.
struct HookChoice {
    HookKind kind;
    std::vector<std::string> programs;
    std::string family;
    std::string caveat;
    std::string unavailable;
    std::string label() const;
};

// Something a tool observes and the hooks that can observe it, most preferred first. A tool
// names its probes with an enum of its own (`id`) and finds them with find_probe(): code never
// matches labels, which are for people and may change.
struct Probe {
    template <typename Id>
    requires std::is_enum_v<Id> Probe(Id id, std::string name, std::string needs,
                                      std::vector<HookChoice> choices, bool required = true)
        : id(static_cast<int>(id)), name(std::move(name)), needs(std::move(needs)),
          choices(std::move(choices)), required(required) {}

    // A probe nothing looks up (bench/'s empty programs, the shared thread-exit clean-up).
    Probe(std::string name, std::string needs, std::vector<HookChoice> choices,
          bool required = true)
        : id(-1), name(std::move(name)), needs(std::move(needs)), choices(std::move(choices)),
          required(required) {}

    int id;            // the tool's enum value
    std::string name;  // what it observes, e.g. "tlb:tlb_flush"
    std::string needs; // what the kernel needs for it, for the error when nothing attaches
    std::vector<HookChoice> choices;
    bool required = true; // false: the tool works on without it (and says so with -v)

    // Filled in by the loader.
    int chosen = -1;                                  // index into choices; -1: none
    std::vector<std::pair<int, std::string>> refused; // choice index and the kernel's answer
    const HookChoice *choice() const { return chosen < 0 ? nullptr : &choices[chosen]; }
    bool uses_family(std::string_view family) const {
        return choice() != nullptr && choice()->family == family;
    }
};

// The probe a tool planned under `id`; nullptr when its options did not plan it.
template <typename Id>
requires std::is_enum_v<Id>
const Probe *find_probe(const std::vector<Probe> &probes, Id id) {
    for (const auto &probe : probes)
        if (probe.id == static_cast<int>(id))
            return &probe;
    return nullptr;
}

// Whether the capability (CAP_SYSLOG...) is in this process's effective set: root has them
// all; a tool given only some (README "Least privilege") names what a mode lacks.
bool process_has_capability(int capability);

// Checks the common preconditions before anything is opened, so the user gets the real
// reason instead of an errno from deep inside libbpf: privileges, and a BTF for CO-RE (the
// kernel's own, --btf/MEMLAT_BTF or embedded; kernel_btf.h), which it reads.
void check_environment(std::string_view tool);

// Raises RLIMIT_MEMLOCK where the kernel still charges BPF memory to it; kernels since 5.11
// charge memory cgroups instead, and a refusal is harmless there, so it never fails.
void raise_memlock_limit(const Verbosity &v);

// What a kernel needs for a BPF map type or program kind, for messages: "BPF ring buffers
// (Linux 5.8)". Empty for what every supported kernel has.
std::string map_type_requirement(bpf_map_type type, bool internal);
std::string program_requirement(bpf_prog_type type, bpf_attach_type attach);

// The map libbpf names in its last "map 'NAME': failed to create" line, and what it said.
struct RefusedMap {
    std::string name;
    std::string reason;
};
std::optional<RefusedMap> refused_map(const std::vector<std::string> &libbpf_lines);

// The message for a BPF object the kernel refused as a whole: names the map that could not be
// created and the kernel feature it needs (`requirement_of(name)`), else quotes libbpf.
std::string
object_refusal_message(int err, const std::vector<std::string> &libbpf_lines,
                       std::string_view kernel_release,
                       const std::function<std::string(const std::string &map)> &requirement_of);

// The oldest kernel memlat runs on is 5.5: the tools keep their counters in global variables
// (Linux 5.2) that they read through memory-mapped BPF arrays (BPF_F_MMAPABLE, 5.5). Probes
// both; empty when present (or when the probe cannot tell), else the missing feature.
std::string missing_floor_feature();
// Throws the one-line RuntimeError for a kernel below the floor; called before loading.
void check_kernel_floor();

// The non-template core of Loaded<Skel>: open (through `reopen`), configure, load and attach
// with fall-back, retrying with the next choice of a probe whenever the kernel refuses one.
// `reopen` destroys any previous object and returns a freshly opened, configured one; `load`
// loads it (through the skeleton, so that its global-variable pointers get mmap'ed) and
// returns 0 or a negative errno.
std::vector<Link> load_and_attach(const std::function<bpf_object *()> &reopen,
                                  const std::function<int()> &load, std::vector<Probe> &probes,
                                  const Verbosity &v);

// Where libbpf should read the BTF it relocates against (bpf_object_open_opts.
// btf_custom_path): empty when it is the kernel's own, which libbpf finds itself. See
// kernel_btf.h. With a custom path libbpf still loads /sys/kernel/btf/vmlinux when an
// autoloaded program is tp_btf/fentry (BPF_PROG_TYPE_TRACING), LSM or struct_ops, or for a
// typed __ksym extern; without the kernel's BTF the loader autoloads no such program, and
// the tools declare no such extern, so it does not. libbpf's parse of the path is the run's
// own (KernelBtf lends it), not a second one.
std::string libbpf_btf_path();

// A skeleton and the links made from it. Links are declared after the skeleton so they are
// destroyed first: nothing outlives the tool.
template <typename Skel>
class Loaded {
  public:
    // TOOL_bpf__open_opts: the skeleton opened with options, which carry the BTF to use.
    using OpenFn = Skel *(*)(const bpf_object_open_opts *);
    using DestroyFn = void (*)(Skel *);

    // configure(skel) sets rodata and map sizes on a freshly opened skeleton; it may read the
    // probes' current choices (chosen is set to the choice about to be tried).
    Loaded(OpenFn open, DestroyFn destroy, const std::function<void(Skel &)> &configure,
           std::vector<Probe> &probes, const Verbosity &v)
        : skel_(nullptr, destroy) {
        links_ = load_and_attach(
            [&]() -> bpf_object * {
                skel_.reset();
                const std::string btf_path = libbpf_btf_path();
                bpf_object_open_opts options{};
                options.sz = sizeof(options);
                options.btf_custom_path = btf_path.empty() ? nullptr : btf_path.c_str();
                skel_.reset(open(&options));
                if (!skel_)
                    throw RuntimeError("Cannot open the BPF object: " + errno_text(errno));
                configure(*skel_);
                return skel_->obj;
            },
            [&] { return bpf_object__load_skeleton(skel_->skeleton); }, probes, v);
    }
    Skel &operator*() const { return *skel_; }
    Skel *operator->() const { return skel_.get(); }

    static std::string errno_text(int err);

  private:
    std::unique_ptr<Skel, DestroyFn> skel_;
    std::vector<Link> links_;
};

template <typename Skel>
std::string Loaded<Skel>::errno_text(int err) {
    char buf[128];
    libbpf_strerror(err, buf, sizeof(buf));
    return buf;
}

// Reads the events the BPF side emits, through whichever buffer its events map is: a BPF ring
// buffer, or, on kernels before 5.8, a perf event array (one perf buffer per CPU; see
// use_events_map() in kernel_features.h). Both wake user space only in batches (the ring
// buffer from the BPF side, the perf buffer by a wake-up watermark), so poll() also drains on
// a timer: it waits at most `timeout` and then consumes whatever is there.
class EventReader {
  public:
    using Handler = std::function<void(const void *data, size_t size)>;
    // `buffer_bytes`: the ring buffer's size as the tool set it (the perf buffers share as
    // much, split per CPU); `wakeup_bytes`: the batch after which user space is woken.
    EventReader(bpf_map *map, Handler handler, size_t buffer_bytes, size_t wakeup_bytes);
    EventReader(const EventReader &) = delete;
    EventReader &operator=(const EventReader &) = delete;
    ~EventReader();
    // Returns false when interrupted by a signal.
    bool poll(std::chrono::milliseconds timeout);
    void drain();
    // The records lost, given those the BPF side counted itself (a failed ring-buffer
    // reservation, a failed bpf_perf_event_output()). A full perf buffer also reports its
    // losses to user space (PERF_RECORD_LOST); those are the same records the helper failed
    // on, where the kernel tells the helper (not every kernel did), so the larger count is
    // the number lost, never the sum.
    uint64_t lost(uint64_t counted_by_bpf) const;
    // "ring buffer" or "perf buffer", for messages about lost events.
    std::string name() const;
    // How the events travel, for -v: "perf buffers (N pages per CPU, woken every W bytes)".
    std::string describe() const;

    class Buffer; // one implementation per buffer kind

  private:
    std::unique_ptr<Buffer> buffer_;
};

// Names of the values of an enum in the run's BTF (kernel_btf()), with `prefix` removed and
// lower-cased: enum tlb_flush_reason, "TLB_" -> {0: "flush_on_task_switch", ...}. Values
// whose names start with "NR_" are skipped. Throws RuntimeError when there is no BTF or no
// such enum.
std::map<int64_t, std::string> kernel_enum_names(std::string_view enum_name,
                                                 std::string_view prefix);

// Every entry of a BPF hash map, read from user space while the programs keep updating it.
template <typename Key, typename Value>
std::vector<std::pair<Key, Value>> read_hash_map(bpf_map *map) {
    std::vector<std::pair<Key, Value>> entries;
    Key key{}, next{};
    const Key *prev = nullptr;
    while (bpf_map__get_next_key(map, prev, &next, sizeof(Key)) == 0) {
        Value value{};
        // An entry deleted between the two calls is simply not there any more.
        if (bpf_map__lookup_elem(map, &next, sizeof(Key), &value, sizeof(Value), 0) == 0)
            entries.emplace_back(next, value);
        key = next;
        prev = &key;
    }
    return entries;
}

// The parameters of a raw tracepoint as the running kernel's BTF declares them (typedef
// btf_trace_NAME, without its leading void *__data): "struct compact_control *", "long
// unsigned int", ... Empty when the kernel's BTF cannot be read or has no such tracepoint.
std::vector<std::string> tracepoint_parameters(std::string_view tracepoint);

// Number of possible CPUs (what per-CPU BPF data is sized by).
int possible_cpus();

// BPF programs the kernel skipped because another BPF program was running on the same CPU
// (recursion misses), summed over the loaded programs of an object: such events are lost.
uint64_t recursion_misses(bpf_object *obj);

} // namespace memlat

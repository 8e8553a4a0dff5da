// What every tool does with libbpf: check the machine, open a skeleton, set its read-only data,
// choose for each probe the first hook the running kernel accepts (fallback.h decides, this
// carries it out), load, attach, and own all of it until the tool exits.
#pragma once

#include <bpf/libbpf.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/errors.h"
#include "base/files.h"
#include "base/verbosity.h"
#include "kernel/hooks.h"
#include "kernel/tasks.h"

namespace memlat {

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

// Checks the common preconditions before anything is opened, so the user gets the real
// reason instead of an errno from deep inside libbpf: privileges, and a BTF for CO-RE (the
// kernel's own, --btf/MEMLAT_BTF or embedded; kernel/btf.h), which it reads.
void check_environment(std::string_view tool);

// Raises RLIMIT_MEMLOCK where the kernel still charges BPF memory to it; kernels since 5.11
// charge memory cgroups instead, and a refusal is harmless there, so it never fails.
void raise_memlock_limit(const Verbosity &v);

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
// kernel/btf.h. With a custom path libbpf still loads /sys/kernel/btf/vmlinux when an
// autoloaded program is tp_btf/fentry (BPF_PROG_TYPE_TRACING), LSM or struct_ops, or for a
// typed __ksym extern; without the kernel's BTF the loader autoloads no such program, and
// the tools declare no such extern, so it does not. libbpf's parse of the path is the run's
// own (KernelBtf lends it), not a second one.
std::string libbpf_btf_path();

// Frees the BPF object a skeleton's open inflated from the binary (lib/loading/
// packed_object.cpp): libbpf no longer reads it once the open has returned.
void release_unpacked_bpf_object();

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
                release_unpacked_bpf_object();
                if (!skel_)
                    throw RuntimeError("Cannot open the BPF object: " + error_text(errno));
                configure(*skel_);
                return skel_->obj;
            },
            [&] { return bpf_object__load_skeleton(skel_->skeleton); }, probes, v);
    }
    Skel &operator*() const { return *skel_; }
    Skel *operator->() const { return skel_.get(); }
    // Detaches every program, the maps kept: what they counted is final, and can be read whole.
    void detach() { links_.clear(); }

  private:
    std::unique_ptr<Skel, DestroyFn> skel_;
    std::vector<Link> links_;
};

// Sizes a global array that is the only variable of its own `.bss.NAME` (or `.data.NAME`)
// section, `section` being that section's map, for `count` elements of `element_bytes`:
// libbpf shrinks the mapping and the section's BTF to match (it resizes only the last
// variable of a section). Per-CPU arrays are sized so for the possible CPUs rather than for
// the most a build allows. Before load; throws RuntimeError when libbpf refuses.
void size_global_array(bpf_map *section, size_t count, size_t element_bytes);

// A BPF array map declared with BPF_F_MMAPABLE, mapped read-only into the process once the
// object is loaded: what per-CPU counters that user space reads every interval live in when
// they are sized for the possible CPUs. Its rows are sized with bpf_map__set_max_entries(),
// which leaves the object's BTF alone; size_global_array() makes libbpf copy the object's BTF
// to edit it (cachestat: 128 KiB more at the tool's peak RSS, for a 64 KiB array).
class MappedArray {
  public:
    MappedArray() = default;
    // Maps `map` (loaded); throws RuntimeError when the kernel refuses.
    explicit MappedArray(const bpf_map *map);
    MappedArray(MappedArray &&other) noexcept { *this = std::move(other); }
    MappedArray &operator=(MappedArray &&other) noexcept;
    ~MappedArray();

    // Entry `index` (< the map's max_entries) as a `Value`, the map's value type.
    template <typename Value>
    const Value &at(size_t index) const {
        return *static_cast<const Value *>(
            static_cast<const void *>(static_cast<const char *>(address_) + index * value_bytes_));
    }

  private:
    void *address_ = nullptr;
    size_t length_ = 0;
    size_t value_bytes_ = 0;
};

// Row `cpu` of such an array that the BPF side declares with one row (`one_row`, from the
// skeleton) and size_global_array() sized for every possible CPU.
template <typename Row>
const Row &cpu_row(const Row (&one_row)[1], size_t cpu) {
    return static_cast<const Row *>(static_cast<const void *>(one_row))[cpu];
}

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

// Deletes every entry of a BPF hash or stack-trace map whose keys are `Key`s (entries the
// programs add meanwhile may stay).
template <typename Key>
void clear_map(bpf_map *map) {
    Key key{};
    // Always the first key: the one before it was just deleted.
    while (bpf_map__get_next_key(map, nullptr, &key, sizeof(Key)) == 0)
        if (bpf_map__delete_elem(map, &key, sizeof(Key), 0) != 0)
            break;
}

// Deletes from `map` the entries just read from it (`entries`) whose task, `task_of(key)` (a
// process or thread id), has exited: read now for the last time, they leave room in the table
// for the tasks that live.
template <typename Key, typename Value, typename TaskOf>
void delete_exited_tasks(bpf_map *map, const std::vector<std::pair<Key, Value>> &entries,
                         TaskOf task_of) {
    for (const auto &[key, value] : entries)
        if (task_exited(task_of(key)))
            bpf_map__delete_elem(map, &key, sizeof(key), 0);
}

// BPF programs the kernel skipped because another BPF program was running on the same CPU
// (recursion misses), summed over the loaded programs of an object: such events are lost.
uint64_t recursion_misses(bpf_object *obj);

// Tells on stderr how many program runs the kernel skipped because another BPF program was
// running on the same CPU (bpf_prog_info.recursion_misses): those `what` were not counted.
void report_skipped_runs(std::string_view tool, bpf_object *obj, std::string_view what);

// BPF_ENABLE_STATS (Linux 5.8): the kernel times every BPF program's runs (run_time_ns,
// run_cnt of bpf_prog_info) while the returned descriptor is open, without touching
// kernel.bpf_stats_enabled, which other tools read and set. Every BPF program on the host pays
// two clock reads per run meanwhile. A RuntimeError saying what to do when the kernel refuses
// (it needs CAP_SYS_ADMIN).
OwnedFd enable_bpf_run_stats();

} // namespace memlat

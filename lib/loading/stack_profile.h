// A profile (base/profile.h) of the stacks a tool's BPF side counted: each entry its stack ids
// (a BPF_MAP_TYPE_STACK_TRACE map's), its values, labels and root frames, symbolized here.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "base/profile.h"
#include "loading/stacks.h"

namespace memlat {

class StackProfileBuilder {
  public:
    StackProfileBuilder(StackSymbolizer &symbolizer, std::vector<profile::ValueType> types,
                        size_t default_type);
    // One entry: `roots` (cause, process) outermost first, the kernel and user stack ids
    // (negative: none taken, MEMLAT_STACK_NO_USER: no user stack) of process `pid`.
    void add(std::vector<std::string> roots, int32_t kernel_stack, int32_t user_stack, uint32_t pid,
             std::vector<int64_t> values, std::vector<profile::Label> labels);
    // A chain (a wait and what it waited behind, as off-CPU "chain graphs" draw them): the
    // kernel stack `kernel_stack`, then a frame `link` naming the other thread, then that
    // thread's kernel stack `above` on top (negative: none).
    void add_chain(std::vector<std::string> roots, int32_t kernel_stack, std::string link,
                   int32_t above, std::vector<int64_t> values, std::vector<profile::Label> labels);
    // The profile, for the interval that began at `time_nanos` (Unix time) and lasted
    // `duration_nanos`.
    profile::Profile take(int64_t time_nanos, int64_t duration_nanos);
    // The profile of the interval from `began` to now.
    profile::Profile take(std::chrono::system_clock::time_point began);

  private:
    size_t user_mapping(const ProcessSymbols::Mapping &m);
    // Stack `id`'s kernel frames, innermost first, onto `frames`; a frame saying why there are
    // none when it has none.
    void append_kernel(std::vector<profile::Frame> &frames, int32_t id);

    StackSymbolizer &symbolizer_;
    profile::Profile profile_;
    std::map<std::tuple<std::string, uint64_t, uint64_t, uint64_t>, size_t> user_mappings_;
    std::optional<size_t> kernel_mapping_;
    uint64_t kernel_low_ = UINT64_MAX, kernel_high_ = 0;
};

} // namespace memlat

// Symbolized stacks from a BPF_MAP_TYPE_STACK_TRACE map (bpf_get_stackid()), for the tools'
// stack views: the one reader of stack ids, with kernel_stack_frames() (symbols.h) the one
// filter of kernel frames, and include/memlat/stack.h the depth and ids both sides share.
#pragma once

#include <bpf/libbpf.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loading/symbols.h"

namespace memlat {

class StackSymbolizer {
  public:
    // `stacks`: the map the BPF side's stack ids refer to. Kernel frames are described with
    // `kernel_symbols` when given, else with /proc/kallsyms read on first use (without them,
    // frames are printed as addresses).
    explicit StackSymbolizer(bpf_map *stacks, const KernelSymbols *kernel_symbols = nullptr)
        : stacks_(stacks), given_symbols_(kernel_symbols) {}

    // The kernel frames of stack `id`, innermost first, without the BPF program and the
    // tracepoint machinery that took it: from the tracepoint's caller on.
    std::vector<std::string> kernel(int32_t id);
    // The user frames of stack `id` of process `pid` ("[no user stack]" for a kernel thread).
    std::vector<std::string> user(int32_t id, uint32_t pid);

    // The same with each frame's address (profiles); empty when the stack is lost or there is
    // no user stack.
    std::vector<DescribedFrame> kernel_frames(int32_t id);
    std::vector<DescribedFrame> user_frames(int32_t id, uint32_t pid);
    // Process `pid`'s mappings, read at its first user stack.
    ProcessSymbols &process(uint32_t pid);

  private:
    std::vector<uint64_t> addresses(int32_t id);
    const KernelSymbols *kernel_symbols();

    bpf_map *stacks_;
    const KernelSymbols *given_symbols_;
    std::optional<KernelSymbols> kernel_symbols_;
    bool kernel_symbols_tried_ = false;
    std::map<uint32_t, ProcessSymbols> processes_;
};

// What a row prints for stack `id` that has no frames: "[KINDstack not taken]" (-1),
// "[KINDstack lost: no room in the stack map]" (MEMLAT_STACK_NO_ROOM, MEMLAT_STACK_MAP_FULL),
// else "[KINDstack lost]"; `kind` is "", "kernel " or "user ".
std::string lost_stack_text(std::string_view kind, int32_t id);

// Says on stderr how many stacks the BPF side had no room for (stacks.bpf.h's stacks_lost) in
// its map of `map_entries`, and what makes room; nothing when none was lost.
void note_stacks_lost(const char *tool, uint64_t lost, uint32_t map_entries);

// A tool's stack option without CAP_SYS_PTRACE: says on stderr that other users' user frames
// lose their names (their libraries are read through /proc/PID/root, ptrace's rules).
void note_user_frames_need_ptrace(const char *tool, const char *option);

} // namespace memlat

// The events a tool's BPF side emits, read through a BPF ring buffer or, on kernels before
// 5.8, per-CPU perf buffers (the events map's type says which; use_events_map() in
// kernel/features.h).
#pragma once

#include <bpf/libbpf.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace memlat {

// Reads the events the BPF side emits, through whichever buffer its events map is: a BPF ring
// buffer, or, on kernels before 5.8, a perf event array (one perf buffer per CPU; see
// use_events_map() in kernel/features.h). Both wake user space only in batches (the ring
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

} // namespace memlat

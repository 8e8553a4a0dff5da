#include "loading/events.h"

#include <linux/perf_event.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fmt/format.h>
#include <utility>

#include "base/errors.h"
#include "base/machine.h"
#include "base/parsing.h"

namespace memlat {

// What an EventReader reads from: a BPF ring buffer or per-CPU perf buffers.
class EventReader::Buffer {
  public:
    virtual ~Buffer() = default;
    // Waits at most `timeout_ms` for a wake-up and consumes what arrived: the number of records
    // or a negative errno (-EINTR when a signal came).
    virtual int poll(int timeout_ms) = 0;
    virtual void consume() = 0;
    virtual uint64_t lost() const { return 0; }
    virtual std::string name() const = 0;
    virtual std::string describe() const = 0;
};

namespace {

class RingBufferSource final : public EventReader::Buffer {
  public:
    RingBufferSource(bpf_map *map, EventReader::Handler handler, size_t wakeup_bytes)
        : handler_(std::move(handler)), bytes_(bpf_map__max_entries(map)),
          wakeup_bytes_(wakeup_bytes) {
        rb_.reset(ring_buffer__new(bpf_map__fd(map), dispatch, this, nullptr));
        if (!rb_)
            throw RuntimeError("Cannot set up the ring buffer: " + error_text(errno));
    }
    int poll(int timeout_ms) override { return ring_buffer__poll(rb_.get(), timeout_ms); }
    void consume() override { ring_buffer__consume(rb_.get()); }
    std::string name() const override { return "ring buffer"; }
    std::string describe() const override {
        return fmt::format("a BPF ring buffer ({} KiB, woken every {} bytes)", bytes_ >> 10,
                           wakeup_bytes_);
    }

  private:
    static int dispatch(void *self, void *data, size_t size) {
        static_cast<RingBufferSource *>(self)->handler_(data, size);
        return 0;
    }
    EventReader::Handler handler_;
    size_t bytes_, wakeup_bytes_;
    // Not copyable or movable: libbpf calls back with `this`.
    std::unique_ptr<ring_buffer, decltype(&ring_buffer__free)> rb_{nullptr, ring_buffer__free};
};

// The records of a perf buffer that carries bpf_perf_event_output() data (PERF_SAMPLE_RAW).
struct PerfSampleRecord {
    perf_event_header header;
    uint32_t size; // followed by `size` bytes of data
    const void *data() const { return reinterpret_cast<const char *>(&size) + sizeof(size); }
};
struct PerfLostRecord {
    perf_event_header header;
    uint64_t id;
    uint64_t lost;
};

class PerfBufferSource final : public EventReader::Buffer {
  public:
    PerfBufferSource(bpf_map *map, EventReader::Handler handler, size_t buffer_bytes,
                     size_t wakeup_bytes)
        : handler_(std::move(handler)) {
        const size_t page = static_cast<size_t>(getpagesize());
        pages_ = perf_buffer_pages(buffer_bytes / static_cast<size_t>(possible_cpus()) / page);
        // The watermark must leave room to write while user space wakes up.
        wakeup_bytes_ = std::min(wakeup_bytes, pages_ * page / 2);
        perf_event_attr attr{};
        attr.type = PERF_TYPE_SOFTWARE;
        attr.config = PERF_COUNT_SW_BPF_OUTPUT;
        attr.sample_type = PERF_SAMPLE_RAW;
        attr.sample_period = 1;
        // Wake up after a batch of bytes, not after every record.
        attr.watermark = 1;
        attr.wakeup_watermark = static_cast<uint32_t>(std::max<size_t>(wakeup_bytes_, 1));
        pb_.reset(perf_buffer__new_raw(bpf_map__fd(map), pages_, &attr, dispatch, this, nullptr));
        if (!pb_)
            throw RuntimeError("Cannot set up the perf buffers: " + error_text(errno));
    }
    int poll(int timeout_ms) override { return perf_buffer__poll(pb_.get(), timeout_ms); }
    void consume() override { perf_buffer__consume(pb_.get()); }
    uint64_t lost() const override { return lost_; }
    std::string name() const override { return "perf buffer"; }
    std::string describe() const override {
        return fmt::format("perf buffers ({} pages per CPU, woken every {} bytes)", pages_,
                           wakeup_bytes_);
    }

  private:
    // A power of two (perf requires it), at least 8 (32 KiB: on a host with many CPUs the
    // ring buffer's share per CPU would be tiny); MEMLAT_PERF_BUFFER_PAGES overrides it so
    // that the tests can make the buffers overflow.
    static size_t perf_buffer_pages(size_t wanted) {
        constexpr size_t min_pages = 8;
        wanted = std::max(wanted, min_pages);
        if (const char *env = getenv("MEMLAT_PERF_BUFFER_PAGES"))
            wanted = std::max<size_t>(parse_number<size_t>(env, "MEMLAT_PERF_BUFFER_PAGES"), 1);
        size_t pages = 1;
        while (pages * 2 <= wanted)
            pages *= 2;
        return pages;
    }
    static bpf_perf_event_ret dispatch(void *self_ptr, int /*cpu*/, perf_event_header *header) {
        auto *self = static_cast<PerfBufferSource *>(self_ptr);
        if (header->type == PERF_RECORD_SAMPLE) {
            const auto *sample = reinterpret_cast<const PerfSampleRecord *>(header);
            self->handler_(sample->data(), sample->size);
        } else if (header->type == PERF_RECORD_LOST) {
            self->lost_ += reinterpret_cast<const PerfLostRecord *>(header)->lost;
        }
        return LIBBPF_PERF_EVENT_CONT;
    }
    EventReader::Handler handler_;
    // Not copyable or movable: libbpf calls back with `this`.
    std::unique_ptr<perf_buffer, decltype(&perf_buffer__free)> pb_{nullptr, perf_buffer__free};
    size_t pages_ = 0;
    size_t wakeup_bytes_ = 0;
    uint64_t lost_ = 0;
};

} // namespace

EventReader::EventReader(bpf_map *map, Handler handler, size_t buffer_bytes, size_t wakeup_bytes) {
    if (bpf_map__type(map) == BPF_MAP_TYPE_PERF_EVENT_ARRAY)
        buffer_ =
            std::make_unique<PerfBufferSource>(map, std::move(handler), buffer_bytes, wakeup_bytes);
    else
        buffer_ = std::make_unique<RingBufferSource>(map, std::move(handler), wakeup_bytes);
}

EventReader::~EventReader() = default;

bool EventReader::poll(std::chrono::milliseconds timeout) {
    int n = buffer_->poll(static_cast<int>(timeout.count()));
    if (n == -EINTR)
        return false;
    if (n < 0)
        throw RuntimeError("Reading the event buffer failed: " + error_text(-n));
    // The BPF side wakes us only when a batch has built up; take the rest now.
    buffer_->consume();
    return true;
}

void EventReader::drain() {
    buffer_->consume();
}

uint64_t EventReader::lost(uint64_t counted_by_bpf) const {
    return std::max(counted_by_bpf, buffer_->lost());
}

std::string EventReader::name() const {
    return buffer_->name();
}

std::string EventReader::describe() const {
    return buffer_->describe();
}

} // namespace memlat

#include "output.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fmt/format.h>
#include <poll.h>

#include "errors.h"

namespace memlat {

namespace {
volatile sig_atomic_t stop_flag = 0;
void on_stop_signal(int) {
    stop_flag = 1;
}
} // namespace

std::string wall_clock_time() {
    time_t now = time(nullptr);
    tm local{};
    localtime_r(&now, &local);
    char buf[16];
    strftime(buf, sizeof(buf), "%H:%M:%S", &local);
    return buf;
}

namespace {

// Length of the well-formed UTF-8 sequence at the start of `s`, or 0 when its first byte does
// not begin one (RFC 3629: the second byte's range depends on the first, which excludes
// overlong forms, surrogates and values past U+10FFFF).
size_t utf8_sequence_length(std::string_view s) {
    auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
    unsigned char b0 = byte(0);
    if (b0 < 0x80)
        return 1;
    size_t length;
    unsigned char low = 0x80, high = 0xbf;
    if (b0 >= 0xc2 && b0 <= 0xdf) {
        length = 2;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
        length = 3;
        if (b0 == 0xe0)
            low = 0xa0;
        else if (b0 == 0xed)
            high = 0x9f;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
        length = 4;
        if (b0 == 0xf0)
            low = 0x90;
        else if (b0 == 0xf4)
            high = 0x8f;
    } else {
        return 0;
    }
    if (s.size() < length || byte(1) < low || byte(1) > high)
        return 0;
    for (size_t i = 2; i < length; ++i)
        if (byte(i) < 0x80 || byte(i) > 0xbf)
            return 0;
    return length;
}

// Makes every string in `value` valid UTF-8, adding NAME_hex siblings for object members.
void carry_bytes(nlohmann::json &value) {
    if (value.is_array()) {
        for (auto &item : value)
            if (item.is_string()) {
                if (!is_valid_utf8(item.get_ref<const std::string &>()))
                    item = replace_invalid_utf8(item.get_ref<const std::string &>());
            } else {
                carry_bytes(item);
            }
        return;
    }
    if (!value.is_object())
        return;
    std::vector<std::pair<std::string, std::string>> raw; // member name, its bytes
    for (auto &[name, member] : value.items()) {
        if (!member.is_string()) {
            carry_bytes(member);
            continue;
        }
        const auto &text = member.get_ref<const std::string &>();
        if (!is_valid_utf8(text))
            raw.emplace_back(name, text);
    }
    for (auto &[name, bytes] : raw) {
        value[name] = replace_invalid_utf8(bytes);
        value[name + "_hex"] = hex_bytes(bytes);
    }
}

bool has_invalid_utf8(const nlohmann::json &value) {
    if (value.is_string())
        return !is_valid_utf8(value.get_ref<const std::string &>());
    if (value.is_structured())
        for (const auto &item : value)
            if (has_invalid_utf8(item))
                return true;
    return false;
}

} // namespace

bool is_valid_utf8(std::string_view text) {
    while (!text.empty()) {
        size_t n = utf8_sequence_length(text);
        if (n == 0)
            return false;
        text.remove_prefix(n);
    }
    return true;
}

std::string replace_invalid_utf8(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    while (!text.empty()) {
        size_t n = utf8_sequence_length(text);
        if (n == 0) {
            out += "\xEF\xBF\xBD"; // U+FFFD REPLACEMENT CHARACTER
            n = 1;
        } else {
            out.append(text.substr(0, n));
        }
        text.remove_prefix(n);
    }
    return out;
}

std::string hex_bytes(std::string_view text) {
    std::string out;
    out.reserve(text.size() * 2);
    for (unsigned char c : text)
        out += fmt::format("{:02x}", c);
    return out;
}

std::string json_text(const nlohmann::json &object) {
    // The common case (every string valid) is written as is; only a line that would make
    // nlohmann::json throw is copied and mended.
    if (!has_invalid_utf8(object))
        return object.dump();
    nlohmann::json mended = object;
    carry_bytes(mended);
    return mended.dump();
}

void print_json_line(const nlohmann::json &object) {
    fmt::print("{}\n", json_text(object));
}

void flush_output() {
    if (fflush(stdout) == 0 && !ferror(stdout))
        return;
    int err = errno;
    if (err == EPIPE)
        throw OutputClosed();
    throw RuntimeError(fmt::format("cannot write the output: {}", strerror(err)));
}

void install_stop_signals() {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    // SA_RESTART, so that a write blocked on a full pipe (a slow reader) resumes after Ctrl-C
    // instead of failing with EINTR and losing the line and the summary. The waits still
    // return at once: poll() and epoll_wait() are never restarted, whatever SA_RESTART says.
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
}

bool stop_requested() {
    return stop_flag != 0;
}

void announce_tracing(std::string_view what) {
    fmt::print(stderr, "{} Hit Ctrl-C to end.\n", what);
    if (getenv("MEMLAT_READY") != nullptr)
        fmt::print(stderr, "memlat: ready\n");
    fflush(stderr);
}

void sleep_for(std::chrono::milliseconds timeout) {
    poll(nullptr, 0, static_cast<int>(timeout.count()));
}

bool run_until_stopped(const CommonOptions &options,
                       const std::function<void(std::chrono::milliseconds)> &wait,
                       const std::function<void()> &on_interval) {
    using clock = std::chrono::steady_clock;
    using std::chrono::duration_cast;
    using std::chrono::milliseconds;
    const auto start = clock::now();
    const auto end = options.duration > 0
                         ? start + duration_cast<clock::duration>(
                                       std::chrono::duration<double>(options.duration))
                         : clock::time_point::max();
    const auto period =
        duration_cast<clock::duration>(std::chrono::duration<double>(options.interval));
    auto next = options.interval > 0 ? start + period : clock::time_point::max();
    uint64_t printed = 0;
    // Waits are capped so that a missed wakeup can never hold output back for long.
    constexpr milliseconds max_wait(100);
    while (!stop_requested()) {
        auto now = clock::now();
        if (now >= next) {
            on_interval();
            flush_output();
            next += period;
            if (options.count > 0 && ++printed >= options.count)
                return true;
        }
        if (now >= end)
            return false;
        auto until = std::min(next, end);
        auto left = duration_cast<milliseconds>(until - now) + milliseconds(1);
        wait(std::min(left, max_wait));
    }
    return false;
}

bool trace_until_stopped(const CommonOptions &options, EventReader *events,
                         const std::function<void()> &on_interval) {
    auto wait = [events](std::chrono::milliseconds timeout) {
        if (events == nullptr) {
            sleep_for(timeout);
            return;
        }
        events->poll(timeout);
        flush_output();
    };
    bool done = run_until_stopped(options, wait, on_interval);
    if (events != nullptr)
        events->drain();
    return done;
}

void report_skipped_runs(std::string_view tool, bpf_object *obj, std::string_view what) {
    if (uint64_t misses = recursion_misses(obj); misses != 0)
        fmt::print(stderr,
                   "{}: the kernel skipped {} program runs because another BPF program was "
                   "running on the same CPU; those {} are not counted.\n",
                   tool, misses, what);
}

} // namespace memlat

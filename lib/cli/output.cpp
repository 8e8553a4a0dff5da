#include "cli/output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fmt/format.h>

#include "base/errors.h"

namespace memlat {

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

WallStamp wall_stamp() {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    tm utc{};
    gmtime_r(&now.tv_sec, &utc);
    char date[32];
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &utc);
    const long ms = now.tv_nsec / 1'000'000;
    return {fmt::format("{}.{:03}Z", date, ms), int64_t{now.tv_sec} * 1000 + ms};
}

void add_wall_stamp(nlohmann::json &object) {
    WallStamp stamp = wall_stamp();
    object["timestamp"] = std::move(stamp.timestamp);
    object["epoch_ms"] = stamp.epoch_ms;
}

std::string stamped_json_text(LineType type, const nlohmann::json &object) {
    std::string text = json_text(object);
    if (!object.is_object())
        return text;
    std::string added;
    if (!object.contains("type"))
        added = fmt::format(",\"type\":\"{}\"", type.name);
    if (!object.contains("timestamp")) {
        const WallStamp stamp = wall_stamp();
        added +=
            fmt::format(",\"timestamp\":\"{}\",\"epoch_ms\":{}", stamp.timestamp, stamp.epoch_ms);
    }
    if (added.empty())
        return text;
    // Spliced in before the closing brace: the object is not copied for three members.
    text.insert(text.size() - 1, object.empty() ? added.substr(1) : added);
    return text;
}

void print_json_line(LineType type, const nlohmann::json &object) {
    fmt::print("{}\n", stamped_json_text(type, object));
}

void flush_output() {
    if (fflush(stdout) == 0 && !ferror(stdout))
        return;
    int err = errno;
    if (err == EPIPE)
        throw OutputClosed();
    throw RuntimeError(fmt::format("cannot write the output: {}", strerror(err)));
}

OutputFile::OutputFile(const std::string &path, std::string_view option, bool truncate)
    : path_(path),
      fd_(open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0644)) {
    if (fd_.get() < 0)
        throw UsageError(
            fmt::format("{} {}: cannot write there: {}", option, path, strerror(errno)));
}

void OutputFile::truncate() {
    // Only a regular file has contents to drop: a device or a pipe (-o /dev/stdout, a FIFO)
    // is written as it is.
    struct stat st {};
    if (fstat(fd_.get(), &st) == 0 && !S_ISREG(st.st_mode))
        return;
    if (ftruncate(fd_.get(), 0) != 0)
        throw RuntimeError(fmt::format("cannot empty {}: {}", path_, strerror(errno)));
}

void OutputFile::write(std::string_view content) {
    while (!content.empty()) {
        const ssize_t n = ::write(fd_.get(), content.data(), content.size());
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            throw RuntimeError(fmt::format("cannot write {}: {}", path_,
                                           n < 0 ? strerror(errno) : "nothing written"));
        content.remove_prefix(static_cast<size_t>(n));
    }
}

void OutputFile::write_and_close(std::string_view content) {
    write(content);
    if (close(fd_.release()) != 0)
        throw RuntimeError(fmt::format("cannot write {}: {}", path_, strerror(errno)));
}

} // namespace memlat

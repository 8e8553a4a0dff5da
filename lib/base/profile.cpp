#include "base/profile.h"

#include <zlib.h>

#include <fmt/format.h>
#include <map>
#include <tuple>

#include "base/errors.h"

namespace memlat::profile {

namespace {

// A frame's name as one folded frame: ';' would split it, a line break the line.
std::string escaped(std::string name) {
    for (char &c : name)
        if (c == ';')
            c = ':';
        else if (c == '\n' || c == '\r')
            c = ' ';
    return name;
}

std::string frame_name(const Profile &profile, const Frame &frame) {
    std::string name;
    if (!frame.function.empty()) {
        name = frame.function;
    } else if (frame.mapping && *frame.mapping < profile.mappings.size()) {
        const std::string &file = profile.mappings[*frame.mapping].file;
        name = "[" + file.substr(file.rfind('/') + 1) + "]";
    } else {
        name = fmt::format("{:#x}", frame.address);
    }
    name = escaped(std::move(name));
    if (frame.kernel)
        name += "_[k]";
    return name;
}

// Protocol buffers' wire format, as much of it as profile.proto needs: varints (wire type 0)
// and length-delimited fields (2); repeated numbers packed.
class Message {
  public:
    void number(uint32_t field, uint64_t value) {
        if (value == 0)
            return; // proto3: a zero is the default, not written
        tag(field, 0);
        varint(value);
    }
    void signed_number(uint32_t field, int64_t value) {
        number(field, static_cast<uint64_t>(value));
    }
    void boolean(uint32_t field, bool value) { number(field, value ? 1 : 0); }
    void bytes(uint32_t field, std::string_view value) {
        tag(field, 2);
        varint(value.size());
        out_.append(value);
    }
    void message(uint32_t field, const Message &m) { bytes(field, m.out_); }
    void packed(uint32_t field, const std::vector<uint64_t> &values) {
        if (values.empty())
            return;
        Message m;
        for (uint64_t v : values)
            m.varint(v);
        bytes(field, m.out_);
    }
    const std::string &data() const { return out_; }

  private:
    void tag(uint32_t field, uint32_t wire_type) { varint(uint64_t{field} << 3 | wire_type); }
    void varint(uint64_t v) {
        while (v >= 0x80) {
            out_.push_back(static_cast<char>(v | 0x80));
            v >>= 7;
        }
        out_.push_back(static_cast<char>(v));
    }
    std::string out_;
};

// profile.proto's strings are indices in one table whose first entry is "".
class StringTable {
  public:
    StringTable() { index(""); }
    uint64_t index(const std::string &s) {
        auto [it, inserted] = indices_.try_emplace(s, strings_.size());
        if (inserted)
            strings_.push_back(s);
        return it->second;
    }
    const std::vector<std::string> &strings() const { return strings_; }

  private:
    std::map<std::string, uint64_t> indices_;
    std::vector<std::string> strings_;
};

} // namespace

std::string folded(const Profile &profile, size_t value) {
    std::map<std::string, int64_t> stacks;
    for (const Sample &s : profile.samples) {
        if (value >= s.values.size() || s.values[value] == 0)
            continue;
        std::string line;
        for (const std::string &root : s.roots)
            line += (line.empty() ? "" : ";") + escaped(root);
        for (auto f = s.frames.rbegin(); f != s.frames.rend(); ++f)
            line += (line.empty() ? "" : ";") + frame_name(profile, *f);
        stacks[line] += s.values[value];
    }
    std::string out;
    for (const auto &[stack, total] : stacks)
        out += fmt::format("{} {}\n", stack, total);
    return out;
}

std::string encode_pprof(const Profile &profile) {
    StringTable strings;
    Message out;
    auto value_type = [&](const ValueType &t) {
        Message m;
        m.signed_number(1, static_cast<int64_t>(strings.index(t.type)));
        m.signed_number(2, static_cast<int64_t>(strings.index(t.unit)));
        return m;
    };
    for (const ValueType &t : profile.sample_types)
        out.message(1, value_type(t));

    // Locations and functions, each once: ids from 1, as profile.proto wants.
    std::map<std::tuple<uint64_t, std::string, size_t, bool>, uint64_t> locations;
    std::map<std::string, uint64_t> functions;
    Message location_messages, function_messages;
    auto location_id = [&](const Frame &f) {
        const size_t mapping = f.mapping ? *f.mapping + 1 : 0;
        auto [it, inserted] =
            locations.try_emplace({f.address, f.function, mapping, f.kernel}, locations.size() + 1);
        if (!inserted)
            return it->second;
        Message loc;
        loc.number(1, it->second);
        loc.number(2, mapping);
        loc.number(3, f.address);
        if (!f.function.empty()) {
            auto [fn, new_function] = functions.try_emplace(f.function, functions.size() + 1);
            if (new_function) {
                Message function;
                function.number(1, fn->second);
                const auto name = static_cast<int64_t>(strings.index(f.function));
                function.signed_number(2, name);
                function.signed_number(3, name);
                function_messages.message(5, function);
            }
            Message line;
            line.number(1, fn->second);
            loc.message(4, line);
        }
        location_messages.message(4, loc);
        return it->second;
    };

    for (const Sample &s : profile.samples) {
        Message sample;
        std::vector<uint64_t> ids;
        for (const Frame &f : s.frames)
            ids.push_back(location_id(f));
        sample.packed(1, ids);
        std::vector<uint64_t> values;
        for (int64_t v : s.values)
            values.push_back(static_cast<uint64_t>(v));
        sample.packed(2, values);
        for (const Label &l : s.labels) {
            Message label;
            label.signed_number(1, static_cast<int64_t>(strings.index(l.key)));
            if (l.number)
                label.signed_number(3, *l.number);
            else
                label.signed_number(2, static_cast<int64_t>(strings.index(l.text)));
            sample.message(3, label);
        }
        out.message(2, sample);
    }
    for (size_t i = 0; i < profile.mappings.size(); ++i) {
        const Mapping &m = profile.mappings[i];
        Message mapping;
        mapping.number(1, i + 1);
        mapping.number(2, m.start);
        mapping.number(3, m.limit);
        mapping.number(4, m.file_offset);
        mapping.signed_number(5, static_cast<int64_t>(strings.index(m.file)));
        mapping.boolean(7, m.has_functions);
        out.message(3, mapping);
    }
    std::string bytes = out.data() + location_messages.data() + function_messages.data();
    std::vector<uint64_t> comments;
    for (const std::string &c : profile.comments)
        comments.push_back(strings.index(c));
    const uint64_t default_type =
        profile.default_sample_type < profile.sample_types.size()
            ? strings.index(profile.sample_types[profile.default_sample_type].type)
            : 0;
    Message tail;
    for (const std::string &s : strings.strings())
        tail.bytes(6, s);
    tail.signed_number(9, profile.time_nanos);
    tail.signed_number(10, profile.duration_nanos);
    if (!profile.sample_types.empty()) {
        // One event is one stall: the period is 1 of the default type.
        tail.message(11, value_type(profile.sample_types[profile.default_sample_type]));
        tail.signed_number(12, 1);
    }
    tail.packed(13, comments);
    tail.number(14, default_type);
    return bytes + tail.data();
}

std::string gzip(std::string_view data) {
    z_stream z{};
    // windowBits 15 + 16: the gzip wrapper rather than zlib's.
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        throw RuntimeError("cannot compress the profile: zlib's deflateInit2 failed");
    std::string out(deflateBound(&z, data.size()) + 32, '\0');
    z.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(data.data()));
    z.avail_in = static_cast<uInt>(data.size());
    z.next_out = reinterpret_cast<Bytef *>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    const int status = deflate(&z, Z_FINISH);
    out.resize(z.total_out);
    deflateEnd(&z);
    if (status != Z_STREAM_END)
        throw RuntimeError("cannot compress the profile: zlib's deflate did not finish");
    return out;
}

} // namespace memlat::profile

#include <gtest/gtest.h>

#include <zlib.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/profile.h"
#include "loading/symbols.h"

using namespace memlat;

namespace {

profile::Profile two_stacks() {
    profile::Profile p;
    p.sample_types = {{"stalls", "count"}, {"stall_time", "nanoseconds"}};
    p.default_sample_type = 1;
    p.mappings.push_back({0x1000, 0x9000, 0, "/usr/lib/libc.so.6", true});
    p.mappings.push_back({0xffffffff81000000, 0xffffffff82000000, 0, "[kernel.kallsyms]", true});
    profile::Sample a;
    a.roots = {"memcg", "reader-42"};
    a.frames = {{0xffffffff81000010, "try_to_free_mem_cgroup_pages", 1, true},
                {0x1010, "read_pass", 0, false},
                {0x2020, "", 0, false},
                {0x7777, "", std::nullopt, false}};
    a.values = {3, 3000};
    a.labels = {{.key = "cause", .text = "memcg"}, {.key = "pid", .number = 42}};
    profile::Sample b = a; // the same stack again (another stack id): one folded line
    b.values = {1, 500};
    profile::Sample zero = a;
    zero.roots = {"direct", "reader-42"};
    zero.values = {0, 0};
    profile::Sample odd;
    odd.roots = {"other", "a;b-7"};
    odd.frames = {{0x3030, "f;g\nh", 0, false}};
    odd.values = {1, 10};
    p.samples = {a, b, zero, odd};
    return p;
}

// A protobuf message's fields: (field number, varint value or bytes), in order.
struct Field {
    uint32_t number;
    uint64_t varint = 0;
    std::string bytes;
};

uint64_t read_varint(const std::string &data, size_t &at) {
    uint64_t v = 0;
    for (int shift = 0; at < data.size(); shift += 7) {
        const auto byte = static_cast<uint8_t>(data[at++]);
        v |= uint64_t{byte & 0x7fu} << shift;
        if ((byte & 0x80) == 0)
            break;
    }
    return v;
}

std::vector<Field> fields(const std::string &data) {
    std::vector<Field> out;
    size_t at = 0;
    while (at < data.size()) {
        const uint64_t tag = read_varint(data, at);
        Field f{static_cast<uint32_t>(tag >> 3)};
        if ((tag & 7) == 0) {
            f.varint = read_varint(data, at);
        } else if ((tag & 7) == 2) {
            const uint64_t size = read_varint(data, at);
            f.bytes = data.substr(at, size);
            at += size;
        } else {
            ADD_FAILURE() << "wire type " << (tag & 7);
            return out;
        }
        out.push_back(f);
    }
    return out;
}

std::vector<uint64_t> packed(const std::string &bytes) {
    std::vector<uint64_t> out;
    size_t at = 0;
    while (at < bytes.size())
        out.push_back(read_varint(bytes, at));
    return out;
}

} // namespace

TEST(Profile, FoldedRootFirstMergedAndEscaped) {
    EXPECT_EQ(profile::folded(two_stacks(), 1),
              "memcg;reader-42;0x7777;[libc.so.6];read_pass;try_to_free_mem_cgroup_pages_[k] "
              "3500\n"
              "other;a:b-7;f:g h 10\n");
    EXPECT_EQ(profile::folded(two_stacks(), 0),
              "memcg;reader-42;0x7777;[libc.so.6];read_pass;try_to_free_mem_cgroup_pages_[k] 4\n"
              "other;a:b-7;f:g h 1\n");
}

TEST(Profile, GzipRoundTrip) {
    const std::string data(100000, 'x');
    const std::string packed_data = profile::gzip(data);
    ASSERT_GE(packed_data.size(), 18u);
    EXPECT_EQ(packed_data.substr(0, 2), "\x1f\x8b");
    std::string back(data.size() + 1, '\0');
    z_stream z{};
    ASSERT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
    z.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(packed_data.data()));
    z.avail_in = static_cast<uInt>(packed_data.size());
    z.next_out = reinterpret_cast<Bytef *>(back.data());
    z.avail_out = static_cast<uInt>(back.size());
    EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
    back.resize(z.total_out);
    inflateEnd(&z);
    EXPECT_EQ(back, data);
}

TEST(Profile, PprofMessages) {
    const auto top = fields(profile::encode_pprof(two_stacks()));
    std::vector<std::string> strings;
    // Profile's repeated messages, by field number: 2 sample, 3 mapping, 4 location, 5 function.
    std::map<uint32_t, std::vector<std::vector<Field>>> messages;
    uint64_t default_type = 0, period = 0;
    for (const auto &f : top) {
        switch (f.number) {
        case 2:
        case 3:
        case 4:
        case 5:
            messages[f.number].push_back(fields(f.bytes));
            break;
        case 6:
            strings.push_back(f.bytes);
            break;
        case 12:
            period = f.varint;
            break;
        case 14:
            default_type = f.varint;
            break;
        }
    }
    const auto &samples = messages[2], &mappings = messages[3], &locations = messages[4],
               &functions = messages[5];
    ASSERT_FALSE(strings.empty());
    EXPECT_EQ(strings[0], "");
    ASSERT_LT(default_type, strings.size());
    EXPECT_EQ(strings[default_type], "stall_time");
    EXPECT_EQ(period, 1u);
    EXPECT_EQ(samples.size(), 4u); // pprof keeps every sample, zero or not
    EXPECT_EQ(mappings.size(), 2u);
    // Locations once each: the four frames of the first stack, then the odd one's.
    EXPECT_EQ(locations.size(), 5u);
    EXPECT_EQ(functions.size(), 3u); // the frames with a name
    // The first sample: its locations innermost first, its values, its labels.
    std::vector<uint64_t> ids, values;
    std::map<std::string, std::string> labels;
    for (const auto &f : samples[0]) {
        if (f.number == 1)
            ids = packed(f.bytes);
        else if (f.number == 2)
            values = packed(f.bytes);
        else if (f.number == 3) {
            std::string key, text;
            for (const auto &l : fields(f.bytes)) {
                if (l.number == 1)
                    key = strings.at(l.varint);
                else if (l.number == 2)
                    text = strings.at(l.varint);
                else if (l.number == 3)
                    text = std::to_string(l.varint); // a number label
            }
            labels[key] = text;
        }
    }
    EXPECT_EQ(ids, (std::vector<uint64_t>{1, 2, 3, 4}));
    EXPECT_EQ(values, (std::vector<uint64_t>{3, 3000}));
    EXPECT_EQ(labels, (std::map<std::string, std::string>{{"cause", "memcg"}, {"pid", "42"}}));
    // The innermost location: the kernel mapping (id 2), its address, a line of function 1.
    std::map<uint32_t, uint64_t> loc;
    for (const auto &f : locations[0])
        loc[f.number] = f.varint;
    EXPECT_EQ(loc[1], 1u);
    EXPECT_EQ(loc[2], 2u);
    EXPECT_EQ(loc[3], 0xffffffff81000010u);
    std::map<uint32_t, uint64_t> fn;
    for (const auto &f : functions[0])
        fn[f.number] = f.varint;
    EXPECT_EQ(strings.at(fn[2]), "try_to_free_mem_cgroup_pages");
}

TEST(Profile, DescribedFunction) {
    EXPECT_EQ(described_function("try_charge_memcg+0x1a0"), "try_charge_memcg");
    EXPECT_EQ(described_function("xfs_file_read_iter+0x10 [xfs]"), "xfs_file_read_iter");
    EXPECT_EQ(described_function("read_pass(int)+0x1f [file_reader]"), "read_pass(int)");
    EXPECT_EQ(described_function("[libc.so.6]+0x2a1ca"), "");
    EXPECT_EQ(described_function("0xffffffffc0a01234"), "");
}

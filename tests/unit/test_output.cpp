// JSON lines carry names that are not UTF-8 without throwing and without losing bytes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/output.h"

using namespace memlat;

TEST(Utf8, AcceptsWellFormedText) {
    EXPECT_TRUE(is_valid_utf8(""));
    EXPECT_TRUE(is_valid_utf8("kworker/1:2"));
    EXPECT_TRUE(is_valid_utf8("\xc3\xa9t\xc3\xa9"));         // été
    EXPECT_TRUE(is_valid_utf8("\xe2\x82\xac"));              // €
    EXPECT_TRUE(is_valid_utf8("\xf0\x9f\x98\x80"));          // U+1F600
    EXPECT_TRUE(is_valid_utf8(std::string_view("a\0b", 3))); // NUL is a character
}

TEST(Utf8, RejectsWhatNlohmannRejects) {
    EXPECT_FALSE(is_valid_utf8("\xff"));
    EXPECT_FALSE(is_valid_utf8("\xc3"));             // cut inside a character
    EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));         // overlong '/'
    EXPECT_FALSE(is_valid_utf8("\xe0\x80\xaf"));     // overlong
    EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));     // surrogate U+D800
    EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80")); // past U+10FFFF
    EXPECT_FALSE(is_valid_utf8("\x80"));             // continuation byte alone
}

TEST(Utf8, ReplacesEachInvalidByte) {
    EXPECT_EQ(replace_invalid_utf8("a\xff"
                                   "b"),
              "a\xef\xbf\xbd"
              "b");
    // 15 bytes of "ééééééééé", as the kernel keeps a task name: the last character is cut.
    std::string cut = "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3";
    EXPECT_EQ(replace_invalid_utf8(cut), cut.substr(0, 14) + "\xef\xbf\xbd");
    EXPECT_EQ(hex_bytes("\xff"
                        "A"),
              "ff41");
}

TEST(JsonLine, CarriesInvalidNamesLosslessly) {
    nlohmann::json line{{"comm", "x\xff"}, {"pid", 7}, {"nested", {{"path", "/tmp/\xfe"}}}};
    testing::internal::CaptureStdout();
    print_json_line(event_line, line);
    std::string out = testing::internal::GetCapturedStdout();
    auto parsed = nlohmann::json::parse(out);
    EXPECT_EQ(parsed["comm"], "x\xef\xbf\xbd");
    EXPECT_EQ(parsed["comm_hex"], "78ff");
    EXPECT_EQ(parsed["pid"], 7);
    EXPECT_EQ(parsed["nested"]["path_hex"], hex_bytes("/tmp/\xfe"));
    EXPECT_FALSE(parsed.contains("pid_hex"));
}

TEST(JsonLine, ValidNamesGetNoHexField) {
    testing::internal::CaptureStdout();
    print_json_line(interval_line, {{"comm", "\xc3\xa9t\xc3\xa9"}});
    auto parsed = nlohmann::json::parse(testing::internal::GetCapturedStdout());
    // The name as it is, no comm_hex; the line's type and its time stamp (wall_stamp()).
    EXPECT_EQ(parsed["comm"], "\xc3\xa9t\xc3\xa9");
    EXPECT_FALSE(parsed.contains("comm_hex"));
    EXPECT_EQ(parsed["type"], "interval");
    EXPECT_TRUE(parsed["timestamp"].is_string());
    EXPECT_TRUE(parsed["epoch_ms"].is_number_integer());
    EXPECT_EQ(parsed.size(), 4u);
}

TEST(JsonLine, StampedOnceAndKeptWhenGiven) {
    const auto stamped =
        nlohmann::json::parse(stamped_json_text(summary_line, nlohmann::json::object()));
    EXPECT_EQ(stamped.size(), 3u);
    EXPECT_EQ(stamped["type"], "summary");
    const WallStamp stamp = wall_stamp();
    // ISO 8601 in UTC to the millisecond, and the same instant in epoch_ms.
    ASSERT_EQ(stamp.timestamp.size(), 24u);
    EXPECT_EQ(stamp.timestamp[10], 'T');
    EXPECT_EQ(stamp.timestamp.back(), 'Z');
    EXPECT_EQ(std::stoi(stamp.timestamp.substr(20, 3)), stamp.epoch_ms % 1000);
    // A replayed record's own stamp (or its null) is kept, and a type it has.
    const nlohmann::json replayed = {
        {"timestamp", nullptr}, {"epoch_ms", nullptr}, {"a", 1}, {"type", "interval"}};
    EXPECT_EQ(nlohmann::json::parse(stamped_json_text(interval_line, replayed)), replayed);
    // A record older than "type" gets it, and keeps its stamp.
    nlohmann::json old_record = replayed;
    old_record.erase("type");
    EXPECT_EQ(nlohmann::json::parse(stamped_json_text(interval_line, old_record)), replayed);
    // Not an object: nothing to add to.
    EXPECT_EQ(stamped_json_text(event_line, nlohmann::json::array({1, 2})), "[1,2]");
}

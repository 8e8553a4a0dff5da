#include <gtest/gtest.h>

#include <unistd.h>

#include <optional>
#include <string_view>
#include <utility>

#include "base/errors.h"
#include "cli/options.h"

using memlat::parse_cpu_list;
using memlat::parse_kind_list;
using memlat::split_list;
using memlat::UsageError;

namespace {

std::vector<int> selected(const std::vector<bool> &mask) {
    std::vector<int> cpus;
    for (size_t i = 0; i < mask.size(); ++i)
        if (mask[i])
            cpus.push_back(static_cast<int>(i));
    return cpus;
}

std::string usage_error(std::string_view list, int ncpus) {
    try {
        parse_cpu_list(list, ncpus);
    } catch (const UsageError &e) {
        return e.what();
    }
    return "no error";
}

} // namespace

TEST(CpuList, SingleCpu) {
    EXPECT_EQ(selected(parse_cpu_list("11", 16)), std::vector<int>{11});
}

TEST(CpuList, ListsAndRanges) {
    EXPECT_EQ(selected(parse_cpu_list("0,2-5", 8)), (std::vector<int>{0, 2, 3, 4, 5}));
    EXPECT_EQ(selected(parse_cpu_list("3-3,1", 4)), (std::vector<int>{1, 3}));
    EXPECT_EQ(parse_cpu_list("1", 4).size(), 4u);
}

TEST(CpuList, RejectsWhatIsNotACpu) {
    EXPECT_NE(usage_error("x", 4).find("'x' in CPU list 'x' is not a CPU number"),
              std::string::npos);
    EXPECT_NE(usage_error("-1", 4).find("'-1' is not a CPU list"), std::string::npos);
    EXPECT_NE(usage_error("-d", 4).find("did an option take the place of the list?"),
              std::string::npos);
    EXPECT_NE(usage_error("1.5", 4).find("not a CPU number"), std::string::npos);
    EXPECT_NE(usage_error("", 4).find("empty item"), std::string::npos);
    EXPECT_NE(usage_error("1,,2", 4).find("empty item"), std::string::npos);
    EXPECT_NE(usage_error("2-", 4).find("not a CPU number"), std::string::npos);
}

TEST(CpuList, RejectsCpusTheMachineLacks) {
    EXPECT_NE(usage_error("4", 4).find("CPU 4 in '4' does not exist: this machine has CPUs 0-3"),
              std::string::npos);
    EXPECT_NE(usage_error("0-9", 2).find("CPU 9"), std::string::npos);
}

TEST(CpuList, RejectsBackwardRanges) {
    EXPECT_NE(usage_error("3-1", 4).find("runs backwards"), std::string::npos);
}

TEST(SplitList, SplitsOnCommas) {
    EXPECT_EQ(split_list("a,b", "x"), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(split_list("one", "x"), (std::vector<std::string>{"one"}));
    EXPECT_THROW(split_list("a,", "reason list"), UsageError);
}

// ---- CommandLine: the argp wrapper every tool parses with ----

namespace {

struct Parsed {
    memlat::CommonOptions common;
    std::string cpus;
    int pid = 0;
    std::optional<uint32_t> uid;
    bool flag = false;
};

// Parses `args` as the command line of `name`.
void parse_args(memlat::CommandLine &cli, std::string name, std::vector<std::string> args) {
    std::vector<char *> argv;
    args.insert(args.begin(), std::move(name));
    for (auto &a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    cli.parse(static_cast<int>(args.size()), argv.data());
}

Parsed parse(std::vector<std::string> args) {
    Parsed p;
    memlat::CommandLine cli("tool", "A tool.", "Examples: none");
    cli.option('c', "cpu", "LIST", "CPUs", p.cpus);
    cli.option('p', "pid", "PID", "process", p.pid);
    cli.option('u', "uid", "UID", "user", p.uid);
    cli.flag(0, "long-only", "a long-only flag", p.flag);
    memlat::add_common_options(cli, p.common, true);
    parse_args(cli, "tool", std::move(args));
    return p;
}

} // namespace

TEST(CommandLine, ParsesOptionsFlagsAndPositionals) {
    auto p = parse({"-c", "0,1", "--pid=42", "-u", "0", "--long-only", "-T", "-j", "-vv", "-d",
                    "2.5", "0.5", "3"});
    EXPECT_EQ(p.cpus, "0,1");
    EXPECT_EQ(p.pid, 42);
    EXPECT_EQ(p.uid, std::optional<uint32_t>(0)); // given, even as 0
    EXPECT_TRUE(p.flag);
    EXPECT_TRUE(p.common.timestamp);
    EXPECT_TRUE(p.common.json);
    EXPECT_EQ(p.common.verbose, 2);
    EXPECT_DOUBLE_EQ(p.common.duration, 2.5);
    EXPECT_DOUBLE_EQ(p.common.interval, 0.5);
    EXPECT_EQ(p.common.count, 3u);
}

TEST(CommandLine, DefaultsWhenNothingIsGiven) {
    auto p = parse({});
    EXPECT_FALSE(p.uid.has_value());
    EXPECT_EQ(p.common.interval, 0);
    EXPECT_EQ(p.common.count, 0u);
    EXPECT_FALSE(p.common.json);
}

TEST(CommandLineDeathTest, UsageErrorsExitWithStatus2AndNameTheProblem) {
    EXPECT_EXIT(parse({"-p", "abc"}), testing::ExitedWithCode(2), "-p takes a number, not 'abc'");
    EXPECT_EXIT(parse({"-u", "x"}), testing::ExitedWithCode(2), "-u takes a number, not 'x'");
    EXPECT_EXIT(parse({"-d", "-1"}), testing::ExitedWithCode(2), "positive number of seconds");
    EXPECT_EXIT(parse({"0"}), testing::ExitedWithCode(2), "interval must be a positive");
    EXPECT_EXIT(parse({"1", "0"}), testing::ExitedWithCode(2), "count must be a positive");
    EXPECT_EXIT(parse({"1", "2", "3"}), testing::ExitedWithCode(2), "unexpected argument '3'");
    EXPECT_EXIT(parse({"--bogus"}), testing::ExitedWithCode(2), "unrecognized option");
}

namespace {

struct Grouped {
    int pid = 0, drsnoop_pid = 0;
    bool latency = false;
    bool drsnoop_given = false, tlbflush_given = false;
};

// memlat exporter: each tool's options as --TOOL.NAME, long only.
Grouped parse_grouped(std::vector<std::string> args) {
    Grouped g;
    memlat::CommandLine cli("exporter", "An exporter.", "Examples: none");
    cli.option('p', "pid", "PID", "process", g.pid);
    cli.begin_group("drsnoop.", "drsnoop:");
    cli.option('p', "pid", "PID", "process", g.drsnoop_pid);
    cli.begin_group("tlbflush.", "tlbflush:");
    cli.flag('L', "latency", "latency", g.latency);
    parse_args(cli, "exporter", std::move(args));
    g.drsnoop_given = cli.group_given("drsnoop.");
    g.tlbflush_given = cli.group_given("tlbflush.");
    return g;
}

} // namespace

TEST(CommandLine, GroupsNameTheirOptionsWithTheirPrefixAndSayWhetherOneWasGiven) {
    auto g = parse_grouped({"-p", "1", "--drsnoop.pid", "2"});
    EXPECT_EQ(g.pid, 1);
    EXPECT_EQ(g.drsnoop_pid, 2);
    EXPECT_TRUE(g.drsnoop_given);
    EXPECT_FALSE(g.tlbflush_given);
    g = parse_grouped({"--tlbflush.latency"});
    EXPECT_TRUE(g.latency);
    EXPECT_FALSE(g.drsnoop_given);
    EXPECT_TRUE(g.tlbflush_given);
}

TEST(CommandLineDeathTest, GroupOptionsHaveNoShortNameAndErrorsUseTheLongOne) {
    EXPECT_EXIT(parse_grouped({"-L"}), testing::ExitedWithCode(2), "invalid option");
    EXPECT_EXIT(parse_grouped({"--drsnoop.pid", "x"}), testing::ExitedWithCode(2),
                "--drsnoop.pid takes a number, not 'x'");
    EXPECT_EXIT(
        {
            dup2(2, 1);
            parse_grouped({"-h"});
        },
        testing::ExitedWithCode(0), "tlbflush:\n +--tlbflush.latency +latency");
}

TEST(CommandLineDeathTest, HelpListsEveryOptionAndExitsZero) {
    // The help goes to stdout; the death test matches stderr, so send one to the other.
    for (const char *expected :
         {"Usage: tool \\[OPTION...\\] \\[interval \\[count\\]\\]",
          "interval +print every INTERVAL", "count +stop after COUNT", "-p, --pid=PID +process",
          "--long-only +a long-only flag", "-d, --duration=SECONDS", "-j, --json", "-v, --verbose",
          "Examples: none"})
        EXPECT_EXIT(
            {
                dup2(2, 1);
                parse({"-h"});
            },
            testing::ExitedWithCode(0), expected);
}

TEST(CommandLineDeathTest, VersionPrintsToolAndProjectVersionAndExitsZero) {
    EXPECT_EXIT(
        {
            dup2(2, 1);
            parse({"-V"});
        },
        testing::ExitedWithCode(0), "^tool " MEMLAT_VERSION "\n$");
    EXPECT_EXIT(
        {
            dup2(2, 1);
            parse({"--version"});
        },
        testing::ExitedWithCode(0), "^tool " MEMLAT_VERSION "\n$");
}

// BCC's long names for memlat's options (compactsnoop --extended_fields for -e).
TEST(CommandLine, AliasIsAnotherLongNameOfTheSameOption) {
    for (const char *spelling : {"-e", "--extended", "--extended_fields"}) {
        bool extended = false;
        memlat::CommandLine cli("tool", "A tool.", "Examples: none");
        cli.flag('e', "extended", "extended fields", extended);
        cli.alias("extended_fields");
        std::string name = "tool", arg = spelling;
        std::vector<char *> argv{name.data(), arg.data(), nullptr};
        cli.parse(2, argv.data());
        EXPECT_TRUE(extended) << spelling;
    }
}

TEST(ParseNumber, RejectsTrailingGarbage) {
    EXPECT_EQ(memlat::parse_number<int>("12", "-x"), 12);
    EXPECT_DOUBLE_EQ(memlat::parse_number<double>("0.25", "-x"), 0.25);
    EXPECT_THROW(memlat::parse_number<int>("12x", "-x"), UsageError);
    EXPECT_THROW(memlat::parse_number<int>("", "-x"), UsageError);
    EXPECT_THROW(memlat::parse_number<unsigned>("-1", "-x"), UsageError);
}

TEST(ParseSeconds, RejectsTimesThatMeanNothing) {
    using memlat::min_interval, memlat::parse_seconds, memlat::UsageError;
    for (const char *text : {"inf", "-inf", "nan", "1e300", "9223372037", "0", "-1", "", "1s"})
        EXPECT_THROW(parse_seconds(text, "-d", 0), UsageError) << text;
    EXPECT_THROW(parse_seconds("0.001", "the interval", min_interval), UsageError);
    EXPECT_DOUBLE_EQ(parse_seconds("0.5", "-d", 0), 0.5);
    EXPECT_DOUBLE_EQ(parse_seconds("86400", "the interval", min_interval), 86400);
}

TEST(ParseSeconds, NamesTheOptionAndTheText) {
    using memlat::parse_seconds, memlat::UsageError;
    try {
        parse_seconds("nan", "-d", 0);
        FAIL() << "no exception";
    } catch (const UsageError &e) {
        EXPECT_EQ(std::string(e.what()), "-d must be a positive number of seconds, not 'nan'");
    }
}

TEST(KindList, NamesBecomeAMaskAndUnknownNamesListTheKinds) {
    const auto name_of = [](uint32_t k) -> std::string_view {
        static const char *names[] = {"direct", "memcg", "softlimit", "node"};
        return names[k];
    };
    EXPECT_EQ(0b1001u, parse_kind_list("direct,node", 4, name_of, "reclaim kind"));
    EXPECT_EQ(0b0010u, parse_kind_list("memcg,memcg", 4, name_of, "reclaim kind"));
    try {
        parse_kind_list("direct,bogus", 4, name_of, "reclaim kind");
        FAIL() << "an unknown kind must be a usage error";
    } catch (const UsageError &e) {
        EXPECT_STREQ("unknown reclaim kind 'bogus'; the kinds are direct, memcg, softlimit, node",
                     e.what());
    }
    EXPECT_THROW(parse_kind_list("direct,,node", 4, name_of, "reclaim kind"), UsageError);
}

TEST(EnvironmentHelp, HookKindsUnderTheColumnAndFeaturesLast) {
    const std::array<std::string_view, 1> kinds{"never try these hook kinds (tp_btf)"};
    EXPECT_EQ("Environment:\n"
              "  MEMLAT_READY=1            print \"memlat: ready\" on stderr once tracing runs\n"
              "  MEMLAT_DISABLE_HOOKS=LIST never try these hook kinds (tp_btf, raw_tp,\n"
              "                            tracepoint)\n"
              "  MEMLAT_DISABLE_FEATURES=LIST\n"
              "                            act as on an older kernel: task_btf (5.11),\n"
              "                            ringbuf (5.8), kernel_btf, uffd_wp_async (6.7);\n"
              "                            -v shows the choice",
              memlat::environment_help(true));
    EXPECT_EQ("Environment:\n"
              "  MEMLAT_READY=1            print \"memlat: ready\" on stderr once tracing runs\n"
              "  MEMLAT_DISABLE_HOOKS=LIST never try these hook kinds (tp_btf)",
              memlat::environment_help(false, kinds));
}

TEST(BufferSize, PowersOfTwoWithUnits) {
    using memlat::parse_buffer_size;
    EXPECT_EQ(parse_buffer_size("4096"), 4096u);
    EXPECT_EQ(parse_buffer_size("4K"), 4096u);
    EXPECT_EQ(parse_buffer_size("64k"), 65536u);
    EXPECT_EQ(parse_buffer_size("1M"), 1u << 20);
    EXPECT_EQ(parse_buffer_size("1G"), 1u << 30);
}

TEST(BufferSize, RefusesWhatTheRingBufferCannotBe) {
    const auto message = [](std::string_view text) -> std::string {
        try {
            memlat::parse_buffer_size(text);
        } catch (const UsageError &e) {
            return e.what();
        }
        return "(accepted)";
    };
    // Each size refused, and what its refusal says.
    const std::pair<std::string_view, std::string_view> refusals[]{
        {"", "--buffer-size needs a value"},
        {"12K", "not a power of two"},
        {"3000", "less than one page"},
        {"0", "less than one page"},
        {"2G", "more than 1G"},
        {"99999999999999999999", "more than 1G"},
        {"18446744073709551616K", "more than 1G"},
        {"lots", "not a size"},
        {"K", "not a size"},
        {"-4K", "not a size"},
        {"64KB", "not a size"},
    };
    for (const auto &[size, says] : refusals)
        EXPECT_NE(message(size).find(says), std::string::npos) << '"' << size << '"';
    EXPECT_NE(message("1M").find("(accepted)"), std::string::npos);
}

// A short option a tool gave up (tlbflush -t, now --trace: -t is a thread in every tool that
// has it, as in BCC): hidden from --help, and a usage error that says what to write.
TEST(CommandLineDeathTest, RetiredShortOptionSaysWhatToWrite) {
    auto parse_retired = [](std::vector<std::string> args) {
        bool trace = false;
        memlat::CommandLine cli("tool", "A tool.", "Examples: none");
        cli.flag(0, "trace", "one line per event", trace);
        cli.retired_short('t', "--trace", "--tid, a thread");
        parse_args(cli, "tool", std::move(args));
        return trace;
    };
    EXPECT_TRUE(parse_retired({"--trace"}));
    EXPECT_EXIT(parse_retired({"-t"}), testing::ExitedWithCode(2),
                "tool: -t is no longer tool's: write --trace. In every memlat tool that has "
                "it, -t means --tid, a thread");
    EXPECT_EXIT(
        {
            dup2(2, 1);
            parse_retired({"-h"});
        },
        // --trace listed alone on its line: no "-t," before it.
        testing::ExitedWithCode(0), "\n {6}--trace +one line per event");
}

// The fall-back engine's decisions (fallback.h) on libbpf log lines recorded from real
// refusals with each libbpf version memlat builds with (tests/unit/data/README.md): a libbpf
// that rewords a line must fail here, not turn every program refusal into "refused the BPF
// object" on a root-only runtime test.
#include <gtest/gtest.h>

#include <cerrno>
#include <fstream>
#include <regex>
#include <sstream>

#include "base/errors.h"
#include "loading/fallback.h"

using namespace memlat;

namespace {

// The lines the loader's print callback keeps, in the order libbpf printed them.
std::vector<std::string> recorded(const std::string &version, const std::string &name) {
    const std::string path = std::string(MEMLAT_UNIT_DATA) + "/libbpf-" + version + "/" + name;
    std::ifstream file(path);
    EXPECT_TRUE(file.good()) << path;
    std::stringstream text;
    text << file.rdbuf();
    const std::string all = text.str();
    std::vector<std::string> lines;
    static const std::regex record(R"(@@\d@@([\s\S]*?)@@end@@\n)");
    for (auto it = std::sregex_iterator(all.begin(), all.end(), record);
         it != std::sregex_iterator(); ++it) {
        std::string line = (*it)[1];
        while (!line.empty() && line.back() == '\n')
            line.pop_back();
        lines.push_back(line);
    }
    EXPECT_FALSE(lines.empty()) << path;
    return lines;
}

// The lines of the first attempt: up to libbpf's last word on the failed load.
std::vector<std::string> first_load(const std::vector<std::string> &lines) {
    std::vector<std::string> attempt;
    for (const auto &line : lines) {
        attempt.push_back(line);
        if (line.find("failed to load BPF skeleton") != std::string::npos)
            break;
    }
    return attempt;
}

FallbackEnvironment environment() {
    FallbackEnvironment e;
    e.kernel_release = "6.18.44-test";
    return e;
}

// What the recorded objects would answer about their maps and programs.
ObjectFacts facts() {
    return {
        [](const std::string &map) {
            return map == "events" ? map_type_requirement(BPF_MAP_TYPE_RINGBUF, false) : "";
        },
        [](const std::string &program) -> std::string {
            if (program == "e_tlb_flush")
                return program_requirement(BPF_PROG_TYPE_TRACING, BPF_TRACE_RAW_TP);
            if (program == "migrate_start_fentry")
                return program_requirement(BPF_PROG_TYPE_TRACING, BPF_TRACE_FENTRY);
            return "";
        },
    };
}

enum class Id { Flush, Start };

HookChoice choice(HookKind kind, std::string program) {
    return HookChoice{.kind = kind, .programs = {std::move(program)}};
}

bool contains(const std::string &text, const std::string &part) {
    return text.find(part) != std::string::npos;
}

// The RuntimeError a failed load with these lines ends in, for a tool whose one probe loads
// tlb_flush_btf; "" (and a failure) when the engine went on instead.
std::string load_error(int err, const std::vector<std::string> &lines) {
    std::vector<Probe> probes{
        Probe(Id::Flush, "tlb:tlb_flush", "", {choice(HookKind::TpBtf, "tlb_flush_btf")})};
    HookFallback fallback(probes, environment());
    try {
        fallback.load_refused(err, lines, facts());
    } catch (const RuntimeError &e) {
        return e.what();
    }
    ADD_FAILURE() << "the load went on after a refusal of the whole object";
    return "";
}

class RecordedLibbpf : public testing::TestWithParam<std::string> {};

} // namespace

TEST_P(RecordedLibbpf, VerifierRefusalNamesTheProgramAndItsVerdict) {
    const auto lines = first_load(recorded(GetParam(), "verifier_refusal.log"));
    auto program = refused_program(lines);
    ASSERT_TRUE(program.has_value());
    EXPECT_EQ("e_tlb_flush", program->name);
    EXPECT_TRUE(program->reason.starts_with("failed to load: -")) << program->reason;
    EXPECT_EQ("dereference of modified ctx ptr R1 off=400000 disallowed",
              verifier_verdict(lines, "e_tlb_flush"));
    EXPECT_FALSE(refused_map(lines).has_value());
}

TEST_P(RecordedLibbpf, ProgramRefusalMovesItsProbeToTheNextChoice) {
    std::vector<Probe> probes{Probe(
        Id::Flush, "tlb:tlb_flush", "",
        {choice(HookKind::TpBtf, "e_tlb_flush"), choice(HookKind::RawTp, "e_tlb_flush_raw")})};
    HookFallback fallback(probes, environment());
    EXPECT_EQ(std::vector<std::string>{"e_tlb_flush"}, fallback.programs());
    fallback.load_refused(EACCES, first_load(recorded(GetParam(), "verifier_refusal.log")),
                          facts());
    EXPECT_EQ(1, probes[0].chosen);
    EXPECT_EQ(std::vector<std::string>{"e_tlb_flush_raw"}, fallback.programs());
    ASSERT_EQ(1u, probes[0].refused.size());
    const std::string &why = probes[0].refused[0].second;
    EXPECT_TRUE(why.starts_with("program e_tlb_flush not loaded: failed to load: -")) << why;
    EXPECT_TRUE(contains(why, " (verifier: dereference of modified ctx ptr R1 off=400000 "
                              "disallowed) (tp_btf programs need Linux 5.5 and the kernel's own "
                              "BTF)"))
        << why;
}

TEST_P(RecordedLibbpf, NoHookLeftForARequiredProbeIsTheMessage) {
    std::vector<Probe> probes{Probe(Id::Flush, "tlb:tlb_flush", "It needs tlb:tlb_flush.",
                                    {choice(HookKind::TpBtf, "e_tlb_flush")})};
    HookFallback fallback(probes, environment());
    try {
        fallback.load_refused(EACCES, first_load(recorded(GetParam(), "verifier_refusal.log")),
                              facts());
        FAIL() << "no hook was left, and nothing was thrown";
    } catch (const RuntimeError &e) {
        const std::string text = e.what();
        EXPECT_TRUE(text.starts_with("The running kernel (6.18.44-test) refused every way to "
                                     "trace tlb:tlb_flush. It needs tlb:tlb_flush. Tried:\n  "
                                     "tp_btf: program e_tlb_flush not loaded: "))
            << text;
        EXPECT_TRUE(contains(text, "(verifier: dereference of modified ctx ptr")) << text;
    }
}

TEST_P(RecordedLibbpf, AnOptionalProbeWithoutHooksIsNotTraced) {
    std::vector<Probe> probes{
        Probe(Id::Flush, "tlb:tlb_flush", "", {choice(HookKind::TpBtf, "e_tlb_flush")}, false)};
    HookFallback fallback(probes, environment());
    fallback.load_refused(EACCES, first_load(recorded(GetParam(), "verifier_refusal.log")),
                          facts());
    EXPECT_EQ(-1, probes[0].chosen);
    EXPECT_TRUE(fallback.programs().empty());
    ASSERT_EQ(1u, fallback.explanation().size());
    EXPECT_TRUE(fallback.explanation()[0].starts_with(
        "tlb:tlb_flush: not traced (no hook accepted)\n  tp_btf: program e_tlb_flush"));
}

// EPERM from the kernel for one program is that program's refusal, not missing privileges:
// the kprobe after it is tried, and its failed attach (no kprobes here) ends the probe.
TEST_P(RecordedLibbpf, FentryRefusedWithEpermThenKprobeNotAttached) {
    std::vector<Probe> probes{Probe(Id::Start, "migrate:mm_migrate_pages_start", "",
                                    {choice(HookKind::Fentry, "migrate_start_fentry"),
                                     choice(HookKind::Kprobe, "migrate_start_kprobe")},
                                    false)};
    HookFallback fallback(probes, environment());
    const auto lines = recorded(GetParam(), "fentry_refused.log");
    fallback.load_refused(EPERM, first_load(lines), facts());
    EXPECT_EQ(1, probes[0].chosen);
    const std::string &why = probes[0].refused[0].second;
    EXPECT_TRUE(why.starts_with("program migrate_start_fentry not loaded: failed to load: -"))
        << why;
    EXPECT_TRUE(contains(why, "(fentry/fexit programs need Linux 5.5")) << why;
    fallback.attach_refused("migrate_start_kprobe", ENOENT);
    EXPECT_EQ(-1, probes[0].chosen);
    EXPECT_EQ("migrate_start_kprobe not attached: No such file or directory",
              probes[0].refused[1].second);
}

TEST_P(RecordedLibbpf, MapRefusalIsTheObjectsAndNamesTheMap) {
    const auto lines = recorded(GetParam(), "map_enomem.log");
    auto map = refused_map(lines);
    ASSERT_TRUE(map.has_value());
    EXPECT_EQ("culprits", map->name);
    EXPECT_TRUE(contains(map->reason, "12") || contains(map->reason, "ENOMEM")) << map->reason;
    EXPECT_FALSE(refused_program(lines).has_value());
    EXPECT_EQ("The running kernel (6.18.44-test) could not create the BPF map 'culprits': " +
                  map->reason + ".",
              load_error(ENOMEM, lines));
}

TEST_P(RecordedLibbpf, WithoutCapabilitiesTheMessageSaysRunAsRoot) {
    const auto lines = recorded(GetParam(), "no_capabilities.log");
    EXPECT_FALSE(refused_program(lines).has_value());
    const std::string text = load_error(EPERM, lines);
    EXPECT_TRUE(text.starts_with("The kernel refused to load BPF programs (Operation not "
                                 "permitted). Run as root, or with CAP_BPF and CAP_PERFMON"))
        << text;
    EXPECT_TRUE(contains(text, "\nlibbpf said: libbpf: failed to load BPF skeleton "
                               "'tlbflush_bpf': -"))
        << text;
}

INSTANTIATE_TEST_SUITE_P(Fallback, RecordedLibbpf, testing::Values("1.1", "1.7"),
                         [](const auto &info) {
                             return "libbpf_" + std::string(info.param == "1.1" ? "1_1" : "1_7");
                         });

// What the choices made lose is said in one form: a chosen choice's note, and for an optional
// probe nothing attached its note_if_none with what each choice was refused with; a probe
// whose choice has no note says nothing.
TEST(Fallback, WhatProbesLostIsSaidOnceInOneForm) {
    HookChoice fallback_choice = choice(HookKind::Kprobe, "start_kprobe");
    fallback_choice.note = "times come from a kprobe here.";
    std::vector<Probe> probes{
        Probe(Id::Start, "migrate_pages", "",
              {choice(HookKind::Fentry, "start_fentry"), fallback_choice}),
        Probe(Id::Flush, "tlb:tlb_flush", "", {choice(HookKind::Tracepoint, "flush_tp")}, false),
        Probe(Id::Flush, "quiet", "", {choice(HookKind::Tracepoint, "quiet_tp")})};
    probes[1].note_if_none = "flushes stay 0.";
    HookFallback fallback(probes, environment());
    fallback.attach_refused("start_fentry", enotsupp);
    fallback.attach_refused("flush_tp", ENOENT);
    testing::internal::CaptureStderr();
    say_what_probes_lost("tool", probes);
    const std::string said = testing::internal::GetCapturedStderr();
    EXPECT_EQ("tool: times come from a kprobe here.\n"
              "tool: flushes stay 0. Tried:\n  tracepoint: " +
                  probes[1].refused[0].second + "\n",
              said);
}

TEST(Fallback, EnotsuppOnFentryExplainsTheMissingTrampolines) {
    std::vector<Probe> probes{Probe(
        Id::Start, "migrate_pages", "",
        {choice(HookKind::Fentry, "start_fentry"), choice(HookKind::Kprobe, "start_kprobe")})};
    HookFallback fallback(probes, environment());
    fallback.attach_refused("start_fentry", enotsupp);
    EXPECT_EQ(1, probes[0].chosen);
    EXPECT_TRUE(contains(probes[0].refused[0].second,
                         "(ENOTSUPP: this kernel cannot attach fentry programs; arm64 has the "
                         "ftrace direct calls they need from Linux 6.4)"))
        << probes[0].refused[0].second;
}

TEST(Fallback, MissingTracepointHintsAtTracefsOnlyWhenItIsNotMounted) {
    for (bool mounted : {true, false}) {
        std::vector<Probe> probes{Probe(Id::Flush, "tlb:tlb_flush", "",
                                        {choice(HookKind::Tracepoint, "flush_tp")}, false)};
        auto e = environment();
        e.tracefs_mounted = mounted;
        HookFallback fallback(probes, e);
        fallback.attach_refused("flush_tp", ENOENT);
        EXPECT_EQ(!mounted, contains(probes[0].refused[0].second, "tracefs is not mounted"))
            << probes[0].refused[0].second;
    }
}

TEST(Fallback, DisabledHooksAndMissingKernelBtfAreSkippedWithTheReason) {
    std::vector<Probe> probes{
        Probe(Id::Flush, "tlb:tlb_flush", "",
              {choice(HookKind::TpBtf, "flush_btf"), choice(HookKind::RawTp, "flush_raw"),
               choice(HookKind::Tracepoint, "flush_tp")})};
    auto e = environment();
    e.disabled_hooks = {"raw_tp"};
    e.kernel_btf = false;
    HookFallback fallback(probes, e);
    EXPECT_EQ(2, probes[0].chosen);
    ASSERT_EQ(2u, probes[0].refused.size());
    EXPECT_EQ("needs the kernel's own BTF", probes[0].refused[0].second);
    EXPECT_EQ("disabled by MEMLAT_DISABLE_HOOKS", probes[0].refused[1].second);
}

TEST(Fallback, AnUnknownDisabledHookIsAUsageError) {
    std::vector<Probe> probes{
        Probe(Id::Flush, "tlb:tlb_flush", "", {choice(HookKind::TpBtf, "flush_btf")})};
    auto e = environment();
    e.disabled_hooks = {"tp_bft"};
    try {
        HookFallback fallback(probes, e);
        FAIL() << "a misspelt hook must not disable nothing silently";
    } catch (const UsageError &error) {
        EXPECT_TRUE(contains(error.what(), "MEMLAT_DISABLE_HOOKS: 'tp_bft' is not a hook kind"))
            << error.what();
    }
}

namespace {

// Two tools' plans in one process after share_disabled_hooks(): exit status 7 when neither
// refused the other's name, both took it, and only the name no tool knows is left unknown.
[[noreturn]] void plan_two_tools_sharing_disabled_hooks() {
    share_disabled_hooks();
    auto e = environment();
    e.disabled_hooks = {"csd", "writeback_dirty_folio", "tp_bft"};
    HookChoice csd = choice(HookKind::RawTp, "csd_raw");
    csd.family = "csd";
    std::vector<Probe> first{Probe(Id::Flush, "csd", "", {csd}, false)};
    HookFallback one(first, e); // no UsageError for the other tool's name
    HookChoice dirty = choice(HookKind::TpBtf, "dirty_btf");
    dirty.family = "writeback_dirty_folio";
    std::vector<Probe> second{Probe(Id::Flush, "dirty", "", {dirty}, false)};
    HookFallback two(second, e);
    const bool disabled = first[0].chosen < 0 && second[0].chosen < 0;
    const auto unknown = disabled_hooks_unknown(e.disabled_hooks);
    exit(disabled && unknown == std::vector<std::string>{"tp_bft"} ? 7 : 1);
}

} // namespace

TEST(FallbackDeathTest, SharedDisabledHooksAreCheckedAgainstEveryToolAtOnce) {
    // memlat exporter: a name one tool knows is not another's error; a name none knows is
    // found once all have planned. (A death test: the sharing is for the whole process.)
    EXPECT_EXIT(plan_two_tools_sharing_disabled_hooks(), testing::ExitedWithCode(7), "");
}

TEST(Fallback, UnavailableChoicesAreSkippedAndTheExplanationListsTheRest) {
    HookChoice unavailable = choice(HookKind::TpBtf, "flush_btf");
    unavailable.unavailable = "arguments not recognized";
    std::vector<Probe> probes{Probe(Id::Flush, "tlb:tlb_flush", "",
                                    {unavailable, choice(HookKind::RawTp, "flush_raw"),
                                     choice(HookKind::Tracepoint, "flush_tp")})};
    HookFallback fallback(probes, environment());
    EXPECT_EQ((std::vector<std::string>{"tlb:tlb_flush: using raw_tp (flush_raw)",
                                        "  not tp_btf: arguments not recognized",
                                        "  not tracepoint: not needed, raw_tp was accepted"}),
              fallback.explanation());
}

TEST(Fallback, TracepointChoicesAreTheThreeKindsWithTheirSuffixes) {
    auto choices = tracepoint_choices({"begin", "end"}, "family", "no order field");
    ASSERT_EQ(3u, choices.size());
    EXPECT_EQ(HookKind::TpBtf, choices[0].kind);
    EXPECT_EQ((std::vector<std::string>{"begin_btf", "end_btf"}), choices[0].programs);
    EXPECT_EQ(HookKind::RawTp, choices[1].kind);
    EXPECT_EQ((std::vector<std::string>{"begin_raw", "end_raw"}), choices[1].programs);
    EXPECT_EQ(HookKind::Tracepoint, choices[2].kind);
    EXPECT_EQ((std::vector<std::string>{"begin_tp", "end_tp"}), choices[2].programs);
    EXPECT_EQ("family/tracepoint", choices[2].label());
    EXPECT_EQ("", choices[0].caveat);
    EXPECT_EQ("no order field", choices[2].caveat);
}

// A choice made of other probes' programs is no kind of hook: disabling tp_btf leaves it, and
// it needs no kernel BTF; its family names it.
TEST(Fallback, ChoicesFromOtherProbesAreNotDisabledByKind) {
    std::vector<Probe> probes{
        Probe(Id::Flush, "csd:csd_function_entry/exit", "",
              {choice(HookKind::TpBtf, "csd_btf"),
               {.kind = HookKind::FromOtherProbes, .family = "tlb_flush_marks"}})};
    auto e = environment();
    e.disabled_hooks = {"tp_btf"};
    e.kernel_btf = false;
    HookFallback fallback(probes, e);
    EXPECT_EQ(1, probes[0].chosen);
    EXPECT_EQ("tlb_flush_marks", probes[0].choice()->label());
    EXPECT_TRUE(fallback.programs().empty());
    EXPECT_EQ("csd:csd_function_entry/exit: using tlb_flush_marks", fallback.explanation()[0]);
}

TEST(Fallback, AChoiceWhoseProgramsDoNotMatchItsKindIsAMistake) {
    std::vector<Probe> probes{
        Probe(Id::Flush, "tlb:tlb_flush", "", {{.kind = HookKind::TpBtf, .family = "x"}})};
    EXPECT_THROW(HookFallback(probes, environment()), std::logic_error);
}

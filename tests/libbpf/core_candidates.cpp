// Relocates BPF objects against a BTF file with the libbpf this program is linked with, and
// prints what every CO-RE relocation resolved to: each candidate libbpf tried (its type id and
// whether it matched), and each program's final instructions as a hash. It is built twice
// (tests/CMakeLists.txt): with memlat's libbpf, whose patch 0003 finds the candidates through
// an index of the target's names, and with libbpf's own scan of every type (0003 left out),
// so that runtime.libbpf_index_candidates can require the two outputs to be the same.
//
//   core_candidates BTF_FILE OBJECT...     (as root: preparing an object creates its maps)
#include <bpf/libbpf.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::vector<std::string> candidate_lines;

// libbpf's debug line for each candidate of each relocation (relo_core.c): "prog 'P': relo
// #N: matching candidate #I <spec>" or "non-matching"; the rest of its log is not kept.
int keep_candidates(libbpf_print_level, const char *format, va_list args) {
    char line[2048];
    vsnprintf(line, sizeof(line), format, args);
    if (std::strstr(line, " candidate #") != nullptr)
        candidate_lines.emplace_back(line);
    return 0;
}

// FNV-1a over the program's instructions as relocated.
uint64_t instructions_hash(const bpf_program *prog) {
    const auto *bytes = reinterpret_cast<const unsigned char *>(bpf_program__insns(prog));
    const size_t size = bpf_program__insn_cnt(prog) * sizeof(bpf_insn);
    uint64_t hash = 14695981039346656037ull;
    for (size_t i = 0; bytes != nullptr && i < size; ++i)
        hash = (hash ^ bytes[i]) * 1099511628211ull;
    return hash;
}

} // namespace

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s BTF_FILE OBJECT...\n", argv[0]);
        return 2;
    }
    libbpf_set_print(keep_candidates);
    for (int i = 2; i < argc; ++i) {
        bpf_object_open_opts opts{};
        opts.sz = sizeof(opts);
        opts.btf_custom_path = argv[1];
        bpf_object *obj = bpf_object__open_file(argv[i], &opts);
        if (obj == nullptr) {
            std::fprintf(stderr, "%s: cannot open: %s\n", argv[i], std::strerror(errno));
            return 1;
        }
        candidate_lines.clear();
        // Relocates every program, then loads the object's BTF and creates its maps: an error
        // after the relocations is printed, and is the same for both builds.
        const int err = bpf_object__prepare(obj);
        std::printf("object %s: prepared: %d, %zu candidate lines\n", bpf_object__name(obj), err,
                    candidate_lines.size());
        for (const auto &line : candidate_lines)
            std::printf("  %s", line.c_str());
        bpf_program *prog;
        bpf_object__for_each_program(prog, obj) std::printf(
            "  program %s: %zu instructions, hash %016llx\n", bpf_program__name(prog),
            bpf_program__insn_cnt(prog), static_cast<unsigned long long>(instructions_hash(prog)));
        bpf_object__close(obj);
    }
    return 0;
}

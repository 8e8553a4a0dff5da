// Anonymous memory, touched page by page, for memstall's memory.high scenario (VM, cgroup v2):
// optionally first moves itself into a cgroup, then maps MIB MiB of private anonymous memory
// and writes one byte per page. Over the cgroup's memory.high (and without swap to reclaim
// it to) each return to user space is throttled.
//
//   anon_toucher --mb MIB [--cgroup DIR]
// Prints "pid=PID iterations=MIB" when done.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char **argv) {
    long mb = 0;
    std::string cgroup;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string opt = argv[i];
        if (opt == "--mb") {
            mb = atol(argv[i + 1]);
        } else if (opt == "--cgroup") {
            cgroup = argv[i + 1];
        } else {
            fprintf(stderr, "anon_toucher: unknown option %s\n", opt.c_str());
            return 2;
        }
    }
    if (mb <= 0) {
        fprintf(stderr, "anon_toucher: --mb MIB (positive) is required\n");
        return 2;
    }
    if (!cgroup.empty()) {
        std::string procs = cgroup + "/cgroup.procs";
        FILE *f = fopen(procs.c_str(), "w");
        if (f == nullptr || fprintf(f, "%d\n", getpid()) < 0 || fclose(f) != 0) {
            perror(procs.c_str());
            return 1;
        }
    }
    size_t bytes = static_cast<size_t>(mb) << 20;
    auto *p = static_cast<volatile char *>(
        mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (size_t off = 0; off < bytes; off += 4096)
        p[off] = 1;
    printf("pid=%d iterations=%ld\n", getpid(), mb);
    fflush(stdout);
    return 0;
}

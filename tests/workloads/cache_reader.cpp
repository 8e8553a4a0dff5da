// Reads a file for the page-cache tests, like file_reader, but with --wait it first finishes
// starting up (the dynamic loader's own page-cache reads of the libraries), prints "ready" and
// waits for a line on stdin: a tool given its PID then sees only the reads of the file.
//
//   cache_reader --file PATH [--passes N] [--mmap] [--wait]
// Prints "pid=PID iterations=PASSES bytes=B" when done.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

[[noreturn]] void die(const char *what) {
    perror(what);
    std::exit(1);
}

unsigned long read_pass(int fd, std::vector<char> &buf) {
    unsigned long total = 0;
    if (lseek(fd, 0, SEEK_SET) != 0)
        die("lseek");
    for (;;) {
        ssize_t n = read(fd, buf.data(), buf.size());
        if (n < 0)
            die("read");
        if (n == 0)
            return total;
        total += static_cast<unsigned long>(n);
    }
}

unsigned long mmap_pass(int fd, size_t size) {
    void *p = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        die("mmap");
    unsigned long sum = 0;
    for (size_t off = 0; off < size; off += 4096)
        sum += static_cast<const volatile unsigned char *>(p)[off];
    munmap(p, size);
    return size + (sum & 0); // every page is touched; the sum only keeps the loads alive
}

} // namespace

int main(int argc, char **argv) {
    const char *file = nullptr;
    long passes = 1;
    bool use_mmap = false, wait = false;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--mmap") == 0) {
            use_mmap = true;
        } else if (strcmp(argv[i], "--wait") == 0) {
            wait = true;
        } else if (i + 1 < argc && strcmp(argv[i], "--file") == 0) {
            file = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--passes") == 0) {
            passes = atol(argv[++i]);
        } else {
            fprintf(stderr, "cache_reader: bad argument %s\n", argv[i]);
            return 2;
        }
    }
    if (file == nullptr || passes <= 0) {
        fprintf(stderr, "cache_reader: --file PATH is required (and --passes > 0)\n");
        return 2;
    }
    std::vector<char> buf(1 << 20); // allocated and faulted before the wait
    memset(buf.data(), 0, buf.size());
    if (wait) {
        printf("ready\n");
        fflush(stdout);
        char line[16];
        if (fgets(line, sizeof(line), stdin) == nullptr)
            return 1;
    }
    int fd = open(file, O_RDONLY);
    if (fd < 0)
        die(file);
    struct stat st {};
    if (fstat(fd, &st) != 0)
        die("fstat");
    unsigned long bytes = 0;
    for (long pass = 0; pass < passes; ++pass)
        bytes += use_mmap ? mmap_pass(fd, static_cast<size_t>(st.st_size)) : read_pass(fd, buf);
    close(fd);
    printf("pid=%d iterations=%ld bytes=%lu\n", getpid(), passes, bytes);
    return 0;
}

// Writes a file, for the page-cache tests: creates (or truncates) it and writes MIB mebibytes
// with write(2) in 1 MiB chunks, so every page of it goes from clean to dirty exactly once;
// with --fsync it then writes the data back and waits, leaving no dirty page behind.
//
//   cache_writer --file PATH --mib N [--fsync]
// Prints "pid=PID iterations=1 bytes=B" when done.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "workload.h"

using workload::die;
using workload::Option;

int main(int argc, char **argv) {
    std::string file;
    long mib = 16;
    bool do_fsync = false;
    workload::parse_options(
        "cache_writer", argc, argv,
        {Option("--file", file), Option("--mib", mib), Option("--fsync", do_fsync)});
    if (file.empty() || mib <= 0) {
        fprintf(stderr, "cache_writer: --file PATH and a positive --mib are required\n");
        return 2;
    }
    int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        die(file.c_str());
    std::vector<char> chunk(1 << 20, 'w');
    unsigned long bytes = 0;
    for (long i = 0; i < mib; ++i) {
        size_t done = 0;
        while (done < chunk.size()) {
            ssize_t n = write(fd, chunk.data() + done, chunk.size() - done);
            if (n < 0)
                die("write");
            done += static_cast<size_t>(n);
        }
        bytes += done;
    }
    if (do_fsync && fsync(fd) != 0)
        die("fsync");
    close(fd);
    printf("pid=%d iterations=1 bytes=%lu\n", getpid(), bytes);
    return 0;
}

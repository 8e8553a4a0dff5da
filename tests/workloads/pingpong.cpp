// Context switches and nothing else, for bench/'s memstall entry (its sched_switch program
// runs on every switch): two threads hand a byte back and forth through two pipes, ITERATIONS
// round trips, each thread blocking in read() in between. No memory stall anywhere.
//
//   pingpong [--iterations N]
// Prints "pid=PID iterations=N" when done.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "workload.h"

namespace {

void relay(int in, int out, long iterations) {
    char byte = 0;
    for (long i = 0; i < iterations; ++i) {
        if (read(in, &byte, 1) != 1 || write(out, &byte, 1) != 1) {
            perror("pingpong");
            std::exit(1);
        }
    }
}

} // namespace

int main(int argc, char **argv) {
    long iterations = 100000;
    workload::parse_options("pingpong", argc, argv, {workload::Option("--iterations", iterations)});
    int ping[2], pong[2];
    if (pipe(ping) != 0 || pipe(pong) != 0) {
        perror("pipe");
        return 1;
    }
    std::thread other(relay, ping[0], pong[1], iterations);
    char byte = 'x';
    for (long i = 0; i < iterations; ++i) {
        if (write(ping[1], &byte, 1) != 1 || read(pong[0], &byte, 1) != 1) {
            perror("pingpong");
            return 1;
        }
    }
    other.join();
    printf("pid=%d iterations=%ld\n", getpid(), iterations);
    return 0;
}

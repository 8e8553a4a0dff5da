// Whether a task the BPF side counted still exists (tasks.h): what the exporters prune by.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include "kernel/tasks.h"

using namespace memlat;

TEST(Tasks, ALiveTaskHasNotExited) {
    EXPECT_FALSE(task_exited(static_cast<uint32_t>(getpid())));
    EXPECT_FALSE(task_exited(1)); // init, even where signalling it is not allowed
}

TEST(Tasks, AReapedChildHasExited) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0)
        _exit(0);
    int status = 0;
    ASSERT_EQ(child, waitpid(child, &status, 0));
    EXPECT_TRUE(task_exited(static_cast<uint32_t>(child)));
}

// Delay accounting of one task, for the VM checkers (the guest has no Python; the host's tests
// have their own client in tests/runtime/test_memstall.py): TASKSTATS_CMD_GET over generic
// netlink, one "FIELD VALUE" line per field the running kernel's struct taskstats holds (an
// older kernel answers with a shorter struct: the fields past its end are not printed).
//
//   taskstats TID
// Exit status 1 when the kernel refuses (no such task, no CONFIG_TASKSTATS).
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/taskstats.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

struct Field {
    const char *name;
    size_t offset;
    size_t size;
};

#define TASKSTATS_FIELD(f)                                                                         \
    Field {                                                                                        \
#f, offsetof(taskstats, f), sizeof(taskstats::f)                                           \
    }
const Field fields[] = {
    TASKSTATS_FIELD(version),
    TASKSTATS_FIELD(cpu_count),
    TASKSTATS_FIELD(cpu_delay_total),
    TASKSTATS_FIELD(blkio_count),
    TASKSTATS_FIELD(blkio_delay_total),
    TASKSTATS_FIELD(swapin_count),
    TASKSTATS_FIELD(swapin_delay_total),
    TASKSTATS_FIELD(freepages_count),
    TASKSTATS_FIELD(freepages_delay_total),
    TASKSTATS_FIELD(thrashing_count),
    TASKSTATS_FIELD(thrashing_delay_total),
    TASKSTATS_FIELD(compact_count),
    TASKSTATS_FIELD(compact_delay_total),
};
#undef TASKSTATS_FIELD

// The attributes of a netlink payload, by type (nested ones still packed).
std::map<int, std::vector<char>> attributes(const char *data, size_t len) {
    std::map<int, std::vector<char>> out;
    while (len >= NLA_HDRLEN) {
        nlattr a;
        memcpy(&a, data, sizeof(a));
        if (a.nla_len < NLA_HDRLEN || a.nla_len > len)
            break;
        out[a.nla_type & NLA_TYPE_MASK].assign(data + NLA_HDRLEN, data + a.nla_len);
        size_t step = NLA_ALIGN(a.nla_len);
        if (step >= len)
            break;
        data += step;
        len -= step;
    }
    return out;
}

class Netlink {
  public:
    Netlink() : fd_(socket(AF_NETLINK, SOCK_RAW, NETLINK_GENERIC)) {
        sockaddr_nl local{};
        local.nl_family = AF_NETLINK;
        if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr *>(&local), sizeof(local)) != 0) {
            perror("taskstats: netlink socket");
            exit(1);
        }
    }
    ~Netlink() { close(fd_); }

    // One request with one attribute; the reply's attributes (past the genetlink header).
    std::map<int, std::vector<char>> request(int family, int cmd, int attr, const void *payload,
                                             size_t size) {
        std::vector<char> msg(NLMSG_LENGTH(GENL_HDRLEN) + NLA_ALIGN(NLA_HDRLEN + size));
        auto *nh = reinterpret_cast<nlmsghdr *>(msg.data());
        nh->nlmsg_len = msg.size();
        nh->nlmsg_type = family;
        nh->nlmsg_flags = NLM_F_REQUEST;
        nh->nlmsg_seq = ++seq_;
        auto *gh = static_cast<genlmsghdr *>(NLMSG_DATA(nh));
        gh->cmd = cmd;
        gh->version = 1;
        nlattr a{static_cast<__u16>(NLA_HDRLEN + size), static_cast<__u16>(attr)};
        char *at = msg.data() + NLMSG_LENGTH(GENL_HDRLEN);
        memcpy(at, &a, sizeof(a));
        memcpy(at + NLA_HDRLEN, payload, size);
        if (send(fd_, msg.data(), msg.size(), 0) < 0) {
            perror("taskstats: send");
            exit(1);
        }
        std::vector<char> reply(65536);
        ssize_t n = recv(fd_, reply.data(), reply.size(), 0);
        if (n < static_cast<ssize_t>(NLMSG_HDRLEN)) {
            perror("taskstats: recv");
            exit(1);
        }
        auto *rh = reinterpret_cast<nlmsghdr *>(reply.data());
        if (rh->nlmsg_type == NLMSG_ERROR) {
            auto *err = static_cast<nlmsgerr *>(NLMSG_DATA(rh));
            fprintf(stderr, "taskstats: the kernel refused: %s\n", strerror(-err->error));
            exit(1);
        }
        size_t len = std::min<size_t>(rh->nlmsg_len, n);
        size_t head = NLMSG_LENGTH(GENL_HDRLEN);
        return len > head ? attributes(reply.data() + head, len - head)
                          : std::map<int, std::vector<char>>{};
    }

  private:
    int fd_;
    unsigned seq_ = 0;
};

} // namespace

int main(int argc, char **argv) {
    if (argc != 2 || atoi(argv[1]) <= 0) {
        fprintf(stderr, "usage: taskstats TID\n");
        return 2;
    }
    __u32 tid = atoi(argv[1]);
    Netlink nl;
    auto family_reply = nl.request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, CTRL_ATTR_FAMILY_NAME,
                                   TASKSTATS_GENL_NAME, sizeof(TASKSTATS_GENL_NAME));
    auto id = family_reply.find(CTRL_ATTR_FAMILY_ID);
    if (id == family_reply.end() || id->second.size() < sizeof(__u16)) {
        fprintf(stderr, "taskstats: no TASKSTATS generic netlink family\n");
        return 1;
    }
    __u16 family;
    memcpy(&family, id->second.data(), sizeof(family));
    auto reply = nl.request(family, TASKSTATS_CMD_GET, TASKSTATS_CMD_ATTR_PID, &tid, sizeof(tid));
    auto aggr = reply.find(TASKSTATS_TYPE_AGGR_PID);
    if (aggr == reply.end()) {
        fprintf(stderr, "taskstats: no statistics in the reply\n");
        return 1;
    }
    auto inner = attributes(aggr->second.data(), aggr->second.size());
    auto stats = inner.find(TASKSTATS_TYPE_STATS);
    if (stats == inner.end()) {
        fprintf(stderr, "taskstats: no statistics in the reply\n");
        return 1;
    }
    for (const Field &f : fields) {
        if (f.offset + f.size > stats->second.size())
            continue;
        unsigned long long value = 0;
        memcpy(&value, stats->second.data() + f.offset, f.size); // little-endian guests only
        printf("%s %llu\n", f.name, value);
    }
    return 0;
}

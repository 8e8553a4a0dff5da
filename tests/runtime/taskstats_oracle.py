"""Delay accounting as an oracle: a taskstats client over generic netlink of our own, and
kernel.task_delayacct turned on for a block (tasks started inside it are accounted) and
restored. Per task: the count and total time of reclaim ("freepages") and thrashing stalls.
Delay accounting starts its reclaim clock inside do_try_to_free_pages, within the tracepoint
window the tools time, so its total is a little smaller than theirs and never larger. Used by
test_memstall.py and test_oomwhy.py."""
import contextlib
import os
import socket
import struct

from memlat_test import read_file, skip, write_file



class Taskstats:
    """A taskstats client (linux/taskstats.h) over generic netlink: TASKSTATS_CMD_GET for one
    task. Only the standard library: a raw AF_NETLINK socket, messages packed by hand."""

    NETLINK_GENERIC = 16
    GENL_ID_CTRL = 0x10
    CTRL_CMD_GETFAMILY = 3
    CTRL_ATTR_FAMILY_ID = 1
    CTRL_ATTR_FAMILY_NAME = 2
    TASKSTATS_CMD_GET = 1
    TASKSTATS_CMD_ATTR_PID = 1
    TASKSTATS_TYPE_STATS = 3
    TASKSTATS_TYPE_AGGR_PID = 4
    NLM_F_REQUEST = 1
    NLMSG_ERROR = 2
    # Offsets in struct taskstats, an append-only ABI (checked with offsetof() against
    # version 13 of the header; this 6.18 kernel answers with version 16).
    FIELDS = {"version": (0, "H"), "swapin_count": (48, "Q"), "swapin_delay_total": (56, "Q"),
              "freepages_count": (312, "Q"), "freepages_delay_total": (320, "Q"),
              "thrashing_count": (328, "Q"), "thrashing_delay_total": (336, "Q"),
              "compact_count": (352, "Q"), "compact_delay_total": (360, "Q")}

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, self.NETLINK_GENERIC)
        self.sock.bind((0, 0))
        self.seq = 0
        reply = self._request(self.GENL_ID_CTRL, self.CTRL_CMD_GETFAMILY,
                              self._attr(self.CTRL_ATTR_FAMILY_NAME, b"TASKSTATS\0"))
        self.family = struct.unpack("H", reply[self.CTRL_ATTR_FAMILY_ID][:2])[0]

    @staticmethod
    def _attr(kind: int, payload: bytes) -> bytes:
        a = struct.pack("HH", 4 + len(payload), kind) + payload
        return a + b"\0" * (((len(a) + 3) & ~3) - len(a))

    @staticmethod
    def _attrs(data: bytes) -> dict[int, bytes]:
        out = {}
        while len(data) >= 4:
            length, kind = struct.unpack_from("HH", data)
            if length < 4:
                break
            out[kind & 0x3fff] = data[4:length]
            data = data[(length + 3) & ~3:]
        return out

    def _request(self, family: int, cmd: int, attrs: bytes) -> dict[int, bytes]:
        self.seq += 1
        payload = struct.pack("BBH", cmd, 1, 0) + attrs  # genlmsghdr: cmd, version 1
        self.sock.send(struct.pack("IHHII", 16 + len(payload), family, self.NLM_F_REQUEST,
                                   self.seq, 0) + payload)
        data = self.sock.recv(65536)
        length, kind = struct.unpack_from("IH", data)
        if kind == self.NLMSG_ERROR:
            err = -struct.unpack_from("i", data, 16)[0]
            raise OSError(err, f"taskstats: {os.strerror(err)}")
        return self._attrs(data[20:length])  # past nlmsghdr (16) and genlmsghdr (4)

    def get(self, tid: int) -> dict[str, int]:
        reply = self._request(self.family, self.TASKSTATS_CMD_GET,
                              self._attr(self.TASKSTATS_CMD_ATTR_PID, struct.pack("I", tid)))
        stats = self._attrs(reply[self.TASKSTATS_TYPE_AGGR_PID])[self.TASKSTATS_TYPE_STATS]
        return {k: struct.unpack_from(f, stats, off)[0] for k, (off, f) in self.FIELDS.items()}

    def close(self) -> None:
        self.sock.close()


@contextlib.contextmanager
def delay_accounting():
    """kernel.task_delayacct on for the block (tasks started inside it are accounted), then
    restored. Yields a Taskstats client."""
    knob = "/proc/sys/kernel/task_delayacct"
    if not os.path.exists(knob):
        skip("no kernel.task_delayacct (CONFIG_TASK_DELAY_ACCT off): no oracle")
    old = read_file(knob).strip()
    write_file(knob, "1")
    client = None
    try:
        client = Taskstats()
        yield client
    finally:
        if client:
            client.close()
        write_file(knob, old)

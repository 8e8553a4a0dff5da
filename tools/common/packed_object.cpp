// Every skeleton's NAME_bpf__elf_bytes() (btfgen pack-skeleton, cmake/BpfSkeleton.cmake) gets
// its BPF object from here, zlib-packed in the binary: the five objects take 125 KB instead of
// 800 KB, which pays for the exporter's Asio.
#include <cstddef>
#include <fmt/format.h>
#include <map>
#include <vector>
#include <zlib.h>

#include "errors.h"

// Inflated once and kept for the run, since libbpf reads the object at each open (a tool that
// falls back to other hooks opens its skeleton again).
const void *memlat_unpack_bpf_object(const unsigned char *packed, size_t packed_size,
                                     size_t raw_size, size_t *size) {
    static std::map<const unsigned char *, std::vector<unsigned char>> unpacked;
    auto &raw = unpacked[packed];
    if (raw.empty()) {
        raw.resize(raw_size);
        uLongf length = raw_size;
        const int err = uncompress(raw.data(), &length, packed, packed_size);
        if (err != Z_OK || length != raw_size) {
            unpacked.erase(packed);
            throw memlat::RuntimeError(
                fmt::format("The BPF object embedded in this binary is damaged ({}).",
                            err != Z_OK ? zError(err) : "wrong size"));
        }
    }
    *size = raw.size();
    return raw.data();
}

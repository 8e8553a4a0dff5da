// Every skeleton's NAME_bpf__elf_bytes() (btfgen pack-skeleton, cmake/BpfSkeleton.cmake) gets
// its BPF object from here, zlib-packed in the binary: the five objects take 125 KB instead of
// 800 KB, which pays for the exporter's Asio.
#include <cstddef>
#include <fmt/format.h>
#include <vector>
#include <zlib.h>

#include "base/errors.h"

namespace {

// The object inflated for the skeleton being opened. libbpf reads it only while the skeleton
// opens (it copies what it keeps: instructions, BTF, initial global data), so it is dropped
// as soon as the open returns (release_unpacked_bpf_object): 100-270 KB less during the
// load, when libbpf's index of the kernel BTF is the largest thing the tool holds. A tool
// that falls back to other hooks opens its skeleton again and inflates it again (< 1 ms).
std::vector<unsigned char> &inflated() {
    static std::vector<unsigned char> object;
    return object;
}

} // namespace

namespace memlat {

void release_unpacked_bpf_object() {
    std::vector<unsigned char>().swap(inflated());
}

} // namespace memlat

const void *memlat_unpack_bpf_object(const unsigned char *packed, size_t packed_size,
                                     size_t raw_size, size_t *size) {
    auto &raw = inflated();
    raw.assign(raw_size, 0);
    uLongf length = raw_size;
    const int err = uncompress(raw.data(), &length, packed, packed_size);
    if (err != Z_OK || length != raw_size) {
        memlat::release_unpacked_bpf_object();
        throw memlat::RuntimeError(
            fmt::format("The BPF object embedded in this binary is damaged ({}).",
                        err != Z_OK ? zError(err) : "wrong size"));
    }
    *size = raw.size();
    return raw.data();
}

// Build-time host tool for the BTF embedded in the tools (cmake/EmbeddedBtf.cmake).
//
//   btfgen extend FULL.btf MIN.btf TYPES.txt OUT.btf
//       MIN.btf (bpftool gen min_core_btf: the types the BPF object relocates against) plus
//       the types user space reads, listed in TYPES.txt, copied from the kernel's FULL.btf.
//   btfgen trim FULL.btf OUT.btf
//       The kernel's BTF without what neither CO-RE nor user space reads: functions (FUNC),
//       variables and data sections, declaration tags, and the prototypes only functions
//       used. About a third smaller; what Makefile.btf checks in for each kernel.
//   btfgen embed OUT.cpp [ID VERSION_ID NAME RELEASE FILE.btf]...
//       A C++ source defining memlat::embedded_btfs(): each FILE compressed with zlib (which
//       the static tools link anyway, for libbpf), with its index entry. No entries: an empty
//       index.
//   btfgen pack-skeleton OBJ.bpf.o NAME IN.skel.h OUT.skel.h
//       bpftool's skeleton IN with the BPF object it embeds (OBJ, a few hundred KB as a C
//       string) zlib-compressed to a fifth of that: NAME_bpf__elf_bytes() inflates it at open
//       through memlat_unpack_bpf_object() (lib/loading/packed_object.cpp).
//
// Types are copied only where MIN has none of the same name and kind, so CO-RE never sees
// two candidates for one type; structs and unions become forward declarations, since user
// space reads no members and the full definitions would pull in most of the kernel.
#include <bpf/btf.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

struct BtfFree {
    void operator()(btf *b) const { btf__free(b); }
};
using BtfPtr = std::unique_ptr<btf, BtfFree>;

struct FileClose {
    void operator()(FILE *f) const { fclose(f); }
};
using FilePtr = std::unique_ptr<FILE, FileClose>;

[[noreturn]] void fail(const std::string &what) {
    throw std::runtime_error(what);
}

BtfPtr parse(const char *path) {
    BtfPtr b(btf__parse(path, nullptr));
    if (!b)
        fail(std::string("cannot parse BTF ") + path + ": " + strerror(errno));
    return b;
}

std::string read_file(const char *path) {
    FilePtr f(fopen(path, "rb"));
    if (!f)
        fail(std::string("cannot open ") + path + ": " + strerror(errno));
    std::string data;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f.get())) > 0)
        data.append(buf, n);
    return data;
}

void write_file(const char *path, const void *data, size_t size) {
    std::string tmp = std::string(path) + ".tmp";
    FilePtr f(fopen(tmp.c_str(), "wb"));
    if (!f || fwrite(data, 1, size, f.get()) != size)
        fail("cannot write " + tmp);
    f.reset();
    if (rename(tmp.c_str(), path) != 0)
        fail(std::string("cannot rename to ") + path);
}

// Copies types from the kernel's full BTF into the minimized one, remembering what it copied.
class TypeCopier {
  public:
    TypeCopier(const btf *from, btf *to) : from_(from), to_(to) {}

    int copy(int id) {
        if (id == 0)
            return 0; // void
        if (auto it = copied_.find(id); it != copied_.end())
            return it->second;
        const btf_type *t = btf__type_by_id(from_, id);
        const char *name = btf__name_by_offset(from_, t->name_off);
        if (name != nullptr && *name != '\0') {
            int existing = btf__find_by_name_kind(to_, name, btf_kind(t));
            if (existing > 0)
                return copied_[id] = existing;
        }
        int made = make(t, name);
        if (made < 0)
            fail(std::string("cannot copy type ") + (name ? name : "(anonymous)") + ": " +
                 strerror(-made));
        return copied_[id] = made;
    }

  private:
    int make(const btf_type *t, const char *name) {
        switch (btf_kind(t)) {
        case BTF_KIND_INT:
            return btf__add_int(to_, name, t->size, btf_int_encoding(t));
        case BTF_KIND_FLOAT:
            return btf__add_float(to_, name, t->size);
        case BTF_KIND_PTR:
            return btf__add_ptr(to_, copy(t->type));
        case BTF_KIND_TYPEDEF:
            return btf__add_typedef(to_, name, copy(t->type));
        case BTF_KIND_CONST:
            return btf__add_const(to_, copy(t->type));
        case BTF_KIND_VOLATILE:
            return btf__add_volatile(to_, copy(t->type));
        case BTF_KIND_RESTRICT:
            return btf__add_restrict(to_, copy(t->type));
        case BTF_KIND_STRUCT:
        case BTF_KIND_FWD:
            return btf__add_fwd(to_, name,
                                btf_kflag(t) && btf_is_fwd(t) ? BTF_FWD_UNION : BTF_FWD_STRUCT);
        case BTF_KIND_UNION:
            return btf__add_fwd(to_, name, BTF_FWD_UNION);
        case BTF_KIND_ENUM: {
            int id = btf__add_enum(to_, name, t->size);
            const struct btf_enum *e = btf_enum(t);
            for (int i = 0; id > 0 && i < btf_vlen(t); ++i)
                if (int err = btf__add_enum_value(to_, btf__name_by_offset(from_, e[i].name_off),
                                                  e[i].val))
                    return err;
            return id;
        }
        case BTF_KIND_ENUM64: {
            int id = btf__add_enum64(to_, name, t->size, btf_kflag(t));
            const struct btf_enum64 *e = btf_enum64(t);
            for (int i = 0; id > 0 && i < btf_vlen(t); ++i)
                if (int err = btf__add_enum64_value(to_, btf__name_by_offset(from_, e[i].name_off),
                                                    btf_enum64_value(&e[i])))
                    return err;
            return id;
        }
        case BTF_KIND_FUNC_PROTO: {
            // Parameters must directly follow their prototype: copy their types first.
            int ret = copy(t->type);
            std::vector<int> params;
            const btf_param *p = btf_params(t);
            for (int i = 0; i < btf_vlen(t); ++i)
                params.push_back(copy(p[i].type));
            int id = btf__add_func_proto(to_, ret);
            for (int i = 0; id > 0 && i < btf_vlen(t); ++i)
                if (int err = btf__add_func_param(to_, btf__name_by_offset(from_, p[i].name_off),
                                                  params[i]))
                    return err;
            return id;
        }
        default:
            return -EOPNOTSUPP;
        }
    }

    const btf *from_;
    btf *to_;
    std::map<int, int> copied_;
};

// The anonymous enum whose first member is `member` (___GFP_DMA_BIT), or 0.
int find_enum_by_member(const btf *b, std::string_view member) {
    const int count = static_cast<int>(btf__type_cnt(b));
    for (int id = 1; id < count; ++id) {
        const btf_type *t = btf__type_by_id(b, id);
        if (btf_is_enum(t) && btf_vlen(t) > 0 &&
            member == btf__name_by_offset(b, btf_enum(t)[0].name_off))
            return id;
    }
    return 0;
}

// TYPES.txt: one "KIND NAME" a line ("enum zone_type", "typedef btf_trace_mm_migrate_pages",
// "enum-with ___GFP_DMA_BIT" for an anonymous enum by its first member); # comments.
int extend(const char *full_path, const char *min_path, const char *types_path,
           const char *out_path) {
    BtfPtr full = parse(full_path), min = parse(min_path);
    TypeCopier copier(full.get(), min.get());
    std::string list = read_file(types_path);
    size_t pos = 0;
    while (pos < list.size()) {
        size_t end = list.find('\n', pos);
        std::string line =
            list.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        pos = end == std::string::npos ? list.size() : end + 1;
        if (auto hash = line.find('#'); hash != std::string::npos)
            line.resize(hash);
        char kind[32], name[256];
        if (sscanf(line.c_str(), "%31s %255s", kind, name) != 2)
            continue;
        int id = 0;
        if (std::string_view(kind) == "enum") {
            id = btf__find_by_name_kind(full.get(), name, BTF_KIND_ENUM);
            if (id < 0)
                id = btf__find_by_name_kind(full.get(), name, BTF_KIND_ENUM64);
        } else if (std::string_view(kind) == "typedef") {
            id = btf__find_by_name_kind(full.get(), name, BTF_KIND_TYPEDEF);
        } else if (std::string_view(kind) == "enum-with") {
            id = find_enum_by_member(full.get(), name);
        } else {
            fail(std::string(types_path) + ": unknown kind " + kind);
        }
        // Kernels differ in what they have; user space falls back where a type is missing.
        if (id > 0)
            copier.copy(id);
    }
    uint32_t size = 0;
    const void *raw = btf__raw_data(min.get(), &size);
    if (raw == nullptr)
        fail("cannot serialize the BTF");
    write_file(out_path, raw, size);
    return 0;
}

// Calls visit(type id field) for every type id a type refers to.
template <typename Visit>
void for_each_ref(btf_type *t, Visit visit) {
    switch (btf_kind(t)) {
    case BTF_KIND_PTR:
    case BTF_KIND_TYPEDEF:
    case BTF_KIND_CONST:
    case BTF_KIND_VOLATILE:
    case BTF_KIND_RESTRICT:
    case BTF_KIND_TYPE_TAG:
    case BTF_KIND_FUNC:
    case BTF_KIND_VAR:
    case BTF_KIND_DECL_TAG:
        visit(t->type);
        break;
    case BTF_KIND_ARRAY:
        visit(btf_array(t)->type);
        visit(btf_array(t)->index_type);
        break;
    case BTF_KIND_STRUCT:
    case BTF_KIND_UNION:
        for (int i = 0; i < btf_vlen(t); ++i)
            visit(btf_members(t)[i].type);
        break;
    case BTF_KIND_FUNC_PROTO:
        visit(t->type);
        for (int i = 0; i < btf_vlen(t); ++i)
            visit(btf_params(t)[i].type);
        break;
    case BTF_KIND_DATASEC:
        for (int i = 0; i < btf_vlen(t); ++i)
            visit(btf_var_secinfos(t)[i].type);
        break;
    default:
        break;
    }
}

// libbpf hands out const types; the copies in a BTF being built are ours to patch.
btf_type *mutable_type(const btf *b, int id) {
    return const_cast<btf_type *>(btf__type_by_id(b, id));
}

int trim(const char *full_path, const char *out_path) {
    BtfPtr full = parse(full_path);
    const int count = static_cast<int>(btf__type_cnt(full.get()));
    // Keep every type but functions, variables, sections and tags, and what they refer to;
    // anonymous prototypes only as far as a kept type (a function pointer member, the
    // btf_trace_* typedefs) refers to them.
    std::vector<bool> keep(count, false);
    std::vector<int> pending;
    for (int id = 1; id < count; ++id) {
        switch (btf_kind(btf__type_by_id(full.get(), id))) {
        case BTF_KIND_FUNC:
        case BTF_KIND_VAR:
        case BTF_KIND_DATASEC:
        case BTF_KIND_DECL_TAG:
        case BTF_KIND_FUNC_PROTO:
            break;
        default:
            keep[id] = true;
            pending.push_back(id);
        }
    }
    while (!pending.empty()) {
        int id = pending.back();
        pending.pop_back();
        for_each_ref(mutable_type(full.get(), id), [&](__u32 &ref) {
            if (ref != 0 && !keep[ref]) {
                keep[ref] = true;
                pending.push_back(static_cast<int>(ref));
            }
        });
    }
    std::vector<__u32> new_id(count, 0);
    __u32 next = 1;
    for (int id = 1; id < count; ++id)
        if (keep[id])
            new_id[id] = next++;
    BtfPtr out(btf__new_empty());
    for (int id = 1; id < count; ++id) {
        if (!keep[id])
            continue;
        int made = btf__add_type(out.get(), full.get(), btf__type_by_id(full.get(), id));
        if (made < 0 || static_cast<__u32>(made) != new_id[id])
            fail("cannot copy type " + std::to_string(id));
        for_each_ref(mutable_type(out.get(), made), [&](__u32 &ref) { ref = new_id[ref]; });
    }
    uint32_t size = 0;
    const void *raw = btf__raw_data(out.get(), &size);
    if (raw == nullptr)
        fail("cannot serialize the BTF");
    write_file(out_path, raw, size);
    fprintf(stderr, "btfgen: kept %u of %d types\n", next - 1, count - 1);
    return 0;
}

std::string c_string(std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\')
            out += '\\';
        out += c;
    }
    return out + "\"";
}

int embed(const char *out_path, int entries, char **args) {
    std::string src = "// Generated by btfgen embed (cmake/EmbeddedBtf.cmake). Do not edit.\n"
                      "#include \"kernel/btf.h\"\n\nnamespace {\n";
    std::string index;
    for (int i = 0; i < entries; ++i) {
        char **e = args + 5 * i;
        std::string raw = read_file(e[4]);
        uLongf n = compressBound(raw.size());
        std::vector<unsigned char> packed(n);
        if (compress2(packed.data(), &n, reinterpret_cast<const Bytef *>(raw.data()), raw.size(),
                      Z_BEST_COMPRESSION) != Z_OK)
            fail("zlib cannot compress " + std::string(e[4]));
        src += "const unsigned char btf" + std::to_string(i) + "[] = {";
        for (size_t j = 0; j < n; ++j)
            src += (j % 24 == 0 ? "\n" : "") + std::to_string(packed[j]) + ",";
        src += "\n};\n";
        index += "        {" + c_string(e[0]) + ", " + c_string(e[1]) + ", " + c_string(e[2]) +
                 ", " + c_string(e[3]) + ", btf" + std::to_string(i) + ", sizeof(btf" +
                 std::to_string(i) + "), " + std::to_string(raw.size()) + "},\n";
        fprintf(stderr, "btfgen: %s %s: %zu bytes of BTF, %lu compressed\n", e[2], e[3], raw.size(),
                static_cast<unsigned long>(n));
    }
    src += "} // namespace\n\nstd::span<const memlat::EmbeddedBtf> memlat::embedded_btfs() {\n";
    if (entries == 0) {
        src += "    return {};\n}\n";
    } else {
        src +=
            "    static const EmbeddedBtf index[] = {\n" + index + "    };\n    return index;\n}\n";
    }
    write_file(out_path, src.data(), src.size());
    return 0;
}

std::string byte_array(const std::string &raw, uLongf *packed_size) {
    uLongf n = compressBound(raw.size());
    std::vector<unsigned char> packed(n);
    if (compress2(packed.data(), &n, reinterpret_cast<const Bytef *>(raw.data()), raw.size(),
                  Z_BEST_COMPRESSION) != Z_OK)
        fail("zlib cannot compress");
    std::string out = "{";
    for (size_t j = 0; j < n; ++j)
        out += (j % 24 == 0 ? "\n" : "") + std::to_string(packed[j]) + ",";
    *packed_size = n;
    return out + "\n}";
}

int pack_skeleton(const char *object_path, const std::string &name, const char *in_path,
                  const char *out_path) {
    const std::string object = read_file(object_path);
    std::string skel = read_file(in_path);
    // bpftool declares the function once, then defines it after the skeleton's set-up.
    const std::string head = "static inline const void *" + name + "_bpf__elf_bytes(size_t *sz)";
    const size_t declaration = skel.find(head + ";");
    const size_t definition = skel.find(head + "\n{");
    const size_t end =
        definition == std::string::npos ? definition : skel.find("\n}\n", definition);
    if (declaration == std::string::npos || end == std::string::npos)
        fail(std::string(in_path) + ": no " + name +
             "_bpf__elf_bytes() in the form bpftool writes; has bpftool changed its skeletons?");
    uLongf packed_size = 0;
    const std::string bytes = byte_array(object, &packed_size);
    const std::string body = head +
                             "\n{\n\t/* btfgen pack-skeleton: the BPF object, zlib-compressed. */\n"
                             "\tstatic const unsigned char packed[] = " +
                             bytes +
                             ";\n\treturn memlat_unpack_bpf_object(packed, sizeof(packed), " +
                             std::to_string(object.size()) + ", sz);\n}\n";
    skel.replace(definition, end + 3 - definition, body);
    skel.insert(declaration, "const void *memlat_unpack_bpf_object(const unsigned char *packed, "
                             "size_t packed_size, size_t raw_size, size_t *size);\n");
    write_file(out_path, skel.data(), skel.size());
    fprintf(stderr, "btfgen: %s: BPF object of %zu bytes, %lu compressed\n", name.c_str(),
            object.size(), static_cast<unsigned long>(packed_size));
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    try {
        std::string_view command = argc > 1 ? argv[1] : "";
        if (command == "extend" && argc == 6)
            return extend(argv[2], argv[3], argv[4], argv[5]);
        if (command == "trim" && argc == 4)
            return trim(argv[2], argv[3]);
        if (command == "embed" && argc >= 3 && (argc - 3) % 5 == 0)
            return embed(argv[2], (argc - 3) / 5, argv + 3);
        if (command == "pack-skeleton" && argc == 6)
            return pack_skeleton(argv[2], argv[3], argv[4], argv[5]);
        fprintf(stderr, "usage: btfgen extend FULL.btf MIN.btf TYPES.txt OUT.btf\n"
                        "       btfgen trim FULL.btf OUT.btf\n"
                        "       btfgen embed OUT.cpp [ID VERSION_ID NAME RELEASE FILE.btf]...\n"
                        "       btfgen pack-skeleton OBJ.bpf.o NAME IN.skel.h OUT.skel.h\n");
        return 2;
    } catch (const std::exception &e) {
        fprintf(stderr, "btfgen: %s\n", e.what());
        return 1;
    }
}

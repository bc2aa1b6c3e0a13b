/* Minimal, bounds-checked ELF64 reader: exported dynamic symbols (tvm-ffi function discovery),
 * DT_NEEDED entries, and the CUDA fat binaries in .nv_fatbin (GPU fitness).
 *
 * Fat binary layout, as observed in nvcc 13.0 output (see docs/loading.md):
 *   container header (16 bytes): u32 magic 0xBA55ED50, u16 version (1), u16 header size,
 *                                u64 size of the entries that follow;
 *   entry header: u16 kind (1 = PTX, 2 = ELF cubin), u16 version, u32 header size,
 *                 u64 payload size, u32 @16, u32 @20, u32 @24 (format version),
 *                 u32 @28 sm (80, 90, 100, ...), u32 @32, u32 @36, u64 @40 flags;
 *   flags: 0x8000 compressed payload, 0x100000 arch-specific ("a"), 0x200000 family ("f").
 * Several containers may follow each other (one per translation unit), 8-byte aligned.
 *
 * Headers, symbols and dynamic entries are copied out with memcpy: a file may place them at any
 * offset, and reading an Elf64_* through a pointer that is not 8-aligned is undefined behaviour. */
#include "kernel/kernel_internal.h"

#include "util/vec.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct elf_file {
    const unsigned char *base;
    size_t size;
    Elf64_Ehdr eh;   /* a copy */
    size_t shoff;    /* of the section table; checked to hold shnum entries */
    size_t shnum;
} elf_file;

/* Section header i (i < shnum). */
static Elf64_Shdr elf_shdr(const elf_file *ef, size_t i) {
    Elf64_Shdr s;
    memcpy(&s, ef->base + ef->shoff + i * sizeof s, sizeof s);
    return s;
}

static int elf_open(elf_file *ef, const char *path) {
    memset(ef, 0, sizeof *ef);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return hk__fail(hk__errno_code(errno), "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return hk__fail(HK_ERR_IO, "cannot stat %s: %s", path, strerror(e));
    }
    if (st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        return hk__fail(HK_ERR_LOAD, "%s is not an ELF library (too small)", path);
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED) return hk__fail(HK_ERR_IO, "cannot map %s: %s", path, strerror(e));
    ef->base = m;
    ef->size = (size_t)st.st_size;
    memcpy(&ef->eh, ef->base, sizeof ef->eh);
    const Elf64_Ehdr *eh = &ef->eh;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_ident[EI_DATA] != ELFDATA2LSB) {
        munmap(m, ef->size);
        return hk__fail(HK_ERR_LOAD, "%s is not a 64-bit little-endian ELF library", path);
    }
    if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > ef->size ||
        (size_t)eh->e_shnum > (ef->size - eh->e_shoff) / sizeof(Elf64_Shdr)) {
        munmap(m, ef->size);
        return hk__fail(HK_ERR_LOAD, "%s has a malformed ELF section table", path);
    }
    ef->shoff = (size_t)eh->e_shoff;
    ef->shnum = eh->e_shnum;
    return HK_OK;
}

static void elf_close(elf_file *ef) {
    if (ef->base) munmap((void *)ef->base, ef->size);
    memset(ef, 0, sizeof *ef);
}

static bool sec_ok(const elf_file *ef, const Elf64_Shdr *s) {
    if (s->sh_type == SHT_NOBITS) return false;
    return s->sh_offset <= ef->size && s->sh_size <= ef->size - s->sh_offset;
}

static const char *sec_name(const elf_file *ef, const Elf64_Shdr *s) {
    size_t idx = ef->eh.e_shstrndx;
    if (idx >= ef->shnum) return "";
    Elf64_Shdr strs = elf_shdr(ef, idx);
    if (!sec_ok(ef, &strs) || s->sh_name >= strs.sh_size) return "";
    const char *p = (const char *)ef->base + strs.sh_offset + s->sh_name;
    size_t room = strs.sh_size - s->sh_name;
    if (!memchr(p, '\0', room)) return "";
    return p;
}

void hk__kstrv_free(char **v, size_t n) {
    if (!v) return;
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int push_str(char ***v, size_t *n, size_t *cap, const char *s, size_t len) {
    int rc = HK_VEC_RESERVE(*v, *cap, *n + 1);
    if (rc) return rc;
    char *c = hk__strndup(s, len);
    if (!c) return hk__fail(HK_ERR_NOMEM, "out of memory");
    (*v)[(*n)++] = c;
    return HK_OK;
}

int hk__elf_exported_with_prefix(char ***out, size_t *count, const char *path, const char *prefix) {
    *out = NULL;
    *count = 0;
    elf_file ef;
    int rc = elf_open(&ef, path);
    if (rc) return rc;
    char **v = NULL;
    size_t n = 0, cap = 0;
    size_t plen = strlen(prefix);
    for (size_t i = 0; i < ef.shnum && rc == HK_OK; i++) {
        Elf64_Shdr s = elf_shdr(&ef, i);
        if (s.sh_type != SHT_DYNSYM || !sec_ok(&ef, &s) || s.sh_entsize != sizeof(Elf64_Sym))
            continue;
        if (s.sh_link >= ef.shnum) continue;
        Elf64_Shdr strs = elf_shdr(&ef, s.sh_link);
        if (!sec_ok(&ef, &strs)) continue;
        const char *strtab = (const char *)ef.base + strs.sh_offset;
        const unsigned char *syms = ef.base + s.sh_offset;
        size_t nsyms = s.sh_size / sizeof(Elf64_Sym);
        for (size_t k = 1; k < nsyms && rc == HK_OK; k++) {
            Elf64_Sym sym;
            memcpy(&sym, syms + k * sizeof sym, sizeof sym);
            if (sym.st_shndx == SHN_UNDEF || sym.st_name >= strs.sh_size) continue;
            int bind = ELF64_ST_BIND(sym.st_info);
            if (bind != STB_GLOBAL && bind != STB_WEAK) continue;
            if (ELF64_ST_VISIBILITY(sym.st_other) != STV_DEFAULT &&
                ELF64_ST_VISIBILITY(sym.st_other) != STV_PROTECTED)
                continue;
            const char *name = strtab + sym.st_name;
            size_t room = strs.sh_size - sym.st_name;
            size_t len = strnlen(name, room);
            if (len == room) continue;
            if (len <= plen || strncmp(name, prefix, plen) != 0) continue;
            rc = push_str(&v, &n, &cap, name + plen, len - plen);
        }
    }
    elf_close(&ef);
    if (rc) {
        hk__kstrv_free(v, n);
        return rc;
    }
    if (n > 1) {
        qsort(v, n, sizeof *v, cmp_str);
        size_t w = 1;
        for (size_t i = 1; i < n; i++) {
            if (strcmp(v[i], v[w - 1]) == 0) free(v[i]);
            else v[w++] = v[i];
        }
        n = w;
    }
    *out = v;
    *count = n;
    return HK_OK;
}

int hk__elf_needed_libs(char ***out, size_t *count, const char *path) {
    *out = NULL;
    *count = 0;
    elf_file ef;
    int rc = elf_open(&ef, path);
    if (rc) return rc;
    char **v = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < ef.shnum && rc == HK_OK; i++) {
        Elf64_Shdr s = elf_shdr(&ef, i);
        if (s.sh_type != SHT_DYNAMIC || !sec_ok(&ef, &s) || s.sh_link >= ef.shnum) continue;
        Elf64_Shdr strs = elf_shdr(&ef, s.sh_link);
        if (!sec_ok(&ef, &strs)) continue;
        const unsigned char *dyn = ef.base + s.sh_offset;
        size_t nd = s.sh_size / sizeof(Elf64_Dyn);
        for (size_t k = 0; k < nd && rc == HK_OK; k++) {
            Elf64_Dyn d;
            memcpy(&d, dyn + k * sizeof d, sizeof d);
            if (d.d_tag == DT_NULL) break;
            if (d.d_tag != DT_NEEDED || d.d_un.d_val >= strs.sh_size) continue;
            const char *name = (const char *)ef.base + strs.sh_offset + d.d_un.d_val;
            size_t room = strs.sh_size - d.d_un.d_val;
            size_t len = strnlen(name, room);
            if (len < room) rc = push_str(&v, &n, &cap, name, len);
        }
    }
    elf_close(&ef);
    if (rc) {
        hk__kstrv_free(v, n);
        return rc;
    }
    *out = v;
    *count = n;
    return HK_OK;
}

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }

#define HK_FATBIN_MAGIC 0xBA55ED50u
#define HK_FATBIN_FLAG_COMPRESSED 0x8000u
#define HK_FATBIN_FLAG_ARCH_SPECIFIC 0x100000u
#define HK_FATBIN_FLAG_FAMILY 0x200000u

static int parse_fatbin(hk_code_object **v, size_t *n, size_t *cap, const unsigned char *p,
                        size_t size, const char *path) {
    size_t pos = 0;
    while (pos + 16 <= size) {
        uint32_t magic = rd32(p + pos);
        if (magic != HK_FATBIN_MAGIC) {
            if (magic == 0) { /* alignment padding between containers */
                pos += 8;
                continue;
            }
            break;
        }
        uint16_t hs = rd16(p + pos + 6);
        uint64_t fs = rd64(p + pos + 8);
        if (hs < 16 || hs > size - pos || fs > size - pos - hs)
            return hk__fail(HK_ERR_LOAD, "%s: malformed CUDA fat binary header", path);
        size_t e = pos + hs, end = pos + hs + (size_t)fs;
        while (e + 16 <= end) {
            uint16_t kind = rd16(p + e);
            uint32_t ehs = rd32(p + e + 4);
            uint64_t psize = rd64(p + e + 8);
            if (ehs < 48 || ehs > end - e || psize > end - e - ehs)
                return hk__fail(HK_ERR_LOAD, "%s: malformed CUDA fat binary entry", path);
            if (kind == 1 || kind == 2) {
                int rc = HK_VEC_RESERVE(*v, *cap, *n + 1);
                if (rc) return rc;
                uint64_t flags = rd64(p + e + 40);
                hk_code_object *o = &(*v)[(*n)++];
                o->is_ptx = kind == 1;
                o->sm = (int)rd32(p + e + 28);
                o->arch_specific = (flags & HK_FATBIN_FLAG_ARCH_SPECIFIC) != 0;
                o->family = (flags & HK_FATBIN_FLAG_FAMILY) != 0;
                o->compressed = (flags & HK_FATBIN_FLAG_COMPRESSED) != 0;
            }
            e += ehs + (size_t)psize;
        }
        pos = end;
        pos = (pos + 7) & ~(size_t)7;
    }
    return HK_OK;
}

HK_API int hk_library_code_objects(hk_code_objects **out, const char *path) {
    if (!out || !path) return hk__fail(HK_ERR_INVALID_ARG, "hk_library_code_objects: NULL argument");
    *out = NULL;
    hk_code_objects *list = calloc(1, sizeof *list);
    if (!list) return hk__fail(HK_ERR_NOMEM, "out of memory");
    elf_file ef;
    int rc = elf_open(&ef, path);
    if (rc) {
        free(list);
        return rc;
    }
    size_t cap = 0;
    for (size_t i = 0; i < ef.shnum && rc == HK_OK; i++) {
        Elf64_Shdr s = elf_shdr(&ef, i);
        if (!sec_ok(&ef, &s)) continue;
        const char *name = sec_name(&ef, &s);
        if (strcmp(name, ".nv_fatbin") != 0 && strcmp(name, "__nv_relfatbin") != 0) continue;
        rc = parse_fatbin(&list->v, &list->n, &cap, ef.base + s.sh_offset, s.sh_size, path);
    }
    elf_close(&ef);
    if (rc) {
        hk_code_objects_free(list);
        return rc;
    }
    if (list->n == 0) { /* nothing embedded: no list (every accessor reads NULL as empty) */
        hk_code_objects_free(list);
        list = NULL;
    }
    *out = list;
    return HK_OK;
}

HK_API void hk_code_objects_free(hk_code_objects *objs) {
    if (!objs) return;
    free(objs->v);
    free(objs);
}

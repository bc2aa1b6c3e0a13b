/* The ELF reader on a crafted library whose section table, .dynsym and .dynamic sit at offsets
 * that are not 8-aligned (issue 17 item 8): every header, symbol and dynamic entry must be read
 * through a copy. Reading them in place is a misaligned load that -fsanitize=undefined (the
 * HK_SANITIZE build) aborts on. */
#include "support.h"

#include "hubkern.h"
#include "kernel/kernel_internal.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>

#define IMG_SIZE 0x400

/* Offsets of the pieces; all but the ELF header deliberately odd. */
#define OFF_SHSTR 0x41
#define OFF_DYNSTR 0x81
#define OFF_DYNSYM 0xc3
#define OFF_DYNAMIC 0x111
#define OFF_FATBIN 0x149
#define OFF_SHDRS 0x1c3

static const char k_shstr[] = "\0.shstrtab\0.dynstr\0.dynsym\0.dynamic\0.nv_fatbin";
static const char k_dynstr[] = "\0__tvm_ffi_add\0libfoo.so\0__tvm_ffi_mul";

static void put_shdr(unsigned char *img, size_t i, uint32_t name, uint32_t type, size_t off, size_t size,
                     uint32_t link, size_t entsize) {
    Elf64_Shdr s;
    memset(&s, 0, sizeof s);
    s.sh_name = name;
    s.sh_type = type;
    s.sh_offset = off;
    s.sh_size = size;
    s.sh_link = link;
    s.sh_entsize = entsize;
    memcpy(img + OFF_SHDRS + i * sizeof s, &s, sizeof s);
}

static void put_sym(unsigned char *img, size_t i, uint32_t name) {
    Elf64_Sym sym;
    memset(&sym, 0, sizeof sym);
    sym.st_name = name;
    sym.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    sym.st_other = STV_DEFAULT;
    sym.st_shndx = 1;
    memcpy(img + OFF_DYNSYM + i * sizeof sym, &sym, sizeof sym);
}

static void put_le(unsigned char *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static char *write_image(void) {
    unsigned char *img = calloc(1, IMG_SIZE);
    if (!img) return NULL;
    Elf64_Ehdr eh;
    memset(&eh, 0, sizeof eh);
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_DYN;
    eh.e_machine = EM_X86_64;
    eh.e_version = EV_CURRENT;
    eh.e_ehsize = sizeof eh;
    eh.e_shoff = OFF_SHDRS;
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = 6;
    eh.e_shstrndx = 1;
    memcpy(img, &eh, sizeof eh);
    memcpy(img + OFF_SHSTR, k_shstr, sizeof k_shstr);
    memcpy(img + OFF_DYNSTR, k_dynstr, sizeof k_dynstr);
    put_sym(img, 1, 1);  /* __tvm_ffi_add */
    put_sym(img, 2, 25); /* __tvm_ffi_mul */
    Elf64_Dyn d[2];
    memset(d, 0, sizeof d);
    d[0].d_tag = DT_NEEDED;
    d[0].d_un.d_val = 15; /* libfoo.so */
    d[1].d_tag = DT_NULL;
    memcpy(img + OFF_DYNAMIC, d, sizeof d);
    /* one fat binary container holding one sm_80 cubin entry (48-byte header, empty payload) */
    unsigned char *fb = img + OFF_FATBIN;
    put_le(fb, 0xBA55ED50u, 4);
    put_le(fb + 4, 1, 2);
    put_le(fb + 6, 16, 2);
    put_le(fb + 8, 48, 8);
    put_le(fb + 16, 2, 2);  /* kind: cubin */
    put_le(fb + 20, 48, 4); /* entry header size */
    put_le(fb + 44, 80, 4); /* sm */
    put_shdr(img, 1, 1, SHT_STRTAB, OFF_SHSTR, sizeof k_shstr, 0, 0);
    put_shdr(img, 2, 11, SHT_STRTAB, OFF_DYNSTR, sizeof k_dynstr, 0, 0);
    put_shdr(img, 3, 19, SHT_DYNSYM, OFF_DYNSYM, 3 * sizeof(Elf64_Sym), 2, sizeof(Elf64_Sym));
    put_shdr(img, 4, 27, SHT_DYNAMIC, OFF_DYNAMIC, sizeof d, 2, sizeof(Elf64_Dyn));
    put_shdr(img, 5, 36, SHT_PROGBITS, OFF_FATBIN, 64, 0, 0);
    char *path = hk__asprintf("%s/misaligned.so", hk_test_tmpdir());
    if (path && hk__write_file_atomic(path, (const char *)img, IMG_SIZE) != HK_OK) {
        free(path);
        path = NULL;
    }
    free(img);
    return path;
}

int main(void) {
    CHECK(OFF_SHDRS % 8 != 0 && OFF_DYNSYM % 8 != 0 && OFF_DYNAMIC % 8 != 0);
    char *path = write_image();
    CHECK(path != NULL);
    if (!path) return hk_test_finish();

    char **names = NULL;
    size_t n = 0;
    CHECK_RC(hk__elf_exported_with_prefix(&names, &n, path, "__tvm_ffi_"), HK_OK);
    CHECK(n == 2);
    if (n == 2) {
        CHECK_STR(names[0], "add");
        CHECK_STR(names[1], "mul");
    }
    hk__kstrv_free(names, n);

    CHECK_RC(hk__elf_needed_libs(&names, &n, path), HK_OK);
    CHECK(n == 1);
    if (n == 1) CHECK_STR(names[0], "libfoo.so");
    hk__kstrv_free(names, n);

    hk_code_objects *objs = NULL;
    CHECK_RC(hk_library_code_objects(&objs, path), HK_OK);
    CHECK(hk_code_objects_count(objs) == 1);
    CHECK(hk_code_object_sm(objs, 0) == 80 && !hk_code_object_is_ptx(objs, 0));
    CHECK(hk_code_objects_fit(objs, 8, 6) && !hk_code_objects_fit(objs, 9, 0));
    hk_code_objects_free(objs);
    free(path);
    return hk_test_finish();
}

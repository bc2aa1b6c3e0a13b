/* Streaming hashes (OpenSSL EVP): SHA-256/512 for LFS etags and metadata digests, and the git blob
 * SHA-1 ("blob <len>\0" + content) that names small files on the Hub. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

struct hk_hasher {
    EVP_MD_CTX *ctx;
};

hk_hasher *hk__hasher_new(hk_hash_kind kind, uint64_t git_blob_size) {
    hk_hasher *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->ctx = EVP_MD_CTX_new();
    const EVP_MD *md = kind == HK_HASH_SHA256 ? EVP_sha256()
                       : kind == HK_HASH_SHA512 ? EVP_sha512()
                                                 : EVP_sha1();
    if (!h->ctx || EVP_DigestInit_ex(h->ctx, md, NULL) != 1) {
        hk__hasher_free(h);
        return NULL;
    }
    if (kind == HK_HASH_GIT_BLOB) {
        char hdr[40];
        int n = snprintf(hdr, sizeof hdr, "blob %llu", (unsigned long long)git_blob_size);
        EVP_DigestUpdate(h->ctx, hdr, (size_t)n + 1); /* includes the NUL */
    }
    return h;
}

void hk__hasher_update(hk_hasher *h, const void *data, size_t len) {
    if (len) EVP_DigestUpdate(h->ctx, data, len);
}

size_t hk__hasher_finish(hk_hasher *h, unsigned char out[64]) {
    unsigned int n = 0;
    EVP_DigestFinal_ex(h->ctx, out, &n);
    hk__hasher_free(h);
    return n;
}

int hk__sha256_hex(char hex[65], const void *data, size_t len) {
    hex[0] = '\0';
    hk_hasher *h = hk__hasher_new(HK_HASH_SHA256, 0);
    if (!h) return -1;
    hk__hasher_update(h, data, len);
    unsigned char d[64];
    hk__hex(hex, d, hk__hasher_finish(h, d));
    return 0;
}

void hk__hasher_free(hk_hasher *h) {
    if (!h) return;
    EVP_MD_CTX_free(h->ctx);
    free(h);
}

void hk__hex(char *out, const unsigned char *bytes, size_t n) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * n] = '\0';
}

void hk__base64(char *out, const unsigned char *bytes, size_t n) {
    EVP_EncodeBlock((unsigned char *)out, bytes, (int)n);
}

/* open + read until 0 + close (no stdio: its fstat and extra read cost a third of a small file's
 * syscalls); fstat only for the git blob form, whose header carries the size. */
static int hash_file(unsigned char digest[64], size_t *dlen, uint64_t *out_bytes, hk_hash_kind kind, int dirfd,
                     const char *path, int oflags) {
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | oflags);
    if (fd < 0) return hk__fail(hk__errno_code(errno), "cannot open %s: %s", path, strerror(errno));
    uint64_t size = 0;
    if (kind == HK_HASH_GIT_BLOB) {
        struct stat st;
        if (fstat(fd, &st) != 0) {
            int e = errno;
            close(fd);
            return hk__fail(HK_ERR_IO, "cannot stat %s: %s", path, strerror(e));
        }
        size = (uint64_t)st.st_size;
    }
    enum { BUF = 1 << 20 };
    hk_hasher *h = hk__hasher_new(kind, size);
    unsigned char *buf = h ? malloc(BUF) : NULL;
    if (!buf) {
        hk__hasher_free(h);
        close(fd);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    uint64_t got = 0;
    ssize_t n;
    for (;;) {
        n = read(fd, buf, BUF);
        if (n > 0) {
            hk__hasher_update(h, buf, (size_t)n);
            got += (uint64_t)n;
        } else if (n == 0 || errno != EINTR) {
            break;
        }
    }
    int e = errno;
    free(buf);
    close(fd);
    if (n < 0 || (kind == HK_HASH_GIT_BLOB && got != size)) {
        hk__hasher_free(h);
        return n < 0 ? hk__fail(HK_ERR_IO, "cannot read %s: %s", path, strerror(e))
                     : hk__fail(HK_ERR_IO, "%s changed size while it was hashed", path);
    }
    *dlen = hk__hasher_finish(h, digest);
    if (out_bytes) *out_bytes = got;
    return HK_OK;
}

int hk__hash_file_hex(char *out_hex, size_t out_cap, hk_hash_kind kind, const char *path) {
    return hk__hash_file_hex_at(out_hex, out_cap, NULL, kind, AT_FDCWD, path);
}

int hk__hash_file_hex_at(char *out_hex, size_t out_cap, uint64_t *out_bytes, hk_hash_kind kind, int dirfd,
                         const char *path) {
    unsigned char d[64];
    size_t n = 0;
    int rc = hash_file(d, &n, out_bytes, kind, dirfd, path, 0);
    if (rc) return rc;
    if (out_cap < 2 * n + 1) return hk__fail(HK_ERR_INTERNAL, "hash buffer too small");
    hk__hex(out_hex, d, n);
    return HK_OK;
}

int hk__hash_file_b64(char *out_b64, size_t out_cap, hk_hash_kind kind, const char *path) {
    return hk__hash_file_b64_at(out_b64, out_cap, kind, AT_FDCWD, path, 0);
}

int hk__hash_file_b64_at(char *out_b64, size_t out_cap, hk_hash_kind kind, int dirfd, const char *path, int oflags) {
    unsigned char d[64];
    size_t n = 0;
    int rc = hash_file(d, &n, NULL, kind, dirfd, path, oflags);
    if (rc) return rc;
    if (out_cap < 4 * ((n + 2) / 3) + 1) return hk__fail(HK_ERR_INTERNAL, "hash buffer too small");
    hk__base64(out_b64, d, n);
    return HK_OK;
}

/* Transparency log entry: the RFC 6962 Merkle inclusion proof of the entry's body and the signed
 * entry timestamp (inclusion promise). The SET signs the RFC 8785 canonical JSON of
 * {body, integratedTime, logID, logIndex}: keys in that (sorted) order, integers as JSON numbers,
 * strings that need no escaping (base64, hex), so the canonical form is written directly. */
#include "sigstore/sg_impl.h"

#include <stdlib.h>
#include <string.h>

static void hash_leaf(unsigned char out[32], const unsigned char *data, size_t len) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    unsigned char zero = 0;
    EVP_DigestInit_ex(c, EVP_sha256(), NULL);
    EVP_DigestUpdate(c, &zero, 1);
    EVP_DigestUpdate(c, data, len);
    EVP_DigestFinal_ex(c, out, NULL);
    EVP_MD_CTX_free(c);
}

static void hash_children(unsigned char out[32], const unsigned char *l, const unsigned char *r) {
    unsigned char buf[65];
    buf[0] = 1;
    memcpy(buf + 1, l, 32);
    memcpy(buf + 33, r, 32);
    hk__sg_sha256(out, buf, sizeof buf);
}

static int bit_length(uint64_t x) {
    int n = 0;
    while (x) {
        n++;
        x >>= 1;
    }
    return n;
}

static int popcount(uint64_t x) {
    int n = 0;
    for (; x; x &= x - 1) n++;
    return n;
}

int hk__sg_check_inclusion(const hk_sg_bundle *b, char **why) {
    if (b->proof_index < 0 || b->tree_size <= 0 || b->proof_index >= b->tree_size) {
        *why = hk__asprintf("inclusion proof index %lld outside a tree of size %lld", (long long)b->proof_index,
                           (long long)b->tree_size);
        return -1;
    }
    uint64_t index = (uint64_t)b->proof_index, size = (uint64_t)b->tree_size;
    /* split: `inner` levels below where the paths to index and size-1 diverge, then the right
     * border above it */
    int inner = bit_length(index ^ (size - 1));
    int border = popcount(index >> inner);
    if (b->nhashes != (size_t)(inner + border)) {
        *why = hk__asprintf("inclusion proof has wrong size: expected %d hashes, got %zu", inner + border, b->nhashes);
        return -1;
    }
    for (size_t i = 0; i < b->nhashes; i++)
        if (b->hashes[i].len != 32) {
            *why = hk__strdup("inclusion proof hash is not 32 bytes");
            return -1;
        }
    unsigned char h[32];
    hash_leaf(h, b->body.data, b->body.len);
    for (int i = 0; i < inner; i++) {
        if (((index >> i) & 1) == 0) hash_children(h, h, b->hashes[i].data);
        else hash_children(h, b->hashes[i].data, h);
    }
    for (size_t i = (size_t)inner; i < b->nhashes; i++) hash_children(h, b->hashes[i].data, h);
    if (b->root_hash.len != 32 || memcmp(h, b->root_hash.data, 32) != 0) {
        char hex[65];
        hk__hex(hex, h, 32);
        *why = hk__asprintf("inclusion proof does not lead to its root hash (calculated %s)", hex);
        return -1;
    }
    return 0;
}

int hk__sg_check_set(const hk_sigstore_trust_root *root, const hk_sg_bundle *b, char **why) {
    char *body64 = hk__sg_b64_encode(b->body.data, b->body.len);
    char *idhex = malloc(2 * b->log_id.len + 1);
    char *payload = NULL;
    int rc = -1;
    if (!body64 || !idhex) {
        *why = hk__strdup("out of memory");
        goto done;
    }
    hk__hex(idhex, b->log_id.data, b->log_id.len);
    payload = hk__asprintf("{\"body\":\"%s\",\"integratedTime\":%lld,\"logID\":\"%s\",\"logIndex\":%lld}", body64,
                          (long long)b->integrated_time, idhex, (long long)b->log_index);
    if (!payload) {
        *why = hk__strdup("out of memory");
        goto done;
    }
    if (!hk__sg_keyring_verify(root->tlogs, root->ntlogs, b->log_id.data, b->log_id.len, b->integrated_time,
                              b->set.data, b->set.len, payload, strlen(payload))) {
        *why = hk__asprintf("signed entry timestamp does not verify with any transparency log key (log id %s)", idhex);
        goto done;
    }
    rc = 0;
done:
    free(body64);
    free(idhex);
    free(payload);
    return rc;
}

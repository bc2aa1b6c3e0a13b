/* Sigstore bundle JSON (protobuf JSON of dev.sigstore.bundle.v1.Bundle), media types v0.1, v0.2,
 * v0.3. Parses into hk_sg_bundle and enforces the structural invariants sigstore-python 4.5.1
 * enforces before any cryptography: one leaf certificate (v0.3: `certificate`; older:
 * the first of `x509CertificateChain`), exactly one tlog entry of version 0.0.1/0.0.2, an
 * inclusion proof with a checkpoint, and an inclusion promise unless (v0.2+) a signed timestamp
 * stands in for it. The content is a messageSignature or a DSSE envelope (dsse.c verifies it);
 * the verification material a certificate, or a publicKey hint for a managed key. */
#include "sigstore/sg_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/vec.h"

static const char *const MEDIA_TYPES[] = {
    "application/vnd.dev.sigstore.bundle+json;version=0.1",
    "application/vnd.dev.sigstore.bundle+json;version=0.2",
    "application/vnd.dev.sigstore.bundle+json;version=0.3",
    "application/vnd.dev.sigstore.bundle.v0.3+json",
};

#define MAX_TIMESTAMPS 32 /* sigstore-go / sigstore-python: DoS bound */
#define MAX_PROOF_HASHES 64

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return hk__fail(HK_ERR_PARSE, "invalid bundle: %s", msg);
}

static int field_b64(hk_sg_bytes *out, const cJSON *obj, const char *key, const char *what) {
    const char *s = hk__sg_json_str(obj, key);
    if (!s) return bad("%s missing", what);
    if (!hk__sg_b64_decode(out, s)) return bad("%s is not base64", what);
    return HK_OK;
}

static int parse_cert(X509 **out, const cJSON *obj, const char *what) {
    hk_sg_bytes der;
    int rc = field_b64(&der, obj, "rawBytes", what);
    if (rc != HK_OK) return rc;
    const unsigned char *p = der.data;
    X509 *x = d2i_X509(NULL, &p, (long)der.len);
    bool whole = x && p == der.data + der.len;
    free(der.data);
    if (!whole) {
        X509_free(x);
        return bad("%s is not a DER X.509 certificate", what);
    }
    *out = x;
    return HK_OK;
}

static int parse_proof(hk_sg_bundle *b, const cJSON *p) {
    b->has_proof = true;
    if (!hk__sg_json_int64(&b->proof_index, cJSON_GetObjectItemCaseSensitive(p, "logIndex")) ||
        !hk__sg_json_int64(&b->tree_size, cJSON_GetObjectItemCaseSensitive(p, "treeSize")))
        return bad("inclusionProof logIndex/treeSize missing or not an integer");
    if (b->proof_index < 0 || b->tree_size < 0) return bad("inclusionProof logIndex/treeSize is negative");
    int rc = field_b64(&b->root_hash, p, "rootHash", "inclusionProof.rootHash");
    if (rc != HK_OK) return rc;
    const cJSON *hs = cJSON_GetObjectItemCaseSensitive(p, "hashes");
    if (hs && !cJSON_IsArray(hs)) return bad("inclusionProof.hashes is not an array");
    int n = hs ? cJSON_GetArraySize(hs) : 0;
    if (n > MAX_PROOF_HASHES) return bad("inclusion proof too long");
    if (n) {
        b->hashes = calloc((size_t)n, sizeof *b->hashes);
        if (!b->hashes) return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    const cJSON *h;
    cJSON_ArrayForEach(h, hs) {
        if (!cJSON_IsString(h) || !hk__sg_b64_decode(&b->hashes[b->nhashes], h->valuestring))
            return bad("inclusionProof.hashes entry is not base64");
        b->nhashes++;
    }
    const cJSON *cp = cJSON_GetObjectItemCaseSensitive(p, "checkpoint");
    const char *env = hk__sg_json_str(cp, "envelope");
    if (env && *env) {
        b->checkpoint = hk__strdup(env);
        if (!b->checkpoint) return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    return HK_OK;
}

static int parse_entry(hk_sg_bundle *b, const cJSON *e) {
    if (!cJSON_IsObject(e)) return bad("tlog entry is not an object");
    if (!hk__sg_json_int64(&b->log_index, cJSON_GetObjectItemCaseSensitive(e, "logIndex")))
        return bad("tlog entry logIndex missing");
    if (b->log_index < 0) return bad("tlog entry logIndex is negative");
    int rc = field_b64(&b->log_id, cJSON_GetObjectItemCaseSensitive(e, "logId"), "keyId", "tlog entry logId.keyId");
    if (rc != HK_OK) return rc;
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(e, "kindVersion");
    const char *kind = hk__sg_json_str(kv, "kind"), *ver = hk__sg_json_str(kv, "version");
    if (!kind || !ver) return bad("tlog entry kindVersion missing");
    b->kind = hk__strdup(kind);
    b->kind_version = hk__strdup(ver);
    if (!b->kind || !b->kind_version) return hk__fail(HK_ERR_NOMEM, "out of memory");
    if (strcmp(ver, "0.0.1") != 0 && strcmp(ver, "0.0.2") != 0)
        return bad("expected log entry version 0.0.1 - 0.0.2, got %s", ver);
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(e, "integratedTime");
    if (it) {
        if (!hk__sg_json_int64(&b->integrated_time, it)) return bad("integratedTime is not an integer");
        if (b->integrated_time < 0) return bad("integratedTime is negative");
        b->has_integrated_time = b->integrated_time != 0; /* proto3: 0 is "unset" */
    }
    const cJSON *promise = cJSON_GetObjectItemCaseSensitive(e, "inclusionPromise");
    if (promise) {
        rc = field_b64(&b->set, promise, "signedEntryTimestamp", "inclusionPromise.signedEntryTimestamp");
        if (rc != HK_OK) return rc;
        b->has_promise = b->set.len > 0;
    }
    const cJSON *proof = cJSON_GetObjectItemCaseSensitive(e, "inclusionProof");
    if (proof) {
        rc = parse_proof(b, proof);
        if (rc != HK_OK) return rc;
    }
    rc = field_b64(&b->body, e, "canonicalizedBody", "tlog entry canonicalizedBody");
    if (rc != HK_OK) return rc;
    if (!b->has_proof || !b->checkpoint)
        return bad("entry must contain inclusion proof, with checkpoint");
    return HK_OK;
}

/* dsseEnvelope (DSSE v1.0 JSON envelope): payload, payloadType and exactly one non-empty
 * signature (sigstore-python refuses other counts when it loads the bundle). keyid is ignored
 * (a string if given; null is absent, as model-transparency's bundles carry it). */
static int parse_dsse(hk_sg_bundle *b, const cJSON *env) {
    if (!cJSON_IsObject(env)) return bad("dsseEnvelope is not an object");
    b->is_dsse = true;
    const char *type = hk__sg_json_str(env, "payloadType");
    if (!type) return bad("dsseEnvelope.payloadType missing");
    b->dsse_type = hk__strdup(type);
    if (!b->dsse_type) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc = field_b64(&b->dsse_payload, env, "payload", "dsseEnvelope.payload");
    if (rc != HK_OK) return rc;
    const cJSON *sigs = cJSON_GetObjectItemCaseSensitive(env, "signatures");
    if (!cJSON_IsArray(sigs)) return bad("dsseEnvelope.signatures missing");
    if (cJSON_GetArraySize(sigs) != 1)
        return bad("DSSE envelope must contain exactly one signature, got %d", cJSON_GetArraySize(sigs));
    const cJSON *sig = cJSON_GetArrayItem(sigs, 0);
    rc = field_b64(&b->signature, sig, "sig", "dsseEnvelope.signatures[0].sig");
    if (rc != HK_OK) return rc;
    if (b->signature.len == 0) return bad("DSSE envelope signature is empty");
    const cJSON *keyid = cJSON_GetObjectItemCaseSensitive(sig, "keyid");
    if (keyid && !cJSON_IsString(keyid)) return bad("dsseEnvelope.signatures[0].keyid is not a string");
    return HK_OK;
}

static int parse_timestamps(hk_sg_bundle *b, const cJSON *tvd) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(tvd, "rfc3161Timestamps");
    if (!arr) return HK_OK;
    if (!cJSON_IsArray(arr)) return bad("rfc3161Timestamps is not an array");
    int n = cJSON_GetArraySize(arr);
    if (n > MAX_TIMESTAMPS) return bad("too many signed timestamps: %d > %d", n, MAX_TIMESTAMPS);
    if (n == 0) return HK_OK;
    b->tsrs = calloc((size_t)n, sizeof *b->tsrs);
    if (!b->tsrs) return hk__fail(HK_ERR_NOMEM, "out of memory");
    const cJSON *t;
    cJSON_ArrayForEach(t, arr) {
        int rc = field_b64(&b->tsrs[b->ntsrs], t, "signedTimestamp", "rfc3161Timestamps[].signedTimestamp");
        if (rc != HK_OK) return rc;
        b->ntsrs++;
    }
    return HK_OK;
}

static int parse_doc(hk_sg_bundle *b, const cJSON *doc) {
    const char *media = hk__sg_json_str(doc, "mediaType");
    for (size_t i = 0; media && i < HK_ARRAY_LEN(MEDIA_TYPES); i++)
        if (strcmp(media, MEDIA_TYPES[i]) == 0) b->version = i >= 2 ? 3 : (int)i + 1;
    if (!b->version) return bad("unsupported bundle format: %s", media ? media : "(no mediaType)");
    const cJSON *vm = cJSON_GetObjectItemCaseSensitive(doc, "verificationMaterial");
    if (!cJSON_IsObject(vm)) return bad("verificationMaterial missing");
    /* protobuf oneof: exactly one of publicKey, x509CertificateChain, certificate */
    int materials = !!cJSON_GetObjectItemCaseSensitive(vm, "publicKey") +
                    !!cJSON_GetObjectItemCaseSensitive(vm, "x509CertificateChain") +
                    !!cJSON_GetObjectItemCaseSensitive(vm, "certificate");
    if (materials != 1) return bad("exactly one of publicKey, x509CertificateChain, or certificate is required");
    int rc = HK_OK;
    const cJSON *pk = cJSON_GetObjectItemCaseSensitive(vm, "publicKey");
    if (pk) {
        /* a managed key: the bundle only hints at it (publicKey.hint); the verifier is given it */
        if (!cJSON_IsObject(pk)) return bad("publicKey is not an object");
        b->has_public_key = true;
    } else if (b->version == 3) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(vm, "certificate");
        if (!c) return bad("expected certificate in bundle");
        rc = parse_cert(&b->leaf, c, "certificate");
    } else {
        const cJSON *certs = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(vm, "x509CertificateChain"), "certificates");
        if (!cJSON_IsArray(certs) || cJSON_GetArraySize(certs) == 0)
            return bad("expected non-empty certificate chain in bundle");
        /* only the leaf is used: intermediates come from the trusted root, never the bundle */
        rc = parse_cert(&b->leaf, cJSON_GetArrayItem(certs, 0), "x509CertificateChain.certificates[0]");
    }
    if (rc != HK_OK) return rc;
    const cJSON *entries = cJSON_GetObjectItemCaseSensitive(vm, "tlogEntries");
    if (!cJSON_IsArray(entries) || cJSON_GetArraySize(entries) != 1)
        return bad("expected exactly one log entry in bundle");
    rc = parse_timestamps(b, cJSON_GetObjectItemCaseSensitive(vm, "timestampVerificationData"));
    if (rc != HK_OK) return rc;
    rc = parse_entry(b, cJSON_GetArrayItem(entries, 0));
    if (rc != HK_OK) return rc;
    if (b->version == 1 && !b->has_promise) return bad("bundle must contain an inclusion promise");
    if (b->version >= 2 && !b->has_promise && b->ntsrs == 0)
        return bad("bundle must contain an inclusion promise or signed timestamp(s)");

    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(doc, "messageSignature");
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(doc, "dsseEnvelope");
    if (env) {
        if (ms) return bad("exactly one of messageSignature or dsseEnvelope is required");
        return parse_dsse(b, env);
    }
    if (!cJSON_IsObject(ms)) return bad("missing messageSignature");
    rc = field_b64(&b->signature, ms, "signature", "messageSignature.signature");
    if (rc != HK_OK) return rc;
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(ms, "messageDigest");
    if (md) {
        /* the digest hubkern compares with the artifact's is SHA-256; a digest of another algorithm
         * (or of none named) would be compared as if it were one */
        if (!cJSON_IsObject(md)) return bad("messageSignature.messageDigest is not an object");
        const char *alg = hk__sg_json_str(md, "algorithm");
        if (!alg) return bad("messageSignature.messageDigest.algorithm missing");
        if (strcmp(alg, "SHA2_256") != 0)
            return bad("messageSignature.messageDigest.algorithm %s is not supported (hubkern verifies SHA2_256)", alg);
        b->digest_alg = hk__strdup(alg);
        if (!b->digest_alg) return hk__fail(HK_ERR_NOMEM, "out of memory");
        rc = field_b64(&b->digest, md, "digest", "messageSignature.messageDigest.digest");
        if (rc != HK_OK) return rc;
        if (b->digest.len != 32)
            return bad("messageSignature.messageDigest.digest is %zu bytes; a SHA2_256 digest is 32", b->digest.len);
        b->has_digest = true;
    }
    return HK_OK;
}

int hk__sg_bundle_parse(hk_sg_bundle *b, const char *json, size_t len) {
    memset(b, 0, sizeof *b);
    cJSON *doc = NULL;
    const char *why = NULL;
    int prc = hk__sg_json_parse(&doc, json, len, &why);
    if (prc == HK_ERR_NOMEM) return hk__fail(HK_ERR_NOMEM, "out of memory");
    if (prc != HK_OK) return bad("%s", why);
    if (!cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        return bad("not a JSON object");
    }
    int rc = parse_doc(b, doc);
    cJSON_Delete(doc);
    if (rc != HK_OK) hk__sg_bundle_clear(b);
    return rc;
}

void hk__sg_bundle_clear(hk_sg_bundle *b) {
    X509_free(b->leaf);
    free(b->signature.data);
    free(b->digest_alg);
    free(b->digest.data);
    free(b->dsse_type);
    free(b->dsse_payload.data);
    free(b->log_id.data);
    free(b->kind);
    free(b->kind_version);
    free(b->set.data);
    free(b->body.data);
    free(b->root_hash.data);
    for (size_t i = 0; i < b->nhashes; i++) free(b->hashes[i].data);
    free(b->hashes);
    free(b->checkpoint);
    for (size_t i = 0; i < b->ntsrs; i++) free(b->tsrs[i].data);
    free(b->tsrs);
    memset(b, 0, sizeof *b);
}

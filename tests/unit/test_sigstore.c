/* The sigstore layer through its internal API: helpers, the production trusted root, sigstore-
 * python's published bundles (tests/sigstore/python-assets), policies, and hostile input
 * (every truncation and a few thousand byte flips of a bundle: no crash, no leak, no
 * acceptance). The full attack matrix against a generated Sigstore is in
 * tests/integration/test_sigstore.py. */
#include "sigstore/sg_impl.h"
#include "support.h"
#include "util/text.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/x509v3.h>

static char *src_path(const char *rel) {
    return hk__asprintf("%s/../../%s", getenv("HK_TEST_DATA"), rel);
}

static char *slurp(const char *rel, size_t *len) {
    char *p = src_path(rel), *out = NULL;
    if (hk__read_file(&out, len, p, 1u << 24) != HK_OK) out = NULL;
    free(p);
    return out;
}

static hk_sigstore_trust_root *load_root(const char *rel) {
    char *p = src_path(rel);
    hk_sigstore_trust_root *r = NULL;
    CHECK_RC(hk__sigstore_trust_root_load(&r, p), HK_OK);
    free(p);
    return r;
}

/* `text` with the first `old` replaced by `rep` (NULL if `old` is not in it); *len in and out. */
static char *replace(const char *text, size_t *len, const char *old, const char *rep) {
    const char *at = strstr(text, old);
    if (!at) return NULL;
    size_t head = (size_t)(at - text), o = strlen(old), r = strlen(rep), n = *len - o + r;
    char *out = malloc(n + 1);
    if (!out) return NULL;
    memcpy(out, text, head);
    memcpy(out + head, rep, r);
    memcpy(out + head + r, at + o, *len - head - o);
    out[n] = '\0';
    *len = n;
    return out;
}

static void test_helpers(void) {
    hk_sg_bytes b;
    CHECK(hk__sg_b64_decode(&b, "aGVsbG8="));
    CHECK(b.len == 5 && memcmp(b.data, "hello", 5) == 0);
    free(b.data);
    CHECK(hk__sg_b64_decode(&b, "aGVsbG8")); /* unpadded, as protobuf JSON allows */
    CHECK(b.len == 5);
    free(b.data);
    CHECK(hk__sg_b64_decode(&b, "-_8="));   /* URL-safe alphabet */
    CHECK(b.len == 2 && b.data[0] == 0xfb && b.data[1] == 0xff);
    free(b.data);
    CHECK(!hk__sg_b64_decode(&b, "aGVsbG9="));  /* non-zero trailing bits */
    CHECK(!hk__sg_b64_decode(&b, "a"));
    CHECK(!hk__sg_b64_decode(&b, "aG!s"));
    int64_t t;
    CHECK(hk__sg_parse_rfc3339(&t, "2021-03-07T03:20:29Z") && t == 1615087229);
    CHECK(hk__sg_parse_rfc3339(&t, "2022-10-31T23:59:59.999Z") && t == 1667260799);
    CHECK(hk__sg_parse_rfc3339(&t, "1970-01-01T01:00:00+01:00") && t == 0);
    CHECK(!hk__sg_parse_rfc3339(&t, "2021-03-07 03:20:29Z"));
    CHECK(!hk__sg_parse_rfc3339(&t, "2021-13-07T03:20:29Z"));
}

static void test_trust_root(void) {
    hk_sigstore_trust_root *r = load_root("data/sigstore/trusted_root.json");
    if (!r) return;
    CHECK(r->ntlogs == 2 && r->nctlogs == 2 && r->ncas == 2 && r->ntsas == 1);
    CHECK(r->tlogs[1].kind == HK_SG_KEY_ED25519);
    CHECK(r->ctlogs[0].end == 1667260799);
    hk__sigstore_trust_root_free(r);
    hk_sigstore_trust_root *bad = NULL;
    CHECK_RC(hk__sigstore_trust_root_parse(&bad, "{\"mediaType\":\"x\"}", 17), HK_ERR_PARSE);
    CHECK(bad == NULL);
    const char *empty = "{\"mediaType\":\"application/vnd.dev.sigstore.trustedroot+json;version=0.1\"}";
    CHECK_RC(hk__sigstore_trust_root_parse(&bad, empty, strlen(empty)), HK_ERR_PARSE);
    /* a validity range without a start (sigstore-conformance trust-root-tlog-missing-validity-start_fail) */
    char *text = NULL;
    size_t len = 0;
    char *path = src_path("tests/sigstore/staging_trusted_root.json");
    if (path && hk__read_file(&text, &len, path, 1u << 20) == HK_OK) {
        char *start = strstr(text, "\"start\"");
        CHECK(start != NULL);
        if (start) {
            memcpy(start + 1, "xtart", 5); /* the first validFor now has no start */
            CHECK_RC(hk__sigstore_trust_root_parse(&bad, text, len), HK_ERR_PARSE);
            CHECK(strstr(hk_last_error(), "validFor has no start") != NULL);
            CHECK(bad == NULL);
        }
    }
    free(text);
    free(path);
}

#define A "tests/sigstore/python-assets/"

static void test_published_bundles(void) {
    hk_sigstore_trust_root *staging = load_root("tests/sigstore/staging_trusted_root.json");
    if (!staging) return;
    size_t blen = 0, alen = 0;
    char *bundle = slurp(A "bundle_v3.txt.sigstore", &blen);
    char *art = slurp(A "bundle_v3.txt", &alen);
    CHECK(bundle && art);
    if (!bundle || !art) goto out;

    hk_sigstore_policy any = {0};
    hk_sigstore_result res;
    CHECK_RC(hk__sigstore_verify(&res, staging, &any, 1, art, alen, bundle, blen), HK_OK);
    CHECK(hk_last_error_code() == HK_OK);
    CHECK(res.bundle_version == 3);
    CHECK(res.integrated_time > 1700000000);
    CHECK(res.checks == ((1u << 11) - 1 - HK_SIGSTORE_CHECK_TSA));
    CHECK(res.issuer && res.san);
    /* the same identity as a policy, with the issuer in either extension */
    hk_sigstore_policy exact = {res.issuer, 0, res.san, NULL, NULL, 0};
    hk_sigstore_result res2;
    CHECK_RC(hk__sigstore_verify(&res2, staging, &exact, 1, art, alen, bundle, blen), HK_OK);
    hk__sigstore_result_free(&res2);

    unsigned char d[32];
    hk__sg_sha256(d, art, alen);
    CHECK_RC(hk__sigstore_verify_digest(NULL, staging, &any, 1, d, bundle, blen), HK_OK);
    d[0] ^= 1;
    CHECK_RC(hk__sigstore_verify_digest(NULL, staging, &any, 1, d, bundle, blen), HK_ERR_SIGNATURE);
    CHECK(strstr(hk_last_error(), "signature failed") != NULL);

    /* the kernels default policy refuses a personal identity and names it */
    CHECK_RC(hk__sigstore_verify(NULL, staging, NULL, 0, art, alen, bundle, blen), HK_ERR_SIGNATURE);
    CHECK(strstr(hk_last_error(), "identity policy failed") != NULL);
    CHECK(strstr(hk_last_error(), res.san) != NULL);
    hk__sigstore_result_free(&res);

    /* the wrong root: the chain fails */
    hk_sigstore_trust_root *prod = load_root("data/sigstore/trusted_root.json");
    if (prod) {
        CHECK_RC(hk__sigstore_verify(NULL, prod, &any, 1, art, alen, bundle, blen), HK_ERR_SIGNATURE);
        CHECK(strstr(hk_last_error(), "certificate chain failed") != NULL);
        hk__sigstore_trust_root_free(prod);
    }

    /* CVE-2022-36056: a log entry for another signature */
    size_t clen = 0, calen = 0;
    char *cve = slurp(A "bundle_cve_2022_36056.txt.sigstore", &clen);
    char *cart = slurp(A "bundle_cve_2022_36056.txt", &calen);
    if (cve && cart) {
        CHECK_RC(hk__sigstore_verify(NULL, staging, &any, 1, cart, calen, cve, clen), HK_ERR_SIGNATURE);
        CHECK(strstr(hk_last_error(), "log entry body failed") != NULL);
    }
    free(cve);
    free(cart);

    /* hostile input: every truncation, and byte flips across the whole bundle */
    int accepted = 0;
    for (size_t n = 0; n < blen; n += 7) {
        int rc = hk__sigstore_verify(NULL, staging, &any, 1, art, alen, bundle, n);
        if (rc == HK_OK) accepted++;
    }
    CHECK(accepted == 0);
    unsigned seed = 12345;
    char *copy = malloc(blen);
    for (int i = 0; copy && i < 3000; i++) {
        memcpy(copy, bundle, blen);
        seed = seed * 1103515245u + 12345u;
        size_t at = (seed >> 8) % blen;
        copy[at] = (char)(copy[at] ^ (1 << ((seed >> 4) & 7)));
        int rc = hk__sigstore_verify(NULL, staging, &any, 1, art, alen, copy, blen);
        CHECK(rc == HK_OK || rc == HK_ERR_PARSE || rc == HK_ERR_SIGNATURE);
    }
    free(copy);
out:
    free(bundle);
    free(art);
    hk__sigstore_trust_root_free(staging);
}

/* sigstore-python's published DSSE bundle (Rekor v2, hashedrekord over the PAE; its in-toto
 * statement names sigstore-conformance's a.txt, by digest only here): accepted only where DSSE is allowed, refused at the pull/load entry
 * points, and its subject must be the artifact. */
static void test_published_dsse(void) {
    hk_sigstore_trust_root *staging = load_root("tests/sigstore/staging_trusted_root.json");
    if (!staging) return;
    size_t blen = 0, alen = 0;
    char *bundle = slurp(A "a.dsse.staging-rekor-v2.txt.sigstore.json", &blen);
    char *art = slurp(A "a.txt", &alen); /* not the subject */
    CHECK(bundle && art);
    if (bundle && art) {
        hk_sigstore_policy any = {0};
        hk_sigstore_verify_opts o = {&any, 1, 1, NULL, 0};
        unsigned char d[32];
        CHECK_RC(hk__unhex(d, "a0cfc71271d6e278e57cd332ff957c3f7043fdda354c4cbb190a30d56efa01bf", 32), HK_OK);
        hk_sigstore_result res;
        CHECK_RC(hk__sigstore_verify_ex(&res, staging, &o, d, NULL, 0, bundle, blen), HK_OK);
        CHECK(res.dsse == 1 && res.managed_key == 0);
        CHECK(res.checks & HK_SIGSTORE_CHECK_SUBJECT);
        CHECK(res.checks & HK_SIGSTORE_CHECK_BODY);
        hk__sigstore_result_free(&res);
        unsigned char other[32];
        hk__sg_sha256(other, art, alen);
        CHECK_RC(hk__sigstore_verify_ex(NULL, staging, &o, other, art, alen, bundle, blen), HK_ERR_SIGNATURE);
        CHECK(strstr(hk_last_error(), "in-toto statement has no subject for digest") != NULL);
        CHECK_RC(hk__sigstore_verify(NULL, staging, &any, 1, art, alen, bundle, blen), HK_ERR_SIGNATURE);
        CHECK(strstr(hk_last_error(), "DSSE envelopes are not accepted") != NULL);
        d[5] ^= 1;
        CHECK_RC(hk__sigstore_verify_ex(NULL, staging, &o, d, NULL, 0, bundle, blen), HK_ERR_SIGNATURE);
        CHECK(strstr(hk_last_error(), "in-toto statement has no subject for digest") != NULL);
        /* with a managed key instead of the certificate: refused, the bundle names a certificate */
        static const char pem[] = "-----BEGIN PUBLIC KEY-----\n"
                                  "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAExRRST79+PsrRBnGAI4cMu6Omz2Jh\n"
                                  "fwlMW+gIutNKVRaMyS4rQKvgngc5p8UbLj55pVHhIoAxi/SRgURZI0J3Xw==\n"
                                  "-----END PUBLIC KEY-----\n";
        hk_sigstore_verify_opts k = {NULL, 0, 1, pem, sizeof pem - 1};
        d[5] ^= 1;
        CHECK_RC(hk__sigstore_verify_ex(NULL, staging, &k, d, NULL, 0, bundle, blen), HK_ERR_SIGNATURE);
        CHECK(strstr(hk_last_error(), "not a managed key") != NULL);
        /* hostile input through the DSSE path: flips never crash, leak or verify a forgery */
        char *copy = malloc(blen);
        unsigned seed = 777;
        for (int i = 0; copy && i < 1000; i++) {
            memcpy(copy, bundle, blen);
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % blen;
            copy[at] = (char)(copy[at] ^ (1 << ((seed >> 4) & 7)));
            int rc = hk__sigstore_verify_ex(NULL, staging, &o, d, art, alen, copy, blen);
            CHECK(rc == HK_OK || rc == HK_ERR_PARSE || rc == HK_ERR_SIGNATURE);
        }
        free(copy);
    }
    free(bundle);
    free(art);
    hk__sigstore_trust_root_free(staging);
}

/* der_check.c: the values OpenSSL's decoder does not check. */
static void test_der_values(void) {
    static const unsigned char ok[] = {0x30, 0x14, 0x13, 0x03, 'a', 'B', '1', 0x17, 0x0d, '2', '4', '1', '0', '3', '1',
                                       '1', '0', '1', '6', '4', '2', 'Z'};
    CHECK(hk__sg_der_values_valid(ok, sizeof ok));
    unsigned char bad[sizeof ok];
    memcpy(bad, ok, sizeof ok);
    bad[5] = '"'; /* not in PrintableString's set */
    CHECK(!hk__sg_der_values_valid(bad, sizeof bad));
    memcpy(bad, ok, sizeof ok);
    bad[19] = 'r'; /* UTCTime 24103110164rZ */
    CHECK(!hk__sg_der_values_valid(bad, sizeof bad));
    /* sha256 AlgorithmIdentifier: NULL parameters fine, an empty OCTET STRING not */
    unsigned char alg[] = {0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00};
    CHECK(hk__sg_der_values_valid(alg, sizeof alg));
    alg[13] = 0x04;
    CHECK(!hk__sg_der_values_valid(alg, sizeof alg));
    /* a constructed value whose content does not parse is left opaque (an ANY), its neighbours not */
    static const unsigned char opaque[] = {0x30, 0x05, 0x30, 0x03, 0x30, 0x83, 0xa2};
    CHECK(hk__sg_der_values_valid(opaque, sizeof opaque));
    static const unsigned char neighbour[] = {0x30, 0x08, 0x30, 0x03, 0x30, 0x83, 0xa2, 0x13, 0x01, '"'};
    CHECK(!hk__sg_der_values_valid(neighbour, sizeof neighbour));
}

/* sg_util.c hk__sg_json_parse: every document is read as sigstore-python's strict parser reads it. */
static void test_exact_json(void) {
    static const struct {
        const char *text, *why; /* why NULL: accepted */
    } cases[] = {
        {"{\"a\":1} ", NULL},
        {"{\"a\":1} x", "text after the JSON value"},
        {"{\"a\":1}{}", "text after the JSON value"},
        {"{\"a\":1,\"a\":2}", "a JSON object has a duplicate key"},
        {"{\"a\":[{\"b\":{\"c\":1,\"d\":2,\"c\":3}}]}", "a JSON object has a duplicate key"},
        {"{\"a\":null,\"a\":1}", "a JSON object has a duplicate key"},
        {"{\"a\\u0062\":1,\"ab\":2}", "a JSON object has a duplicate key"}, /* the same key escaped */
        {"{\"a\":\"x\\u0000y\"}", "\\u0000 in a JSON string"},
        {"{\"a\":\"x\ty\"}", "control character in a JSON string"},
        {"{\"a\":\"\xc3\"}", "a JSON string is not valid UTF-8"},
        {"{\"a\":\"\xc0\xaf\"}", "a JSON string is not valid UTF-8"},     /* overlong '/' */
        {"{\"a\":\"\xed\xa0\x80\"}", "a JSON string is not valid UTF-8"}, /* a surrogate */
        {"{\"a\":\"\xc3\xa9\xf0\x9f\x98\x80\"}", NULL},
        {"{\"a\":01}", "malformed JSON number"},
        {"{\"a\":1.}", "malformed JSON number"},
        {"{\"a\":-0.5e+3}", NULL},
        {"\xef\xbb\xbf{}", "a byte that is not JSON outside a string"}, /* cJSON skips a BOM */
        {"{\x01\"a\":1}", "a byte that is not JSON outside a string"},  /* cJSON: whitespace */
        {"{\"a\":", "not valid JSON"},
    };
    for (size_t i = 0; i < HK_ARRAY_LEN(cases); i++) {
        cJSON *doc = (cJSON *)1;
        const char *why = NULL;
        int rc = hk__sg_json_parse(&doc, cases[i].text, strlen(cases[i].text), &why);
        if (cases[i].why) {
            CHECK(rc == HK_ERR_PARSE && doc == NULL);
            CHECK_STR(why, cases[i].why);
        } else {
            CHECK(rc == HK_OK && doc != NULL);
        }
        cJSON_Delete(rc == HK_OK ? doc : NULL);
    }
    /* a null member is absent, in every object; nulls in arrays stay (and fail their type) */
    const char *nulls = "{\"a\":null,\"b\":{\"c\":null,\"d\":[null,1]},\"e\":null}";
    cJSON *doc = NULL;
    const char *why = NULL;
    CHECK_RC(hk__sg_json_parse(&doc, nulls, strlen(nulls), &why), HK_OK);
    CHECK(doc && !cJSON_GetObjectItemCaseSensitive(doc, "a") && !cJSON_GetObjectItemCaseSensitive(doc, "e"));
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(doc, "b");
    CHECK(b && !cJSON_GetObjectItemCaseSensitive(b, "c") && cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(b, "d")) == 2);
    cJSON_Delete(doc);
}

/* The exact reading through the bundle and trust-root parsers: sigstore-python's published bundles,
 * edited. Each case is one the lax reading got wrong. */
static void test_exact_bundles(void) {
    hk_sigstore_trust_root *staging = load_root("tests/sigstore/staging_trusted_root.json");
    if (!staging) return;
    size_t blen = 0, alen = 0, dlen = 0, rlen = 0;
    char *bundle = slurp(A "bundle_v3.txt.sigstore", &blen);
    char *art = slurp(A "bundle_v3.txt", &alen);
    char *dsse = slurp(A "a.dsse.staging-rekor-v2.txt.sigstore.json", &dlen);
    char *roottext = slurp("tests/sigstore/staging_trusted_root.json", &rlen);
    CHECK(bundle && art && dsse && roottext);
    if (!bundle || !art || !dsse || !roottext) goto out;
    hk_sigstore_policy any = {0};
    size_t n;
    char *m;

    /* text after the object: refused (it was read up to the object's end and verified) */
    n = blen;
    m = replace(bundle, &n, "\n}\n", "\n}\n{\"mediaType\": \"x\"}\n");
    CHECK(m != NULL);
    if (m) {
        CHECK_RC(hk__sigstore_verify(NULL, staging, &any, 1, art, alen, m, n), HK_ERR_PARSE);
        CHECK(strstr(hk_last_error(), "invalid bundle: text after the JSON value") != NULL);
    }
    free(m);
    /* a key twice: refused (the first one won; sigstore-python takes the last) */
    n = blen;
    m = replace(bundle, &n, "{\n    \"mediaType\"", "{\n    \"mediaType\": \"application/x-other\",\n    \"mediaType\"");
    CHECK(m != NULL);
    if (m) {
        CHECK_RC(hk__sigstore_verify(NULL, staging, &any, 1, art, alen, m, n), HK_ERR_PARSE);
        CHECK(strstr(hk_last_error(), "invalid bundle: a JSON object has a duplicate key") != NULL);
    }
    free(m);
    n = blen;
    m = replace(bundle, &n, "\"algorithm\": \"SHA2_256\",", "\"algorithm\": \"SHA2_256\", \"algorithm\": \"SHA2_512\",");
    CHECK(m != NULL);
    if (m) CHECK_RC(hk__sigstore_verify(NULL, staging, &any, 1, art, alen, m, n), HK_ERR_PARSE);
    free(m);
    /* null is absent: the oneof's other member, and a DSSE signature's keyid as model-transparency
     * writes it (both were refused) */
    n = blen;
    m = replace(bundle, &n, "{\n    \"mediaType\"", "{\n    \"dsseEnvelope\": null,\n    \"mediaType\"");
    CHECK(m != NULL);
    if (m) CHECK_RC(hk__sigstore_verify(NULL, staging, &any, 1, art, alen, m, n), HK_OK);
    free(m);
    n = dlen;
    m = replace(dsse, &n, "\"sig\":", "\"keyid\": null, \"sig\":");
    CHECK(m != NULL);
    if (m) {
        hk_sigstore_verify_opts o = {&any, 1, 1, NULL, 0};
        unsigned char d[32];
        CHECK_RC(hk__unhex(d, "a0cfc71271d6e278e57cd332ff957c3f7043fdda354c4cbb190a30d56efa01bf", 32), HK_OK);
        CHECK_RC(hk__sigstore_verify_ex(NULL, staging, &o, d, NULL, 0, m, n), HK_OK);
        char *k = NULL;
        size_t kn = dlen;
        k = replace(dsse, &kn, "\"sig\":", "\"keyid\": 7, \"sig\":"); /* a keyid that is there must be a string */
        if (k) {
            CHECK_RC(hk__sigstore_verify_ex(NULL, staging, &o, d, NULL, 0, k, kn), HK_ERR_PARSE);
            CHECK(strstr(hk_last_error(), "keyid is not a string") != NULL);
        }
        free(k);
    }
    free(m);

    /* messageDigest.algorithm: SHA2_256 is what is compared; another or none is refused (it was not read) */
    static const char *const algs[][2] = {
        {"\"algorithm\": \"SHA2_384\",", "messageDigest.algorithm SHA2_384 is not supported"},
        {"\"algorithm\": \"HASH_ALGORITHM_UNSPECIFIED\",", "messageDigest.algorithm HASH_ALGORITHM_UNSPECIFIED is not supported"},
        {"", "messageSignature.messageDigest.algorithm missing"},
        {"\"algorithm\": null,", "messageSignature.messageDigest.algorithm missing"},
    };
    for (size_t i = 0; i < HK_ARRAY_LEN(algs); i++) {
        n = blen;
        m = replace(bundle, &n, "\"algorithm\": \"SHA2_256\",", algs[i][0]);
        CHECK(m != NULL);
        if (!m) continue;
        CHECK_RC(hk__sigstore_verify(NULL, staging, &any, 1, art, alen, m, n), HK_ERR_PARSE);
        CHECK(strstr(hk_last_error(), algs[i][1]) != NULL);
        free(m);
    }
    /* the digest must be the artifact's (and 32 bytes) */
    n = blen;
    m = replace(bundle, &n, "Xmrp3ljBF3vqYVtPy/sv1ojoxLUcLla2o46BeDPsJKI=", "Xmrp3ljBF3vqYVtPy/sv1ojoxLUcLla2o46BeDPsJKA=");
    if (m) {
        CHECK_RC(hk__sigstore_verify(NULL, staging, &any, 1, art, alen, m, n), HK_ERR_SIGNATURE);
        CHECK(strstr(hk_last_error(), "bundle message digest does not match the artifact") != NULL);
    }
    free(m);
    n = blen;
    m = replace(bundle, &n, "Xmrp3ljBF3vqYVtPy/sv1ojoxLUcLla2o46BeDPsJKI=", "Xmrp3ljBF3vqYVtPy/sv1ojoxLUcLla2o46BeDPsJKIA");
    if (m) {
        CHECK_RC(hk__sigstore_verify(NULL, staging, &any, 1, art, alen, m, n), HK_ERR_PARSE);
        CHECK(strstr(hk_last_error(), "is 33 bytes; a SHA2_256 digest is 32") != NULL);
    }
    free(m);

    /* the trust root is read the same way */
    hk_sigstore_trust_root *r = NULL;
    n = rlen;
    m = replace(roottext, &n, "\"mediaType\"", "\"tlogs\": [], \"mediaType\"");
    if (m) {
        CHECK_RC(hk__sigstore_trust_root_parse(&r, m, n), HK_ERR_PARSE);
        CHECK(strstr(hk_last_error(), "trusted root: a JSON object has a duplicate key") != NULL);
        CHECK(r == NULL);
    }
    free(m);
    char *tail = malloc(rlen + 3);
    if (tail) {
        memcpy(tail, roottext, rlen);
        memcpy(tail + rlen, "[]", 2);
        CHECK_RC(hk__sigstore_trust_root_parse(&r, tail, rlen + 2), HK_ERR_PARSE);
        CHECK(strstr(hk_last_error(), "trusted root: text after the JSON value") != NULL);
    }
    free(tail);
out:
    free(bundle);
    free(art);
    free(dsse);
    free(roottext);
    hk__sigstore_trust_root_free(staging);
}

/* A certificate carrying `exts` (OID, DER value) as given, unsigned: the identity readers only. */
static X509 *cert_with(const char *const (*exts)[2], const unsigned char *const *vals, const size_t *lens, size_t n) {
    X509 *x = X509_new();
    if (!x || X509_set_version(x, X509_VERSION_3) != 1) {
        X509_free(x);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        ASN1_OBJECT *o = OBJ_txt2obj(exts[i][0], 1);
        ASN1_OCTET_STRING *v = ASN1_OCTET_STRING_new();
        X509_EXTENSION *e = NULL;
        if (o && v && ASN1_OCTET_STRING_set(v, vals[i], (int)lens[i]) == 1)
            e = X509_EXTENSION_create_by_OBJ(NULL, o, 0, v);
        if (!e || X509_add_ext(x, e, -1) != 1) {
            X509_free(x);
            x = NULL;
        }
        X509_EXTENSION_free(e);
        ASN1_OCTET_STRING_free(v);
        ASN1_OBJECT_free(o);
        if (!x) return NULL;
    }
    return x;
}

#define REPO_OID "1.3.6.1.4.1.57264.1.12"

/* cert.c: the identity extensions in DER only; one of each extension. */
static void test_identity_der(void) {
    /* the source repository "abcde", as a UTF8String in DER and in BER forms */
    static const unsigned char der[] = {0x0c, 0x05, 'a', 'b', 'c', 'd', 'e'};
    static const unsigned char long_form[] = {0x0c, 0x81, 0x05, 'a', 'b', 'c', 'd', 'e'};
    static const unsigned char long_form4[] = {0x0c, 0x84, 0x00, 0x00, 0x00, 0x05, 'a', 'b', 'c', 'd', 'e'};
    static const unsigned char constructed[] = {0x2c, 0x09, 0x0c, 0x02, 'a', 'b', 0x0c, 0x03, 'c', 'd', 'e'};
    static const unsigned char indefinite[] = {0x2c, 0x80, 0x0c, 0x05, 'a', 'b', 'c', 'd', 'e', 0x00, 0x00};
    static const unsigned char other[] = {0x0c, 0x05, 'v', 'w', 'x', 'y', 'z'};
    static const char *const repo[][2] = {{REPO_OID, ""}, {REPO_OID, ""}};
    hk_sigstore_policy want = {NULL, 0, NULL, "abcde", NULL, 0};
    static const struct {
        const unsigned char *v;
        size_t len;
        const char *why;
    } forms[] = {
        {der, sizeof der, NULL},
        {long_form, sizeof long_form, "long-form length where the short form fits"},
        {long_form4, sizeof long_form4, "long-form length where the short form fits"},
        {constructed, sizeof constructed, "constructed string"},
        {indefinite, sizeof indefinite, "constructed string"},
    };
    for (size_t i = 0; i < HK_ARRAY_LEN(forms); i++) {
        const unsigned char *vals[1] = {forms[i].v};
        size_t lens[1] = {forms[i].len};
        X509 *x = cert_with(repo, vals, lens, 1);
        CHECK(x != NULL);
        if (!x) continue;
        char *got = hk__sg_cert_ext_utf8(x, REPO_OID);
        char *why = NULL;
        int matched = -1;
        int prc = hk__sg_check_policy(x, &want, 1, &matched, &why);
        free(why);
        why = NULL;
        int drc = hk__sg_check_identity_der(x, &why);
        if (!forms[i].why) {
            CHECK_STR(got, "abcde");
            CHECK(prc == 0 && drc == 0);
        } else {
            CHECK(got == NULL); /* was "abcde": BER read as if DER */
            CHECK(prc != 0);
            CHECK(drc != 0 && why && strstr(why, "1.3.6.1.4.1.57264.1.12 (source repository URI) is not a DER UTF8String"));
            CHECK(why && strstr(why, forms[i].why));
        }
        free(got);
        free(why);
        X509_free(x);
    }
    /* a 133-byte value: long form is right, but not in two octets where one does */
    unsigned char big[3 + 133], big4[4 + 133];
    big[0] = 0x0c, big[1] = 0x81, big[2] = 133;
    big4[0] = 0x0c, big4[1] = 0x82, big4[2] = 0x00, big4[3] = 133;
    memset(big + 3, 'a', 133);
    memset(big4 + 4, 'a', 133);
    const unsigned char *bv[1] = {big}, *bv4[1] = {big4};
    size_t bl[1] = {sizeof big}, bl4[1] = {sizeof big4};
    X509 *x = cert_with(repo, bv, bl, 1), *x4 = cert_with(repo, bv4, bl4, 1);
    char *why = NULL;
    CHECK(x && hk__sg_check_identity_der(x, &why) == 0);
    free(why);
    why = NULL;
    CHECK(x4 && hk__sg_check_identity_der(x4, &why) != 0 && why && strstr(why, "length in more octets than needed"));
    free(why);
    char *got = x4 ? hk__sg_cert_ext_utf8(x4, REPO_OID) : NULL;
    CHECK(got == NULL);
    free(got);
    X509_free(x);
    X509_free(x4);

    /* the extension twice: refused, not first-wins */
    const unsigned char *two[2] = {der, other};
    size_t twol[2] = {sizeof der, sizeof other};
    x = cert_with(repo, two, twol, 2);
    CHECK(x != NULL);
    if (x) {
        got = hk__sg_cert_ext_utf8(x, REPO_OID);
        CHECK(got == NULL); /* was "abcde" */
        free(got);
        int matched = -1;
        why = NULL;
        CHECK(hk__sg_check_policy(x, &want, 1, &matched, &why) != 0);
        free(why);
        why = NULL;
        CHECK(hk__sg_check_identity_der(x, &why) != 0 && why &&
              strstr(why, "signing certificate has extension 1.3.6.1.4.1.57264.1.12 twice"));
        free(why);
        X509_free(x);
    }

    /* the SAN: a URI in DER is read; the same name with a long-form length, or twice, is not */
    static const unsigned char san[] = {0x30, 0x0f, 0x86, 0x0d, 'h', 't', 't', 'p', 's', ':', '/', '/', 'x', '.', 'y', '/', 'z'};
    static const unsigned char san_ber[] = {0x30, 0x81, 0x0f, 0x86, 0x0d, 'h', 't', 't', 'p', 's', ':', '/', '/', 'x', '.', 'y', '/', 'z'};
    static const unsigned char san_hi[] = {0x30, 0x0f, 0x86, 0x0d, 'h', 't', 't', 'p', 's', ':', '/', '/', 'x', '.', 0xff, '/', 'z'};
    static const unsigned char san_bad[] = {0x30, 0x04, 0x86, 0x05, 'h', 't'}; /* truncated name */
    static const char *const sans[][2] = {{"2.5.29.17", ""}, {"2.5.29.17", ""}};
    hk_sigstore_policy want_san = {NULL, 0, "https://x.y/z", NULL, NULL, 0};
    const unsigned char *sv[][2] = {{san, NULL}, {san_ber, NULL}, {san_hi, NULL}, {san, san}, {san_bad, NULL}};
    size_t sl[][2] = {{sizeof san, 0}, {sizeof san_ber, 0}, {sizeof san_hi, 0}, {sizeof san, sizeof san},
                      {sizeof san_bad, 0}};
    size_t sn[] = {1, 1, 1, 2, 1};
    static const char *const san_why[] = {NULL, "subject alternative name is not DER", "subject alternative name is not DER",
                                          "extension 2.5.29.17 twice", "subject alternative name is malformed"};
    for (size_t i = 0; i < HK_ARRAY_LEN(sn); i++) {
        x = cert_with(sans, sv[i], sl[i], sn[i]);
        CHECK(x != NULL);
        if (!x) continue;
        size_t count = 0;
        char **names = hk__sg_cert_sans(x, &count);
        int matched = -1;
        why = NULL;
        int prc = hk__sg_check_policy(x, &want_san, 1, &matched, &why);
        free(why);
        why = NULL;
        int drc = hk__sg_check_identity_der(x, &why);
        if (i == 0) {
            CHECK(count == 1 && names && strcmp(names[0], "https://x.y/z") == 0);
            CHECK(prc == 0 && drc == 0);
        } else {
            CHECK(count == 0);
            CHECK(prc != 0 && drc != 0);
            CHECK(why && strstr(why, san_why[i]));
        }
        for (size_t j = 0; names && j < count; j++) free(names[j]);
        free(names);
        free(why);
        X509_free(x);
    }
}

/* trust_root.c: one parse per content per process, shared by threads. */
typedef struct {
    const char *root, *bundle, *art;
    size_t rlen, blen, alen;
    int failures;
} verify_job;

static void *verify_thread(void *arg) {
    verify_job *j = arg;
    hk_sigstore_policy any = {0};
    for (int i = 0; i < 8; i++) {
        hk_sigstore_trust_root *r = NULL;
        if (hk__sigstore_trust_root_parse(&r, j->root, j->rlen) != HK_OK ||
            hk__sigstore_verify(NULL, r, &any, 1, j->art, j->alen, j->bundle, j->blen) != HK_OK)
            j->failures++;
        hk__sigstore_trust_root_free(r);
    }
    return NULL;
}

static void test_trust_root_memo(void) {
    size_t rlen = 0, blen = 0, alen = 0;
    char *text = slurp("tests/sigstore/staging_trusted_root.json", &rlen);
    char *bundle = slurp(A "bundle_v3.txt.sigstore", &blen);
    char *art = slurp(A "bundle_v3.txt", &alen);
    CHECK(text && bundle && art);
    if (!text || !bundle || !art) goto out;
    hk_sigstore_trust_root *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    CHECK_RC(hk__sigstore_trust_root_parse(&a, text, rlen), HK_OK);
    CHECK_RC(hk__sigstore_trust_root_parse(&b, text, rlen), HK_OK);
    CHECK(a && a == b); /* the same bytes: parsed once, shared */
    char *path = src_path("tests/sigstore/staging_trusted_root.json");
    CHECK_RC(hk__sigstore_trust_root_load(&c, path), HK_OK);
    CHECK(c == a);
    free(path);
    /* other bytes (the file edited in place): another root */
    char *edited = malloc(rlen + 1);
    if (edited) {
        memcpy(edited, text, rlen);
        edited[rlen] = '\n';
        CHECK_RC(hk__sigstore_trust_root_parse(&d, edited, rlen + 1), HK_OK);
        CHECK(d && d != a);
    }
    free(edited);
    /* the memo cleared (hk_shutdown): roots still held stay valid; the next parse is a new one */
    hk__sigstore_trust_root_memo_clear();
    hk_sigstore_policy any = {0};
    CHECK_RC(hk__sigstore_verify(NULL, b, &any, 1, art, alen, bundle, blen), HK_OK);
    hk__sigstore_trust_root_free(a);
    hk__sigstore_trust_root_free(b);
    CHECK_RC(hk__sigstore_verify(NULL, c, &any, 1, art, alen, bundle, blen), HK_OK);
    hk__sigstore_trust_root_free(c);
    hk__sigstore_trust_root_free(d);
    /* more distinct roots than the memo keeps: the oldest go, nothing leaks */
    for (int i = 0; i < 12; i++) {
        size_t n = rlen + (size_t)i + 1;
        char *pad = malloc(n);
        if (!pad) continue;
        memcpy(pad, text, rlen);
        memset(pad + rlen, ' ', n - rlen);
        hk_sigstore_trust_root *r = NULL;
        CHECK_RC(hk__sigstore_trust_root_parse(&r, pad, n), HK_OK);
        hk__sigstore_trust_root_free(r);
        free(pad);
    }
    /* threads parsing and verifying with one shared root at once (run under TSan too), each round
     * with a fresh root: OpenSSL fills caches of the CA certificates on their first use */
    enum { N = 4 };
    for (int round = 0; round < 4; round++) {
        hk__sigstore_trust_root_memo_clear();
        pthread_t t[N];
        verify_job jobs[N];
        for (int i = 0; i < N; i++) {
            jobs[i] = (verify_job){text, bundle, art, rlen, blen, alen, 0};
            CHECK(pthread_create(&t[i], NULL, verify_thread, &jobs[i]) == 0);
        }
        for (int i = 0; i < N; i++) {
            pthread_join(t[i], NULL);
            CHECK(jobs[i].failures == 0);
        }
    }
    hk__sigstore_trust_root_memo_clear();
out:
    free(text);
    free(bundle);
    free(art);
}

int main(void) {
    test_helpers();
    test_der_values();
    test_trust_root();
    test_published_bundles();
    test_published_dsse();
    test_exact_json();
    test_exact_bundles();
    test_identity_der();
    test_trust_root_memo();
    return hk_test_finish();
}

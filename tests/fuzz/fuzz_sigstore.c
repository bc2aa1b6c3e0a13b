/* Sigstore bundles (libhub/src/sigstore): the whole verification of a hostile bundle (parse, TSA
 * responses, certificate chain, SCT, policy, inclusion proof, checkpoint, SET, body, signature)
 * against the production trusted root over a fixed artifact, three ways: as pulls and loads
 * verify (messageSignature only), as the bundle-verification entry point does with DSSE allowed
 * (envelope, PAE signature, dsse/intoto/hashedrekord v2 bodies, in-toto statement), and with a
 * managed key; then as a trusted root (exact JSON, the memo). Nothing fuzzed may verify: a bundle
 * that passes would be a forged signature (the seeds are real bundles over other artifacts). */
#include "fuzz_util.h"
#include "sigstore/sg_impl.h"

#ifndef HK_SOURCE_DIR
#define HK_SOURCE_DIR "."
#endif

static hk_sigstore_trust_root *root;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    if (hk__sigstore_trust_root_load(&root, HK_SOURCE_DIR "/data/sigstore/trusted_root.json") != HK_OK) abort();
    return 0;
}

/* the key of sigstore-conformance's managed-key cases (its seeds are signed by it) */
static const char KEY_PEM[] = "-----BEGIN PUBLIC KEY-----\n"
                              "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAExRRST79+PsrRBnGAI4cMu6Omz2Jh\n"
                              "fwlMW+gIutNKVRaMyS4rQKvgngc5p8UbLj55pVHhIoAxi/SRgURZI0J3Xw==\n"
                              "-----END PUBLIC KEY-----\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char artifact[] = "hubkern fuzz artifact\n";
    hk_sigstore_result r;
    memset(&r, 0, sizeof r);
    int rc = hk__sigstore_verify(&r, root, NULL, 0, artifact, sizeof artifact - 1, (const char *)data, size);
    if (rc == HK_OK) abort(); /* a forgery */
    if (!*hk_last_error()) abort();
    hk__sigstore_result_free(&r);

    unsigned char digest[32];
    hk__sg_sha256(digest, artifact, sizeof artifact - 1);
    hk_sigstore_policy any = {0};
    hk_sigstore_verify_opts dsse = {&any, 1, 1, NULL, 0};
    hk_sigstore_verify_opts key = {NULL, 0, 1, KEY_PEM, sizeof KEY_PEM - 1};
    const hk_sigstore_verify_opts *modes[2] = {&dsse, &key};
    for (int i = 0; i < 2; i++) {
        rc = hk__sigstore_verify_ex(&r, root, modes[i], digest, artifact, sizeof artifact - 1, (const char *)data, size);
        if (rc == HK_OK) abort();
        if (!*hk_last_error()) abort();
        hk__sigstore_result_free(&r);
    }

    /* the same bytes as a trusted root: the exact-JSON reader, then the process memo (bytes that
     * parse once give the same root again) */
    hk_sigstore_trust_root *t1 = NULL, *t2 = NULL;
    if (hk__sigstore_trust_root_parse(&t1, (const char *)data, size) == HK_OK &&
        (hk__sigstore_trust_root_parse(&t2, (const char *)data, size) != HK_OK || t2 != t1))
        abort();
    hk__sigstore_trust_root_free(t1);
    hk__sigstore_trust_root_free(t2);
    return 0;
}

/* The SCT embedded in the signing certificate (RFC 6962 §3.2-3.3), verified against the CT log
 * keys of the trusted root. Fulcio logs a precertificate and embeds the SCT in the final
 * certificate, so the signed data is rebuilt from the final certificate: its TBSCertificate with
 * the SCT list extension removed (re-encoded by OpenSSL), bound to the issuer's key hash.
 * Exactly one SCT is expected, with SHA-256 (sigstore-python's rule). */
#include "sigstore/sg_impl.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#define SCT_LIST_OID "1.3.6.1.4.1.11129.2.4.2"
#define CT_PRECERT_SIGNER_OID "1.3.6.1.4.1.11129.2.4.4" /* EKU of a precertificate signing cert */

typedef struct sct {
    unsigned version;
    const unsigned char *log_id; /* 32 bytes */
    uint64_t timestamp_ms;
    const unsigned char *ext;
    size_t ext_len;
    unsigned hash_alg, sig_alg;
    const unsigned char *sig;
    size_t sig_len;
} sct;

static bool rd(const unsigned char **p, const unsigned char *end, size_t n, uint64_t *v) {
    if ((size_t)(end - *p) < n) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) x = (x << 8) | (*p)[i];
    *p += n;
    *v = x;
    return true;
}

/* The extension value: OCTET STRING { SignedCertificateTimestampList (TLS encoding) }. */
static int parse_single_sct(sct *s, ASN1_OCTET_STRING **holder, X509 *leaf, char **why) {
    ASN1_OBJECT *obj = OBJ_txt2obj(SCT_LIST_OID, 1);
    int idx = obj ? X509_get_ext_by_OBJ(leaf, obj, -1) : -1;
    ASN1_OBJECT_free(obj);
    if (idx < 0) {
        *why = hk__strdup("certificate does not contain a signed certificate timestamp extension");
        return -1;
    }
    const ASN1_OCTET_STRING *outer = X509_EXTENSION_get_data(X509_get_ext(leaf, idx));
    const unsigned char *q = ASN1_STRING_get0_data(outer);
    long olen = ASN1_STRING_length(outer);
    const unsigned char *q0 = q;
    *holder = d2i_ASN1_OCTET_STRING(NULL, &q, olen);
    if (!*holder || q != q0 + olen) {
        *why = hk__strdup("SCT list extension is not an OCTET STRING");
        return -1;
    }
    const unsigned char *p = ASN1_STRING_get0_data(*holder);
    const unsigned char *end = p + ASN1_STRING_length(*holder);
    uint64_t total, one, v;
    if (!rd(&p, end, 2, &total) || total != (uint64_t)(end - p)) goto malformed;
    int count = 0;
    const unsigned char *first = NULL, *first_end = NULL;
    while (p < end) {
        if (!rd(&p, end, 2, &one) || one == 0 || one > (uint64_t)(end - p)) goto malformed;
        if (!count) {
            first = p;
            first_end = p + one;
        }
        p += one;
        count++;
    }
    if (count != 1) {
        *why = hk__asprintf("expected one certificate timestamp, found %d", count);
        return -1;
    }
    p = first;
    end = first_end;
    if (!rd(&p, end, 1, &v)) goto malformed;
    s->version = (unsigned)v;
    if ((size_t)(end - p) < 32) goto malformed;
    s->log_id = p;
    p += 32;
    if (!rd(&p, end, 8, &s->timestamp_ms) || !rd(&p, end, 2, &v) || v > (uint64_t)(end - p)) goto malformed;
    s->ext = p;
    s->ext_len = (size_t)v;
    p += v;
    uint64_t h, a;
    if (!rd(&p, end, 1, &h) || !rd(&p, end, 1, &a) || !rd(&p, end, 2, &v) || v != (uint64_t)(end - p))
        goto malformed;
    s->hash_alg = (unsigned)h;
    s->sig_alg = (unsigned)a;
    s->sig = p;
    s->sig_len = (size_t)v;
    if (s->version != 0) {
        *why = hk__asprintf("unsupported SCT version %u", s->version);
        return -1;
    }
    return 0;
malformed:
    *why = hk__strdup("malformed SCT list");
    return -1;
}

static bool has_precert_signer_eku(X509 *x) {
    EXTENDED_KEY_USAGE *eku = X509_get_ext_d2i(x, NID_ext_key_usage, NULL, NULL);
    bool found = false;
    ASN1_OBJECT *want = OBJ_txt2obj(CT_PRECERT_SIGNER_OID, 1);
    for (int i = 0; eku && want && i < sk_ASN1_OBJECT_num(eku); i++)
        if (OBJ_cmp(sk_ASN1_OBJECT_value(eku, i), want) == 0) found = true;
    ASN1_OBJECT_free(want);
    EXTENDED_KEY_USAGE_free(eku);
    return found;
}

/* TBSCertificate of the leaf without the SCT list: the precertificate as the log saw it. */
static unsigned char *precert_tbs(X509 *leaf, int *len) {
    X509 *dup = X509_dup(leaf);
    if (!dup) return NULL;
    ASN1_OBJECT *obj = OBJ_txt2obj(SCT_LIST_OID, 1);
    int idx = obj ? X509_get_ext_by_OBJ(dup, obj, -1) : -1;
    ASN1_OBJECT_free(obj);
    unsigned char *der = NULL;
    if (idx >= 0) {
        X509_EXTENSION_free(X509_delete_ext(dup, idx));
        *len = i2d_re_X509_tbs(dup, &der);
    }
    X509_free(dup);
    if (!der || *len <= 0) {
        OPENSSL_free(der);
        return NULL;
    }
    return der;
}

int hk__sg_check_sct(const hk_sigstore_trust_root *root, X509 *leaf, STACK_OF(X509) *chain, char **why) {
    sct s;
    ASN1_OCTET_STRING *holder = NULL;
    int rc = -1;
    unsigned char *tbs = NULL, *msg = NULL;
    if (parse_single_sct(&s, &holder, leaf, why) != 0) goto done;
    if (s.hash_alg != 4 /* sha256 */) {
        *why = hk__asprintf("unexpected hash algorithm %u in SCT: only SHA256 is supported", s.hash_alg);
        goto done;
    }
    int n = sk_X509_num(chain);
    X509 *issuer = n > 0 ? sk_X509_value(chain, 0) : NULL;
    if (issuer && has_precert_signer_eku(issuer)) issuer = n > 1 ? sk_X509_value(chain, 1) : NULL;
    if (!issuer || X509_check_ca(issuer) == 0) {
        *why = hk__strdup("SCT issuer is not a CA certificate");
        goto done;
    }
    unsigned char issuer_key_hash[32];
    if (!hk__sg_spki_id(issuer_key_hash, X509_get0_pubkey(issuer))) {
        *why = hk__strdup("SCT issuer key unusable");
        goto done;
    }
    int tbs_len = 0;
    tbs = precert_tbs(leaf, &tbs_len);
    if (!tbs || tbs_len >= (1 << 24)) {
        *why = hk__strdup("cannot rebuild the precertificate");
        goto done;
    }
    /* digitally-signed struct: version, signature_type=0, timestamp, entry_type=precert(1),
     * issuer_key_hash, tbs<1..2^24-1>, extensions<0..2^16-1> */
    size_t mlen = 1 + 1 + 8 + 2 + 32 + 3 + (size_t)tbs_len + 2 + s.ext_len;
    msg = malloc(mlen);
    if (!msg) {
        *why = hk__strdup("out of memory");
        goto done;
    }
    unsigned char *w = msg;
    *w++ = (unsigned char)s.version;
    *w++ = 0;
    for (int i = 7; i >= 0; i--) *w++ = (unsigned char)(s.timestamp_ms >> (8 * i));
    *w++ = 0;
    *w++ = 1;
    memcpy(w, issuer_key_hash, 32);
    w += 32;
    *w++ = (unsigned char)(tbs_len >> 16);
    *w++ = (unsigned char)(tbs_len >> 8);
    *w++ = (unsigned char)tbs_len;
    memcpy(w, tbs, (size_t)tbs_len);
    w += tbs_len;
    *w++ = (unsigned char)(s.ext_len >> 8);
    *w++ = (unsigned char)s.ext_len;
    memcpy(w, s.ext, s.ext_len);
    /* CT keys are looked up by id; their validity is checked at the SCT's own time */
    int64_t when = (int64_t)(s.timestamp_ms / 1000);
    if (!hk__sg_keyring_verify(root->ctlogs, root->nctlogs, s.log_id, 32, when, s.sig, s.sig_len, msg, mlen)) {
        char hex[65];
        hk__hex(hex, s.log_id, 32);
        *why = hk__asprintf("SCT signature does not verify with any CT log key of the trusted root (log id %s)", hex);
        goto done;
    }
    rc = 0;
done:
    ASN1_OCTET_STRING_free(holder);
    OPENSSL_free(tbs);
    free(msg);
    ERR_clear_error();
    return rc;
}

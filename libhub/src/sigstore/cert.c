/* The signing certificate: chain to a Fulcio CA of the trusted root at a signing time, the
 * Sigstore X.509 profile (not a CA, digitalSignature, codeSigning), and the Fulcio extensions and
 * SANs that carry the identity. The chain is built from the trusted root alone (the bundle's
 * extra certificates are ignored, as sigstore-python does), every trusted CA certificate being an
 * anchor (partial chains), at the signing time rather than now: Fulcio leaves live ten minutes. */
#include "sigstore/sg_impl.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#define OID_SIGSTORE_OTHERNAME "1.3.6.1.4.1.57264.1.7"
#define OID_SAN "2.5.29.17"

/* The UTF8String extensions the identity is read from (policy.c, verify.c). */
static const char *const UTF8_EXTS[][2] = {
    {"1.3.6.1.4.1.57264.1.8", "OIDC issuer (v2)"},
    {"1.3.6.1.4.1.57264.1.9", "build signer URI"},
    {"1.3.6.1.4.1.57264.1.12", "source repository URI"},
};

int hk__sg_check_chain(const hk_sigstore_trust_root *root, X509 *leaf, int64_t when,
                      STACK_OF(X509) **chain, char **why) {
    *chain = NULL;
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    int rc = -1;
    size_t anchors = 0;
    if (!store || !ctx) {
        *why = hk__strdup("out of memory");
        goto done;
    }
    for (size_t i = 0; i < root->ncas; i++) {
        const hk_sg_ca *ca = &root->cas[i];
        if (when < ca->start || when > ca->end) continue; /* the CA was not in service then */
        for (size_t j = 0; j < ca->ncerts; j++)
            if (X509_STORE_add_cert(store, ca->certs[j]) == 1) anchors++;
    }
    ERR_clear_error(); /* duplicates across CAs are fine */
    if (!anchors) {
        *why = hk__asprintf("no Fulcio CA of the trusted root was valid at %lld", (long long)when);
        goto done;
    }
    if (X509_STORE_CTX_init(ctx, store, leaf, NULL) != 1) {
        *why = hk__strdup("cannot set up certificate verification");
        goto done;
    }
    X509_STORE_CTX_set_flags(ctx, X509_V_FLAG_PARTIAL_CHAIN | X509_V_FLAG_X509_STRICT);
    X509_STORE_CTX_set_time(ctx, 0, (time_t)when);
    if (X509_verify_cert(ctx) != 1) {
        int err = X509_STORE_CTX_get_error(ctx);
        *why = hk__asprintf("certificate does not chain to a Fulcio CA at time %lld: %s", (long long)when,
                           X509_verify_cert_error_string(err));
        goto done;
    }
    STACK_OF(X509) *c = X509_STORE_CTX_get1_chain(ctx);
    if (!c || sk_X509_num(c) < 2) {
        hk__sg_certs_free(c);
        *why = hk__strdup("certificate chain has no issuer");
        goto done;
    }
    X509_free(sk_X509_shift(c)); /* drop the leaf: callers want the issuers */
    *chain = c;
    rc = 0;
done:
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    ERR_clear_error();
    return rc;
}

int hk__sg_check_usage(X509 *leaf, char **why) {
    if (X509_get_version(leaf) != X509_VERSION_3) {
        *why = hk__strdup("signing certificate is not X.509 v3");
        return -1;
    }
    if (X509_check_ca(leaf) != 0) {
        *why = hk__strdup("signing certificate is a CA certificate, not a leaf");
        return -1;
    }
    uint32_t ku = X509_get_key_usage(leaf);
    if (ku == UINT32_MAX || !(ku & KU_DIGITAL_SIGNATURE)) {
        *why = hk__strdup("key usage is not digitalSignature");
        return -1;
    }
    uint32_t xku = X509_get_extended_key_usage(leaf);
    if (xku == UINT32_MAX || !(xku & XKU_CODE_SIGN)) {
        *why = hk__strdup("extended key usage does not contain codeSigning");
        return -1;
    }
    return 0;
}

/* The extension's value; NULL when absent or present twice (first-wins would let a second copy
 * hide behind the first for a reader that takes the last). */
static const ASN1_OCTET_STRING *ext_data(X509 *cert, const char *oid) {
    ASN1_OBJECT *obj = OBJ_txt2obj(oid, 1);
    if (!obj) return NULL;
    int idx = X509_get_ext_by_OBJ(cert, obj, -1);
    int again = idx < 0 ? -1 : X509_get_ext_by_OBJ(cert, obj, idx);
    ASN1_OBJECT_free(obj);
    if (idx < 0 || again >= 0) return NULL;
    return X509_EXTENSION_get_data(X509_get_ext(cert, idx));
}

/* A DER length at *p (X.690 10.1: definite, in the fewest octets); why names the BER form. */
static bool der_length(size_t *len, const unsigned char **p, const unsigned char *end, const char **why) {
    *why = "truncated length";
    if (*p >= end) return false;
    unsigned char c = *(*p)++;
    if (c < 0x80) {
        *len = c;
        return true;
    }
    size_t nb = c & 0x7f;
    if (nb == 0) {
        *why = "indefinite length";
        return false;
    }
    if (nb > 4 || (size_t)(end - *p) < nb) return false;
    size_t v = 0;
    for (size_t i = 0; i < nb; i++) v = (v << 8) | *(*p)++;
    if (v < 0x80) {
        *why = "long-form length where the short form fits";
        return false;
    }
    if (v >> (8 * (nb - 1)) == 0) {
        *why = "length in more octets than needed";
        return false;
    }
    *len = v;
    return true;
}

/* The content of a DER UTF8String that is all of [p, p+n); NULL (why set) otherwise. */
static const unsigned char *der_utf8(const unsigned char *p, size_t n, size_t *out_len, const char **why) {
    const unsigned char *end = p + n;
    *why = "empty";
    if (n == 0) return NULL;
    if (*p == 0x2c) {
        *why = "constructed string";
        return NULL;
    }
    if (*p != 0x0c) {
        *why = "not a UTF8String";
        return NULL;
    }
    p++;
    size_t len;
    if (!der_length(&len, &p, end, why)) return NULL;
    if ((size_t)(end - p) != len) {
        *why = "length does not cover the value exactly";
        return NULL;
    }
    if (!hk__sg_utf8_valid(p, len)) {
        *why = "not UTF-8";
        return NULL;
    }
    *out_len = len;
    return p;
}

/* The SAN as OpenSSL decoded it, if its encoding is the DER one: OpenSSL's decoder takes BER
 * (long-form and indefinite lengths, constructed strings) and its encoder writes DER, so a value
 * that does not come back byte for byte was not DER. */
static GENERAL_NAMES *san_der(X509 *cert, const char **why) {
    *why = NULL;
    const ASN1_OCTET_STRING *d = ext_data(cert, OID_SAN);
    if (!d) return NULL;
    const unsigned char *p = ASN1_STRING_get0_data(d);
    long len = ASN1_STRING_length(d);
    GENERAL_NAMES *names = d2i_GENERAL_NAMES(NULL, &p, len);
    if (!names || p != ASN1_STRING_get0_data(d) + len) {
        GENERAL_NAMES_free(names);
        ERR_clear_error();
        *why = "subject alternative name is malformed";
        return NULL;
    }
    unsigned char *der = NULL;
    int n = i2d_GENERAL_NAMES(names, &der);
    bool ok = n == len && memcmp(der, ASN1_STRING_get0_data(d), (size_t)n) == 0;
    OPENSSL_free(der);
    if (n < 0) {
        GENERAL_NAMES_free(names);
        ERR_clear_error();
        *why = "out of memory";
        return NULL;
    }
    for (int i = 0; ok && i < sk_GENERAL_NAME_num(names); i++) {
        GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
        if (g->type == GEN_URI || g->type == GEN_EMAIL) /* IA5String: ASCII only (X.680 41) */
            for (int j = 0; ok && j < ASN1_STRING_length(g->d.ia5); j++) ok = ASN1_STRING_get0_data(g->d.ia5)[j] < 0x80;
    }
    ERR_clear_error();
    if (!ok) {
        *why = "subject alternative name is not DER";
        GENERAL_NAMES_free(names);
        return NULL;
    }
    return names;
}

int hk__sg_check_identity_der(X509 *leaf, char **why) {
    int n = X509_get_ext_count(leaf);
    for (int i = 0; i < n; i++) {
        const ASN1_OBJECT *a = X509_EXTENSION_get_object(X509_get_ext(leaf, i));
        for (int j = i + 1; j < n; j++) {
            if (OBJ_cmp(a, X509_EXTENSION_get_object(X509_get_ext(leaf, j))) != 0) continue;
            char oid[80];
            OBJ_obj2txt(oid, sizeof oid, a, 1);
            *why = hk__asprintf("signing certificate has extension %s twice", oid);
            return -1;
        }
    }
    for (size_t i = 0; i < HK_ARRAY_LEN(UTF8_EXTS); i++) {
        const ASN1_OCTET_STRING *d = ext_data(leaf, UTF8_EXTS[i][0]);
        const char *what = NULL;
        size_t len;
        if (d && !der_utf8(ASN1_STRING_get0_data(d), (size_t)ASN1_STRING_length(d), &len, &what)) {
            *why = hk__asprintf("extension %s (%s) is not a DER UTF8String: %s", UTF8_EXTS[i][0], UTF8_EXTS[i][1], what);
            return -1;
        }
    }
    const char *what = NULL;
    GENERAL_NAMES_free(san_der(leaf, &what));
    if (what) {
        *why = hk__strdup(what);
        return -1;
    }
    return 0;
}

static char *text_of(const unsigned char *p, int n) {
    if (n < 0 || memchr(p, 0, (size_t)n)) return NULL; /* an embedded NUL would truncate comparisons */
    return hk__strndup((const char *)p, (size_t)n);
}

char *hk__sg_cert_ext_raw(X509 *cert, const char *oid) {
    const ASN1_OCTET_STRING *d = ext_data(cert, oid);
    return d ? text_of(ASN1_STRING_get0_data(d), ASN1_STRING_length(d)) : NULL;
}

char *hk__sg_cert_ext_utf8(X509 *cert, const char *oid) {
    const ASN1_OCTET_STRING *d = ext_data(cert, oid);
    if (!d) return NULL;
    const char *why;
    size_t len = 0;
    const unsigned char *s = der_utf8(ASN1_STRING_get0_data(d), (size_t)ASN1_STRING_length(d), &len, &why);
    return s ? text_of(s, (int)len) : NULL; /* BER (d2i_ASN1_UTF8STRING takes it) is not read */
}

char **hk__sg_cert_sans(X509 *cert, size_t *count) {
    *count = 0;
    const char *why;
    GENERAL_NAMES *names = san_der(cert, &why);
    int n = names ? sk_GENERAL_NAME_num(names) : 0;
    char **out = calloc((size_t)n + 1, sizeof *out);
    if (!out) {
        GENERAL_NAMES_free(names);
        return NULL;
    }
    ASN1_OBJECT *other = OBJ_txt2obj(OID_SIGSTORE_OTHERNAME, 1);
    for (int i = 0; i < n; i++) {
        GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
        const ASN1_STRING *s = NULL;
        if (g->type == GEN_URI || g->type == GEN_EMAIL) {
            s = g->d.ia5;
        } else if (g->type == GEN_OTHERNAME && other && OBJ_cmp(g->d.otherName->type_id, other) == 0 &&
                   g->d.otherName->value->type == V_ASN1_UTF8STRING) {
            s = g->d.otherName->value->value.utf8string;
        }
        if (!s) continue;
        char *t = text_of(ASN1_STRING_get0_data(s), ASN1_STRING_length(s));
        if (t) out[(*count)++] = t;
    }
    ASN1_OBJECT_free(other);
    GENERAL_NAMES_free(names);
    return out;
}

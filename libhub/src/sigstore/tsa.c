/* RFC 3161 signed timestamps (OpenSSL TS API). Each response must be a granted timestamp over
 * the bundle's signature bytes, signed by a timestamp authority of the trusted root whose chain
 * holds at the response's own genTime (TSA certificates outlive nothing), and that genTime must
 * fall inside the authority's validFor window. Responses no authority vouches for are ignored;
 * the caller needs at least one trusted time overall. */
#include "sigstore/sg_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ts.h>

/* genTime as seconds. DER (X.690 11.7) wants YYYYMMDDHHMMSS[.fff]Z; OpenSSL decodes the string
 * without looking at it, so a response whose genTime is not one is malformed, not merely
 * unverifiable (sigstore-python's parser refuses it: the bundle fails). */
static bool asn1_time_seconds(int64_t *out, const ASN1_GENERALIZEDTIME *t) {
    struct tm tm;
    if (!t || ASN1_STRING_type(t) != V_ASN1_GENERALIZEDTIME || ASN1_GENERALIZEDTIME_check(t) != 1) return false;
    int n = ASN1_STRING_length(t);
    const unsigned char *d = ASN1_STRING_get0_data(t);
    if (n < 15 || d[n - 1] != 'Z' || ASN1_TIME_to_tm(t, &tm) != 1) return false;
    char buf[96];
    snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec);
    return hk__sg_parse_rfc3339(out, buf);
}

/* The TSTInfo inside the token is decoded separately by OpenSSL; hold it to DER as well (and
 * its values, der_check.c). */
static bool tst_info_is_der(TS_RESP *resp) {
    PKCS7 *token = TS_RESP_get_token(resp);
    TS_TST_INFO *info = TS_RESP_get_tst_info(resp);
    if (!token || !info) return true; /* a rejection status: nothing to hold */
    if (!PKCS7_type_is_signed(token) || !token->d.sign->contents ||
        !token->d.sign->contents->d.other || token->d.sign->contents->d.other->type != V_ASN1_OCTET_STRING)
        return false;
    const ASN1_OCTET_STRING *os = token->d.sign->contents->d.other->value.octet_string;
    unsigned char *der = NULL;
    int n = i2d_TS_TST_INFO(info, &der);
    bool same = n > 0 && n == ASN1_STRING_length(os) && memcmp(der, ASN1_STRING_get0_data(os), (size_t)n) == 0 &&
                hk__sg_der_values_valid(der, (size_t)n);
    OPENSSL_free(der);
    return same;
}

static bool verify_with(const hk_sg_ca *tsa, TS_RESP *resp, int64_t gen, const hk_sg_bytes *msg) {
    if (tsa->ncerts < 2) return false; /* signing cert + root at least */
    TS_VERIFY_CTX *ctx = TS_VERIFY_CTX_new();
    X509_STORE *store = X509_STORE_new();
    STACK_OF(X509) *untrusted = sk_X509_new_null();
    X509_VERIFY_PARAM *param = X509_VERIFY_PARAM_new();
    BIO *data = BIO_new_mem_buf(msg->data, (int)msg->len);
    bool ok = false;
    if (!ctx || !store || !untrusted || !param || !data) goto done;
    X509_STORE_add_cert(store, tsa->certs[tsa->ncerts - 1]);
    for (size_t i = 0; i + 1 < tsa->ncerts; i++) {
        if (!X509_up_ref(tsa->certs[i])) goto done;
        sk_X509_push(untrusted, tsa->certs[i]);
    }
    X509_VERIFY_PARAM_set_time(param, (time_t)gen);
    X509_STORE_set1_param(store, param);
    TS_VERIFY_CTX_set_flags(ctx, TS_VFY_VERSION | TS_VFY_SIGNATURE | TS_VFY_DATA);
    TS_VERIFY_CTX_set_store(ctx, store);
    store = NULL;
    TS_VERIFY_CTX_set_certs(ctx, untrusted);
    untrusted = NULL;
    TS_VERIFY_CTX_set_data(ctx, data);
    data = NULL;
    /* granted (0) only: sigstore-python refuses grantedWithMods too */
    if (ASN1_INTEGER_get(TS_STATUS_INFO_get0_status(TS_RESP_get_status_info(resp))) != 0) goto done;
    if (TS_RESP_verify_response(ctx, resp) != 1) goto done;
    /* the signer must be the authority's signing certificate, not just any chain member */
    PKCS7 *token = TS_RESP_get_token(resp);
    STACK_OF(PKCS7_SIGNER_INFO) *sis = token ? PKCS7_get_signer_info(token) : NULL;
    if (!sis || sk_PKCS7_SIGNER_INFO_num(sis) != 1) goto done;
    const PKCS7_ISSUER_AND_SERIAL *ias = sk_PKCS7_SIGNER_INFO_value(sis, 0)->issuer_and_serial;
    /* certificates the token carries are not trusted; they must be the authority's own, byte for
     * byte (sigstore-python rejects a token whose embedded certificate was altered) */
    STACK_OF(X509) *embedded = PKCS7_type_is_signed(token) ? token->d.sign->cert : NULL;
    for (int i = 0; i < sk_X509_num(embedded); i++) {
        bool known = false;
        for (size_t j = 0; j < tsa->ncerts && !known; j++) known = X509_cmp(sk_X509_value(embedded, i), tsa->certs[j]) == 0;
        if (!known) goto done;
    }
    X509 *signer = tsa->certs[0];
    ok = ias && ASN1_INTEGER_cmp(X509_get0_serialNumber(signer), ias->serial) == 0 &&
         X509_NAME_cmp(X509_get_issuer_name(signer), ias->issuer) == 0;
done:
    TS_VERIFY_CTX_free(ctx);
    X509_STORE_free(store);
    hk__sg_certs_free(untrusted);
    X509_VERIFY_PARAM_free(param);
    BIO_free(data);
    ERR_clear_error();
    return ok;
}

int hk__sg_check_tsa(const hk_sigstore_trust_root *root, const hk_sg_bundle *b, int64_t *times, size_t *ntimes,
                    char **why) {
    *ntimes = 0;
    if (b->ntsrs == 0) return 0;
    if (root->ntsas == 0) {
        *why = hk__strdup("the bundle has signed timestamps but the trusted root has no timestamp authority");
        return -1;
    }
    for (size_t i = 0; i < b->ntsrs; i++)
        for (size_t j = 0; j < i; j++)
            if (b->tsrs[i].len == b->tsrs[j].len && memcmp(b->tsrs[i].data, b->tsrs[j].data, b->tsrs[i].len) == 0) {
                *why = hk__strdup("duplicate signed timestamp");
                return -1;
            }
    for (size_t i = 0; i < b->ntsrs; i++) {
        const unsigned char *p = b->tsrs[i].data;
        TS_RESP *resp = d2i_TS_RESP(NULL, &p, (long)b->tsrs[i].len);
        /* strict DER: what OpenSSL parsed must re-encode to the same bytes, and the values it
         * does not look at must be valid for their types (sigstore-python's parser refuses BER
         * leniencies and invalid values, and a malformed response fails the whole bundle) */
        unsigned char *again = NULL;
        int alen = resp ? i2d_TS_RESP(resp, &again) : -1;
        bool same = alen == (int)b->tsrs[i].len && memcmp(again, b->tsrs[i].data, (size_t)alen) == 0;
        OPENSSL_free(again);
        if (same) same = hk__sg_der_values_valid(b->tsrs[i].data, b->tsrs[i].len) && tst_info_is_der(resp);
        if (!resp || p != b->tsrs[i].data + b->tsrs[i].len || !same) {
            TS_RESP_free(resp);
            ERR_clear_error();
            *why = hk__strdup("invalid timestamp response");
            return -1;
        }
        int64_t gen = 0;
        TS_TST_INFO *info = TS_RESP_get_tst_info(resp);
        if (info && !asn1_time_seconds(&gen, TS_TST_INFO_get_time(info))) {
            TS_RESP_free(resp);
            ERR_clear_error();
            *why = hk__strdup("invalid timestamp response: genTime is not a DER GeneralizedTime");
            return -1;
        }
        if (info) {
            for (size_t k = 0; k < root->ntsas; k++) {
                const hk_sg_ca *tsa = &root->tsas[k];
                if (gen < tsa->start || gen > tsa->end) continue; /* both ends inclusive (conformance) */
                if (verify_with(tsa, resp, gen, &b->signature)) {
                    times[(*ntimes)++] = gen;
                    break;
                }
            }
        }
        TS_RESP_free(resp);
    }
    ERR_clear_error();
    return 0;
}

/* DER value checks OpenSSL's decoder leaves out. d2i_* takes the content of a PrintableString,
 * a time or a UTF8String as it comes, and an AlgorithmIdentifier's parameters as ANY; re-encoding
 * gives the same bytes back, so tsa.c's strict-DER test cannot see such a response is not a valid
 * encoding of its type (X.680 character sets, X.690 11.7/11.8 time forms, RFC 5754 / RFC 5758
 * parameters). sigstore-python's parser refuses them and fails the bundle; hubkern holds RFC 3161
 * responses to the same: malformed is refused, not skipped as merely unverifiable. */
#include "sigstore/sg_impl.h"

#include <string.h>

#define MAX_DEPTH 32

static bool digits(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9') return false;
    return true;
}

static int num(const unsigned char *p) {
    return (p[0] - '0') * 10 + (p[1] - '0');
}

/* MMDDHHMMSS at p: ranges only (day 31 at most, as the ASN.1 syntax; OpenSSL checks the calendar) */
static bool date_time(const unsigned char *p) {
    return digits(p, 10) && num(p) >= 1 && num(p) <= 12 && num(p + 2) >= 1 && num(p + 2) <= 31 && num(p + 4) <= 23 &&
           num(p + 6) <= 59 && num(p + 8) <= 59;
}

static bool utc_time(const unsigned char *p, size_t n) { /* YYMMDDHHMMSSZ */
    return n == 13 && digits(p, 2) && date_time(p + 2) && p[12] == 'Z';
}

static bool generalized_time(const unsigned char *p, size_t n) { /* YYYYMMDDHHMMSS[.f+]Z, no trailing 0 */
    if (n < 15 || !digits(p, 4) || !date_time(p + 4) || p[n - 1] != 'Z') return false;
    if (n == 15) return true;
    return n >= 17 && p[14] == '.' && digits(p + 15, n - 16) && p[n - 2] != '0';
}

static bool printable(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr(" '()+,-./:=?", c);
        if (!ok || c == 0) return false;
    }
    return true;
}

static bool ascii(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] >= 0x80) return false;
    return true;
}

static bool utf8(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t k = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 9;
        if (k == 9 || (k == 1 && c < 0xc2) || i + k >= n) return false;
        for (size_t j = 1; j <= k; j++)
            if ((p[i + j] & 0xc0) != 0x80) return false;
        i += k + 1;
    }
    return true;
}

typedef struct tlv {
    unsigned tag; /* first identifier octet; high tag numbers are kept as 0x1f | class/constructed */
    const unsigned char *val;
    size_t len;
} tlv;

/* One TLV at *p (definite lengths only). */
static bool next(tlv *t, const unsigned char **p, const unsigned char *end) {
    const unsigned char *q = *p;
    if (end - q < 2) return false;
    t->tag = *q++;
    if ((t->tag & 0x1f) == 0x1f) { /* high tag number: skip its octets */
        while (q < end && (*q & 0x80)) q++;
        if (q >= end) return false;
        q++;
        if (q >= end) return false;
    }
    size_t len = *q++;
    if (len & 0x80) {
        size_t nb = len & 0x7f;
        if (nb == 0 || nb > sizeof(size_t) || (size_t)(end - q) < nb) return false;
        len = 0;
        for (size_t i = 0; i < nb; i++) len = (len << 8) | *q++;
    }
    if ((size_t)(end - q) < len) return false;
    t->val = q;
    t->len = len;
    *p = q + len;
    return true;
}

/* DER of the OIDs whose AlgorithmIdentifier parameters are fixed: SHA-1/2 digests (NULL or
 * absent, RFC 5754) and ECDSA signatures (absent, RFC 5758). */
static const struct {
    unsigned char oid[9];
    unsigned char len;
    bool null_ok;
} FIXED[] = {
    {{0x2b, 0x0e, 0x03, 0x02, 0x1a}, 5, true},                               /* sha1 */
    {{0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01}, 9, true},       /* sha256 */
    {{0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02}, 9, true},       /* sha384 */
    {{0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03}, 9, true},       /* sha512 */
    {{0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02}, 8, false},            /* ecdsa-with-SHA256 */
    {{0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03}, 8, false},            /* ecdsa-with-SHA384 */
    {{0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x04}, 8, false},            /* ecdsa-with-SHA512 */
};

/* A SEQUENCE whose first element is one of FIXED: its parameters must be as the OID defines. */
static bool algorithm_ok(const unsigned char *p, size_t n) {
    const unsigned char *end = p + n;
    tlv oid;
    if (!next(&oid, &p, end) || oid.tag != 0x06) return true; /* not an AlgorithmIdentifier */
    for (size_t i = 0; i < HK_ARRAY_LEN(FIXED); i++) {
        if (oid.len != FIXED[i].len || memcmp(oid.val, FIXED[i].oid, oid.len) != 0) continue;
        if (p == end) return true;
        tlv param;
        if (!next(&param, &p, end) || p != end) return false;
        return FIXED[i].null_ok && param.tag == 0x05;
    }
    return true;
}

/* Content that is exactly a sequence of TLVs (one level). */
static bool parses(const unsigned char *p, size_t n) {
    const unsigned char *end = p + n;
    while (p < end) {
        tlv t;
        if (!next(&t, &p, end)) return false;
    }
    return true;
}

/* The values of every element. A constructed value whose content does not parse is left opaque
 * (its siblings are still checked): OpenSSL parsed around it (inside an ANY, e.g. a signed
 * attribute), the signature covers it, and sigstore-python does not look inside it either. */
static bool walk(const unsigned char *p, size_t n, int depth) {
    if (depth > MAX_DEPTH) return true; /* deeper than any RFC 3161 structure: left opaque */
    const unsigned char *end = p + n;
    while (p < end) {
        tlv t;
        if (!next(&t, &p, end)) return true; /* callers pass content that parses */
        if (t.tag & 0x20) { /* constructed */
            if (!parses(t.val, t.len)) continue;
            if (t.tag == 0x30 && !algorithm_ok(t.val, t.len)) return false;
            if (!walk(t.val, t.len, depth + 1)) return false;
            continue;
        }
        bool ok = true;
        switch (t.tag) {
        case 0x01: ok = t.len == 1 && (t.val[0] == 0x00 || t.val[0] == 0xff); break; /* BOOLEAN */
        case 0x05: ok = t.len == 0; break;                                            /* NULL */
        case 0x0c: ok = utf8(t.val, t.len); break;                                    /* UTF8String */
        case 0x13: ok = printable(t.val, t.len); break;                               /* PrintableString */
        case 0x16: ok = ascii(t.val, t.len); break;                                   /* IA5String */
        case 0x17: ok = utc_time(t.val, t.len); break;                                /* UTCTime */
        case 0x18: ok = generalized_time(t.val, t.len); break;                        /* GeneralizedTime */
        default: break;
        }
        if (!ok) return false;
    }
    return true;
}

bool hk__sg_der_values_valid(const unsigned char *der, size_t len) {
    if (!der) return false;
    return !parses(der, len) || walk(der, len, 0); /* unparseable at the top: tsa.c's DER check decides */
}

/* The inclusion proof's checkpoint: a signed note (transparency-dev "signed note" format,
 * https://github.com/transparency-dev/formats/blob/main/log/README.md):
 *
 *   <origin>\n<tree size>\n<base64 root hash>\n[other lines\n]\n— <name> <base64(4-byte key hint || sig)>\n...
 *
 * One signature line must carry the hint of the entry's log (first 4 bytes of its log id) and
 * verify over the note text with that log's key; the note's root hash and size must be the
 * proof's. */
#include "sigstore/sg_impl.h"

#include <stdlib.h>
#include <string.h>

#define EM_DASH "\xe2\x80\x94"

static int fail(char **why, char *msg) {
    *why = msg;
    return -1;
}

/* Note body: lines up to the blank line. Checks origin, size, root hash. */
static int check_note(const hk_sg_bundle *b, const char *note, size_t len, char **why) {
    char *text = hk__strndup(note, len);
    if (!text) return fail(why, hk__strdup("out of memory"));
    char *lines[3] = {0};
    char *p = text;
    int n = 0;
    /* the note ends with '\n'; each of the first three lines must be present and non-empty */
    while (n < 3) {
        char *nl = strchr(p, '\n');
        if (!nl) break;
        *nl = '\0';
        lines[n++] = p;
        p = nl + 1;
    }
    int rc = -1;
    int64_t size = 0;
    hk_sg_bytes root = {0};
    cJSON *num = NULL;
    if (n < 3 || !*lines[0]) {
        *why = hk__strdup("malformed checkpoint: too few lines or empty origin");
        goto done;
    }
    num = cJSON_CreateString(lines[1]);
    if (!num || !hk__sg_json_int64(&size, num) || size < 0 || lines[1][0] == '-') {
        *why = hk__strdup("malformed checkpoint: invalid log size");
        goto done;
    }
    if (!hk__sg_b64_decode(&root, lines[2]) || root.len != 32) {
        *why = hk__strdup("malformed checkpoint: invalid root hash");
        goto done;
    }
    if (b->root_hash.len != 32 || memcmp(root.data, b->root_hash.data, 32) != 0) {
        *why = hk__strdup("checkpoint root hash differs from the inclusion proof's root hash");
        goto done;
    }
    if (size != b->tree_size) {
        *why = hk__asprintf("checkpoint tree size %lld differs from the inclusion proof's %lld", (long long)size,
                           (long long)b->tree_size);
        goto done;
    }
    rc = 0;
done:
    cJSON_Delete(num);
    free(root.data);
    free(text);
    return rc;
}

int hk__sg_check_checkpoint(const hk_sigstore_trust_root *root, const hk_sg_bundle *b, char **why) {
    const char *env = b->checkpoint;
    const char *sep = strstr(env, "\n\n");
    if (!sep || strstr(sep + 1, "\n\n"))
        return fail(why, hk__strdup("malformed checkpoint: must contain exactly one blank line before the signatures"));
    size_t note_len = (size_t)(sep - env) + 1; /* the note includes its final newline */
    const char *sigs = sep + 2;
    size_t slen = strlen(sigs);
    if (slen == 0 || sigs[slen - 1] != '\n')
        return fail(why, hk__strdup("malformed checkpoint: signature block empty or not newline-terminated"));
    if (b->log_id.len != 32) return fail(why, hk__strdup("log id is not 32 bytes"));

    /* every signature line must be well formed, the log's and the witnesses' alike (a malformed
     * line makes the note malformed, as Go's note.Open and sigstore-python hold); the first line
     * with the log's key hint is the one verified */
    hk_sg_bytes mine = {0};
    const char *p = sigs;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t ll = (size_t)(nl - p);
        if (ll < 4 || strncmp(p, EM_DASH " ", 4) != 0) {
            free(mine.data);
            return fail(why, hk__strdup("malformed checkpoint: signature line does not start with an em dash"));
        }
        const char *name = p + 4, *space = memchr(name, ' ', (size_t)(nl - name));
        if (!space || space == name || space + 1 >= nl) {
            free(mine.data);
            return fail(why, hk__strdup("malformed checkpoint: signature line is not '— name signature'"));
        }
        char *sig64 = hk__strndup(space + 1, (size_t)(nl - space - 1));
        hk_sg_bytes sig = {0};
        bool ok = sig64 && !strchr(sig64, ' ') && hk__sg_b64_decode(&sig, sig64);
        free(sig64);
        if (!ok || sig.len < 5) {
            free(sig.data);
            free(mine.data);
            return fail(why, hk__strdup("malformed checkpoint: signature is not base64 of hint and signature"));
        }
        if (!mine.data && memcmp(sig.data, b->log_id.data, 4) == 0) mine = sig;
        else free(sig.data);
        p = nl + 1;
    }
    if (mine.data) {
        const hk_sg_key *k = hk__sg_keyring_verify(root->tlogs, root->ntlogs, b->log_id.data, 32, -1, mine.data + 4,
                                                  mine.len - 4, env, note_len);
        free(mine.data);
        if (!k) return fail(why, hk__strdup("checkpoint signature does not verify with the log's key"));
        return check_note(b, env, note_len, why);
    }
    char hex[65];
    hk__hex(hex, b->log_id.data, 32);
    return fail(why, hk__asprintf("checkpoint has no signature for log id %s", hex));
}

/* Internals of the Hub client (libhub/src/client). Not installed. Includes the headers of each part
 * (hub_internal.h: the handle; http.h / url.h: HTTP plumbing; download.h: blobs; tree.h: listings)
 */
#ifndef HK_CLIENT_INTERNAL_H
#define HK_CLIENT_INTERNAL_H

#include "client/download.h"
#include "client/http.h"
#include "client/hub_internal.h"
#include "client/tree.h"
#include "client/url.h"
#include "hubkern/hub.h"
#include "internal.h"
#include "util/text.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>

/* The metadata.json digest check lives in the cache layer (cache/cache.h); the variant choice in
 * the variant layer (hk_choose_variant, hubkern/variant.h). */

#endif

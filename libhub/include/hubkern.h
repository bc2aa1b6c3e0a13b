/* hubkern — native client for the Hugging Face Kernel Hub. Umbrella header: the API a loader needs,
 * one header per concern (common, cache, env, variant, hub, kernel, call, arch, lockfile,
 * signature). The store-writing primitives of mirrors and tools are in hubkern/sys/ and not here. */
#ifndef HUBKERN_H
#define HUBKERN_H

#include "hubkern/common.h"
#if __has_include("hubkern/cache.h")
#include "hubkern/cache.h"
#endif
#if __has_include("hubkern/env.h")
#include "hubkern/env.h"
#endif
#if __has_include("hubkern/variant.h")
#include "hubkern/variant.h"
#endif
#if __has_include("hubkern/hub.h")
#include "hubkern/hub.h"
#endif
#if __has_include("hubkern/kernel.h")
#include "hubkern/kernel.h"
#endif
#if __has_include("hubkern/call.h")
#include "hubkern/call.h"
#endif
#if __has_include("hubkern/arch.h")
#include "hubkern/arch.h"
#endif
#if __has_include("hubkern/lockfile.h")
#include "hubkern/lockfile.h"
#endif
#if __has_include("hubkern/signature.h")
#include "hubkern/signature.h"
#endif

#endif

/* hubkern — native client for the Hugging Face Kernel Hub. Umbrella header. */
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
#if __has_include("hubkern/signature.h")
#include "hubkern/signature.h"
#endif

#endif

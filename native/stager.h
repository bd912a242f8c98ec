// The background stagers' interface to the rest of the shim (stager.c):
// the process cache (process_cache_stagers.c, process_cache_isolates.c)
// creates, stops and frees them for the isolates it lends them to.

#ifndef MTC_STAGER_H
#define MTC_STAGER_H

#include <stdint.h>

#include "shim.h"

int32_t mtc_stager_create(int32_t device, int32_t slots, double slot_bytes, double *out);
int32_t mtc_stager_stop(addr_t stager, double timeout_ms);
int32_t mtc_stager_destroy(addr_t stager);

#endif

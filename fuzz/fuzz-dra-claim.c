/* libFuzzer target: what DRA takes from the API server (a ResourceClaim
 * and its allocation), decoded for one driver and pool.  Every input must
 * either decode into devices of that driver and pool or be refused with a
 * message; nothing else.  Seeds: fuzz/corpus/fuzz-dra-claim/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra/dra.h"
#include "fuzz-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        json_error_t err;
        json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &err);
        if (!j)
                return 0;
        struct dra_claim c = { 0 };
        struct diag why = { 0 };
        int r = dra_claim_decode(j, "8f0e6c1a-1111-4222-8333-444455556666", "gpu.nvidia.com",
                                 "node-a", &c, &why);
        if (r == 0) {
                if (c.n_devices == 0)
                        abort();
                for (size_t i = 0; i < c.n_devices; i++)
                        if (strcmp(c.devices[i].pool, "node-a") != 0)
                                abort();
                dra_claim_release(&c);
        } else if (!why.message[0]) {
                abort();
        }
        dra_uid_valid(json_string_value(json_object_get(json_object_get(j, "metadata"), "uid")));
        json_decref(j);
        return 0;
}

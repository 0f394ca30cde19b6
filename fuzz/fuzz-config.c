/* libFuzzer target for the config-file parser: any bytes go to
 * config_parse_yaml on a defaults config, which is then freed.  It must
 * never crash, hang or leak, whatever the input (ASan/UBSan watch). */
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "devices/device.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct devlet_config *cfg = config_new_defaults(dev_config_families());
        struct diag diag;
        char buf[1024];
        if (config_parse_yaml("fuzz.yaml", (const char *)data, size, cfg, &diag) < 0)
                diag_format(&diag, buf, sizeof(buf));
        config_free(cfg);
        return 0;
}

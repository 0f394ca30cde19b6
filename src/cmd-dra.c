/* `devlet dra cleanup [flags] [DRIVER...]`: deletes this node's
 * ResourceSlices of the drivers named (default: every driver a device
 * family of devlet publishes), for operators uninstalling devlet.  The
 * API server and node come from the usual flags (--kubeconfig,
 * --node-name). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "cmd.h"
#include "config/config.h"
#include "devices/device.h"
#include "dra/dra.h"

int cmd_dra(int argc, char **argv)
{
        if (argc < 2 || strcmp(argv[1], "cleanup") != 0) {
                fprintf(stderr, "usage: devlet dra cleanup [flags] [DRIVER...]\n");
                return EXIT_USAGE;
        }
        struct devlet_config *cfg = NULL;
        int argi = 0;
        int r = cmd_load_config(argc - 1, argv + 1, &cfg, &argi);
        if (r != 0)
                return r;
        _cleanup_strv_free_ char **drivers = NULL;
        for (int i = argi + 1; i < argc; i++)
                drivers = strv_push(drivers, argv[i]);
        bool named = drivers != NULL;
        for (size_t i = 0; !named && dev_backends[i]; i++)
                if (dev_backends[i]->dra_driver)
                        drivers = strv_push(drivers, dev_backends[i]->dra_driver);
        struct diag why = { 0 };
        r = dra_cleanup_node(cfg, drivers, &why);
        config_free(cfg);
        if (r < 0) {
                char buf[DIAG_FORMAT_MAX];
                fprintf(stderr, "devlet dra cleanup: %s\n", diag_format(&why, buf, sizeof(buf)));
                return 1;
        }
        for (size_t i = 0; drivers && drivers[i]; i++)
                printf("deleted the ResourceSlices of %s\n", drivers[i]);
        return 0;
}

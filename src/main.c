/* Placeholder until the CLI lands. */
#include <stdio.h>

int main(void)
{
        puts("devlet " DEVLET_VERSION);
        return 0;
}

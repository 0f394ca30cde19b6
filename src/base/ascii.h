/* ASCII character tests the parsers share, free of the locale (ctype.h's
 * answers depend on it).  Header only; knows nothing of devlet. */
#ifndef DEVLET_BASE_ASCII_H
#define DEVLET_BASE_ASCII_H

/* The value of a hex digit (either case), or -1 for any other byte. */
static inline int ascii_hex_value(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

#endif

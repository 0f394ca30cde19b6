/* SipHash-2-4 with a 128-bit output (Aumasson and Bernstein's keyed PRF),
 * written from the paper: a fast keyed hash for tables whose keys a peer
 * chooses, and for remembering a secret by a digest no one without the
 * key can match or reverse.  Knows nothing of devlet. */
#ifndef DEVLET_BASE_SIPHASH_H
#define DEVLET_BASE_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

#define SIPHASH_KEY_SIZE 16
#define SIPHASH_OUT_SIZE 16

/* out = SipHash-2-4-128(key, data[0..n)).  Never fails. */
void siphash128(const uint8_t key[SIPHASH_KEY_SIZE], const void *data, size_t n,
                uint8_t out[SIPHASH_OUT_SIZE]);

#endif
